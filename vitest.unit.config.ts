import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

// `npm run test:unit`: the fast tests, for the edit–test loop: pure logic, parsers, the layout
// checks, the contract, importers and the store on temp files, the CLI in process, the op table's
// gradient check on one-op graphs. No browser, no model (no training, scoring or generation with
// a checkpoint), no spawned process or server, no Python, so not the global setup that builds the
// renderer for the browser tests (only the run's own temp folder, test/run-temp.ts). `npm test`
// runs everything, these included. A file joins the list when it takes about a second; the whole
// list stays well under a minute on 2 cores.
export const UNIT_TESTS = [
  'test/smoke.test.ts',
  'test/layout/*.test.ts',
  'test/api/cancel-contract.test.ts',
  'test/capture/sessions.test.ts',
  'test/eval/{stats,split}.test.ts',
  'test/export/{exports,golden,handoff-heldout}.test.ts',
  'test/graph/{autodiff,op-table}.test.ts',
  'test/import/{claude,files,fixtures,formats,chatgpt}.test.ts',
  'test/install/engines.test.ts',
  'test/judge/{corpus,parse,review-order,runner-rules}.test.ts',
  'test/model/{gguf-dequantize,gguf-reader,gguf-tokenizer,kv-cache,prefill-pieces,rope-parameters,sampling}.test.ts',
  'test/onpolicy/captured-label.test.ts',
  'test/pipeline/*.test.ts',
  'test/rollout/{calculator,search-history}.test.ts',
  'test/store/{jsonl-file,long-conversation,review,workspace}.test.ts',
  'test/train/{data-lines,batches,fit-max-length}.test.ts',
  'test/cli/help.test.ts',
];

// Spread, not mergeConfig: that concatenates arrays, and would keep the full include and both global
// setups. The files share their workers' module cache (isolate: false): importing src-main afresh
// for every file was most of the time, and none of these files mocks a module or changes globals.
export default defineConfig({
  ...base,
  test: { ...base.test, include: UNIT_TESTS, globalSetup: ['test/run-temp.ts'], poolOptions: { forks: { ...base.test?.poolOptions?.forks, isolate: false } } },
});
