// The app speaks app, not CLI: through the API the pages call, a CUDA failure on the
// Training page names the Device field and `npm run setup:gpu` (not --device), each export
// preview that is empty says what its own format needs, the judge backends' reasons
// read right on the Settings page that shows them, and a judge that cannot run names the
// judge's fields (not --api-key, --timeout-ms or --model, which the CLI keeps naming).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPORT_FORMATS, type ExportFormat } from '../../src-shared/views.js';
import type { TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { api, tinyTrainRun, trainToEnd } from '../helpers/api.js';
import { CUDA_PROVIDER_LIBS, ortBinaryDir } from '../../src-main/model/ort-session.js';
import { CudaUnavailableError, type CudaProblem } from '../../src-main/model/cuda-errors.js';
import { errorPayload } from '../../src-main/model/worker-serve.js';
import { reviveError } from '../../src-main/model/worker-host.js';
import { JudgeSetupError, type JudgeProblem } from '../../src-main/judge/judge-errors.js';
import { SurfaceError } from '../../src-shared/types.js';
import { runCli } from '../helpers/cli.js';
import { conv, fakeExport, tempDir, tempWorkspace } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
const cudaInstalled = CUDA_PROVIDER_LIBS.every((f) => fs.existsSync(path.join(ortBinaryDir(), f)));

let server: ServeHandle;
let dir: string;

const call = <T = any>(name: string, input: unknown = {}): Promise<T> => api<T>(server, name, input);

/** Labels the first session +1 and the others −1, so a fine-tune has samples. */
async function labelEverySession(): Promise<void> {
  const { sessions } = await call<{ sessions: { id: string }[] }>('listSessions', {});
  for (const [i, s] of sessions.entries()) await call('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: i === 0 ? 1 : -1 } });
}

/** A two-step rl run of the demo model into `outDir` (under the test's folder). */
const tinyRun = (outDir: string, changes: Partial<TrainConfig> = {}) => tinyTrainRun(MODEL, path.join(dir, outDir), changes);
const runToEnd = (config: TrainConfig) => trainToEnd(server, config);

beforeAll(async () => {
  const made = await tempWorkspace();
  dir = made.dir;
  const story = (id: string, reply: string, feedback: string) => conv(id, [['user', 'Tell me a story.'], ['assistant', reply], ['user', feedback]]);
  await made.ws.importExport(fakeExport('s.jsonl', [
    story('a', 'Once upon a time, there was a little girl named Lily.', 'Perfect, thanks!'),
    story('b', 'The dog ran to the park.', 'No, write about a cat.'),
  ]));
  made.ws.close();
  server = await serveApp({ dbPath: made.dbPath, port: 0, buildRenderer: false });
});

afterAll(async () => {
  await server?.close();
});

describe('export previews say what their own format needs', () => {
  const needsWords: Record<ExportFormat, RegExp[]> = {
    samples: [/every sample/i],
    openclaw: [/every sample/i],
    kto: [/\+1 or −1/],
    sft: [/\+1/, /repair/i],
    dpo: [/regenerat/i, /differ/i, /repair/i],
    sdft: [/hint/i],
  };

  it('an unlabelled database: samples and openclaw have lines; each other format names its own need', async () => {
    for (const format of EXPORT_FORMATS) {
      const preview = await call<{ lines: string[]; needs: string | null }>('previewExport', { format, lines: 5 });
      if (format === 'samples' || format === 'openclaw') {
        expect(preview.lines).toHaveLength(2);
        expect(preview.needs).toBeNull();
        continue;
      }
      expect(preview.lines, format).toEqual([]);
      for (const word of needsWords[format]) expect(preview.needs, format).toMatch(word);
      if (format !== 'kto') expect(preview.needs, format).not.toMatch(/KTO/);
    }
  });

  it('samples and openclaw, with nothing imported, ask for chats', async () => {
    const empty = await serveApp({ dbPath: path.join(tempDir(), 'empty.db'), port: 0, buildRenderer: false });
    try {
      const previous = server;
      server = empty;
      try {
        for (const format of ['samples', 'openclaw'] as const) {
          const preview = await call<{ lines: string[]; needs: string | null }>('previewExport', { format, lines: 5 });
          expect(preview.lines).toEqual([]);
          expect(preview.needs).toMatch(/every sample/i);
          expect(preview.needs).toMatch(/import/i);
        }
      } finally {
        server = previous;
      }
    } finally {
      await empty.close();
    }
  });
});

describe('the judge backends on the Settings page', () => {
  it('say what is missing without sending the user to the page they are on', async () => {
    const info = await call<{ judges: Record<string, { available: boolean; reason: string | null }> }>('appInfo');
    expect(info.judges.openai!.available).toBe(false);
    for (const backend of ['local', 'openai']) {
      const reason = info.judges[backend]!.reason;
      if (reason !== null) expect(reason).not.toMatch(/in Settings/i);
    }
    expect(info.judges.openai!.reason).toMatch(/base URL and model name/);
  });
});

describe('a CUDA failure in the app', () => {
  const problems: CudaProblem[] = [
    { kind: 'platform', platform: 'darwin/arm64' },
    { kind: 'not-installed', missing: ['libonnxruntime_providers_cuda.so'], dir: '/x/bin' },
    { kind: 'no-session', reason: 'CUDA driver version is insufficient' },
  ];

  it('keeps its problem across the worker boundary; the CLI wording names --device, the app wording the Device field', () => {
    for (const problem of problems) {
      const revived = reviveError(errorPayload(new CudaUnavailableError(problem)));
      expect(revived).toBeInstanceOf(CudaUnavailableError);
      expect((revived as CudaUnavailableError).problem).toEqual(problem);
      expect(revived.message).toMatch(/^--device cuda/);
      expect(revived.message).toContain('--device cpu');
      const app = (revived as CudaUnavailableError).forApp();
      expect(app).not.toMatch(/--device/);
      expect(app).toContain('Device field');
      if (problem.kind !== 'platform') expect(app).toContain('npm run setup:gpu');
    }
    expect(new CudaUnavailableError(problems[1]!).message).toBe(
      '--device cuda: the ONNX Runtime CUDA provider is not installed (libonnxruntime_providers_cuda.so missing in /x/bin); ' +
        "run `npm run setup:gpu` (or `npm run setup:gpu -- --from <the onnxruntime-gpu wheel or Microsoft.ML.OnnxRuntime.Gpu.Linux nupkg of onnxruntime-node's version>` offline), or use --device cpu",
    );
  });

  it.skipIf(cudaInstalled)('a fine-tune on CUDA without the provider fails on the Training page in the app’s words', async () => {
    const runs = await call<{ runs: TrainRunInfo[] }>('trainStatus');
    expect(runs.runs).toEqual([]);
    await labelEverySession();
    const run = await runToEnd(tinyRun('adapter', { device: 'cuda' }));
    expect(run.status).toBe('failed');
    expect(run.error).toContain('Device field');
    expect(run.error).toContain('npm run setup:gpu');
    expect(run.error).not.toMatch(/--device/);
  });

  // Where `npm run setup:gpu` installed the provider (a GPU machine), the Training page's CUDA
  // choice trains there and the run says so; without an NVIDIA GPU it fails in the app's words.
  it.runIf(cudaInstalled)('a fine-tune on CUDA from the Training page runs on CUDA where the provider is installed', async () => {
    await labelEverySession();
    const run = await runToEnd(tinyRun('adapter-cuda', { device: 'cuda' }));
    if (run.status === 'finished') {
      expect(run.executionProvider).toBe('cuda');
      expect(fs.existsSync(path.join(dir, 'adapter-cuda', 'adapter_model.safetensors'))).toBe(true);
      return;
    }
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/^ONNX Runtime could not create a CUDA session/);
    expect(run.error).not.toMatch(/--device/);
  });

  it('a fine-tune on WebGPU runs on the GPU where one answers, else fails on the Training page in the app\u2019s words', async () => {
    await labelEverySession();
    const run = await runToEnd(tinyRun('adapter-webgpu', { device: 'webgpu' }));
    if (run.status === 'finished') {
      expect(run.executionProvider).toBe('webgpu');
      return;
    }
    expect(run.status).toBe('failed');
    expect(run.error).toMatch(/^WebGPU found no GPU \(.+\); it needs the GPU's Vulkan driver on Linux .*\. Install the driver and restart Hindsight, or set the Device field to CPU\.$/);
    expect(run.error).not.toMatch(/--device/);
  });

  it('the Max length field reaches the run: over the model\'s positions is refused in one line, a short one skips samples in the page\'s words', async () => {
    await labelEverySession();
    const config = (outDir: string, maxLength: number) => tinyRun(outDir, { steps: 1, maxLength });
    const tooLong = await runToEnd(config('too-long', 4096));
    expect(tooLong.status).toBe('failed');
    expect(tooLong.error).toBe("max length 4096 is more than the model's 512 positions (max_position_embeddings in config.json)");
    const short = await runToEnd(config('short', 16));
    expect(`${short.error ?? ''} ${short.notice ?? ''}`).toContain('over 16 tokens');
    await expect(call('trainStart', config('tiny', 4))).rejects.toThrow(/maxLength/);
  });
});

describe('a judge that cannot run, in the app', () => {
  /** Each problem with the flag the CLI names and the field the app names instead. */
  const cases: { problem: JudgeProblem; flag: string; field: RegExp }[] = [
    { problem: { kind: 'timeout', url: 'http://h:1/v1/chat/completions', timeoutMs: 120_000 }, flag: '--timeout-ms', field: /judge's Model field/ },
    { problem: { kind: 'key-refused', url: 'http://h:1/v1/chat/completions', status: 401, detail: 'bad key' }, flag: '--api-key', field: /judge's API key field/ },
    { problem: { kind: 'no-model-name' }, flag: '--judge-model', field: /judge's Model field/ },
    { problem: { kind: 'not-a-model-folder', dir: '/nope', flag: '--model' }, flag: '--model', field: /Local judge model folder field/ },
    { problem: { kind: 'not-a-model-folder', dir: '/nope', flag: '--judge-model' }, flag: '--judge-model', field: /Local judge model folder field/ },
    { problem: { kind: 'not-found', url: 'http://h:1/chat/completions', model: 'm', detail: 'no such model' }, flag: '', field: /Endpoint base URL.*Model field/ },
  ];

  it('the CLI wording names its flag; the app wording names the field, no flag, also after a worker boundary', () => {
    for (const { problem, flag, field } of cases) {
      const err = new JudgeSetupError(problem);
      if (flag) expect(err.message, problem.kind).toContain(flag);
      for (const revived of [err, reviveError(errorPayload(err))]) {
        expect(revived, problem.kind).toBeInstanceOf(SurfaceError);
        expect(revived.message, problem.kind).toBe(err.message);
        const app = (revived as SurfaceError).forApp();
        expect(app, problem.kind).not.toMatch(/--[a-z]/);
        expect(app, problem.kind).toMatch(field);
        expect(app, problem.kind).not.toMatch(/in Settings/i); // shown on the Settings page itself too
      }
    }
    expect(new JudgeSetupError(cases[0]!.problem).forApp()).toContain('within 120 s');
  });

  it('"Run this judge now" with a refused key or a missing folder fails in the app\'s words; the CLI names --api-key', async () => {
    const refusing = http.createServer((_req, res) => {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'invalid api key' } }));
    });
    await new Promise<void>((r) => refusing.listen(0, '127.0.0.1', () => r()));
    const baseUrl = `http://127.0.0.1:${(refusing.address() as { port: number }).port}/v1`;
    try {
      await call('importFiles', { paths: [path.resolve('test/fixtures/openai-chat.jsonl')] }); // samples no manual label covers
      await call('updateSettings', { judgeBackend: 'openai', openaiBaseUrl: baseUrl, openaiModel: 'judge', openaiApiKey: 'wrong' });
      const refused = await call('judgeRun', { backend: 'openai', hints: false }).catch((err: Error) => err.message);
      expect(refused).toMatch(/refused the API key \(HTTP 401: invalid api key\)/);
      expect(refused).toContain("judge's API key field");
      expect(refused).not.toMatch(/--api-key/);

      await call('updateSettings', { judgeBackend: 'local', localModelDir: path.join(dir, 'no-model') });
      const missing = await call('judgeRun', { backend: 'local', hints: false }).catch((err: Error) => err.message);
      expect(missing).toContain('Local judge model folder field');
      expect(missing).not.toMatch(/--model/);

      const cliDb = path.join(tempDir(), 'cli.db');
      await runCli('import', path.resolve('test/fixtures/openai-chat.jsonl'), '--db', cliDb);
      const cli = await runCli('judge', '--db', cliDb, '--backend', 'openai', '--endpoint', baseUrl, '--judge-model', 'judge', '--api-key', 'wrong');
      expect(cli.code).toBe(1);
      expect(cli.stderr).toContain('set it with --api-key (judge) or --judge-api-key (eval, train --on-policy)');
    } finally {
      refusing.close();
      await call('updateSettings', { judgeBackend: 'heuristic' });
    }
  });
});
