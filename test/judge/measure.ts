// Measures the judge's wall time per sample on the demo model (not a test; run it with
// `npx tsx test/judge/measure.ts [maxTokens]`): the local backend (the model in its worker)
// and the openai backend against Hindsight's own endpoint serving the same model, with
// 3 votes, without and with hints, on a sorting chat (3 samples; docs/design.md §Samples and next states).
import { LlmJudge } from '../../src-main/judge/llm-judge.js';
import { LocalCompleter } from '../../src-main/judge/local-completer.js';
import { OpenAiClient } from '../../src-main/judge/openai-client.js';
import { runJudge } from '../../src-main/judge/runner.js';
import { startOpenAiServer } from '../../src-main/openai/server.js';
import { DEMO_MODEL, sortingWorkspace } from './helpers.js';

const maxTokens = Number(process.argv[2] ?? 512);

async function measure(label: string, judge: LlmJudge, hints: boolean): Promise<void> {
  const ws = await sortingWorkspace();
  const summary = await runJudge(ws, judge, { hints, votes: 3, concurrency: 1 });
  const generated = ws.listSamples().flatMap((s) => s.label.votes).length * (hints ? 2 : 1);
  console.log(`${label.padEnd(34)} hints=${hints ? 'yes' : 'no '}  ${summary.judged} samples, ${generated} completions: ${(summary.msPerSample / 1000).toFixed(2)} s/sample`);
  ws.close();
}

const local = new LlmJudge(await LocalCompleter.load(DEMO_MODEL), { maxTokens });
await measure(`local (max_tokens ${maxTokens})`, local, false); // the first run also warms the sessions
await measure(`local (max_tokens ${maxTokens})`, local, false);
await measure(`local (max_tokens ${maxTokens})`, local, true);
await local.close();

const server = await startOpenAiServer({ modelDir: DEMO_MODEL, port: 0 });
const remote = new LlmJudge(new OpenAiClient({ baseUrl: server.baseUrl, model: 'stories260K', apiKey: server.token }), { maxTokens });
await measure(`openai → own endpoint (max ${maxTokens})`, remote, false); // warms the endpoint's model
await measure(`openai → own endpoint (max ${maxTokens})`, remote, false);
await measure(`openai → own endpoint (max ${maxTokens})`, remote, true);
await server.close();
