// The app speaks app, not CLI: through the API the pages call, a CUDA failure on the
// Training page names the Device field and `npm run setup:gpu` (not --device), each export
// preview that is empty says what its own format needs, and the judge backends' reasons
// read right on the Settings page that shows them.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPORT_FORMATS, type ExportFormat } from '../../src-shared/views.js';
import type { TrainConfig, TrainRunInfo } from '../../src-shared/contract.js';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { CUDA_PROVIDER_LIBS, ortBinaryDir } from '../../src-main/model/ort-session.js';
import { CudaUnavailableError, type CudaProblem } from '../../src-main/model/cuda-errors.js';
import { errorPayload } from '../../src-main/model/worker-serve.js';
import { reviveError } from '../../src-main/model/worker-host.js';
import { conv, fakeExport, tempDir, tempWorkspace } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
const cudaInstalled = CUDA_PROVIDER_LIBS.every((f) => fs.existsSync(path.join(ortBinaryDir(), f)));

let server: ServeHandle;
let dir: string;

async function call<T = any>(name: string, input: unknown = {}): Promise<T> {
  const res = await fetch(`${server.url}api/${name}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${server.token}` },
    body: JSON.stringify(input),
  });
  const body = await res.json();
  if (!body.ok) throw new Error(`${name}: ${body.error.message}`);
  return body.value as T;
}

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
        'run `npm run setup:gpu` (or `npm run setup:gpu -- --from <Microsoft.ML.OnnxRuntime.Gpu.Linux 1.23.2 nupkg or folder>` offline), or use --device cpu',
    );
  });

  it.skipIf(cudaInstalled)('a fine-tune on CUDA without the provider fails on the Training page in the app’s words', async () => {
    const runs = await call<{ runs: TrainRunInfo[] }>('trainStatus');
    expect(runs.runs).toEqual([]);
    const { sessions } = await call<{ sessions: { id: string }[] }>('listSessions', {});
    for (const [i, s] of sessions.entries()) await call('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: i === 0 ? 1 : -1 } });
    const config: TrainConfig = {
      modelDir: MODEL, outDir: path.join(dir, 'adapter'), method: 'rl', steps: 2, batchSize: 2, lr: 1e-3, optimizer: 'adamw',
      loraR: 4, loraAlpha: 8, targets: ['q', 'v'], device: 'cuda', seed: 0, checkpointEvery: 0,
    };
    const { runId } = await call<{ runId: string }>('trainStart', config);
    let run: TrainRunInfo | undefined;
    for (;;) {
      run = (await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs.find((r) => r.runId === runId);
      if (run && run.status !== 'running' && run.status !== 'cancelling') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(run!.status).toBe('failed');
    expect(run!.error).toContain('Device field');
    expect(run!.error).toContain('npm run setup:gpu');
    expect(run!.error).not.toMatch(/--device/);
  });

  it('the Max length field reaches the run: over the model\'s positions is refused in one line, a short one skips samples in the page\'s words', async () => {
    const finished = async (runId: string): Promise<TrainRunInfo> => {
      for (;;) {
        const run = (await call<{ runs: TrainRunInfo[] }>('trainStatus')).runs.find((r) => r.runId === runId);
        if (run && run.status !== 'running' && run.status !== 'cancelling') return run;
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    const { sessions } = await call<{ sessions: { id: string }[] }>('listSessions', {});
    for (const [i, s] of sessions.entries()) await call('setLabel', { sessionId: s.id, responseTurn: 1, patch: { reward: i === 0 ? 1 : -1 } });
    const config = (outDir: string, maxLength: number): TrainConfig => ({
      modelDir: MODEL, outDir: path.join(dir, outDir), method: 'rl', steps: 1, batchSize: 2, lr: 1e-3, optimizer: 'adamw',
      loraR: 4, loraAlpha: 8, targets: ['q', 'v'], device: 'cpu', seed: 0, checkpointEvery: 0, maxLength,
    });
    const tooLong = await finished((await call<{ runId: string }>('trainStart', config('too-long', 4096))).runId);
    expect(tooLong.status).toBe('failed');
    expect(tooLong.error).toBe("max length 4096 is more than the model's 512 positions (max_position_embeddings in config.json)");
    const short = await finished((await call<{ runId: string }>('trainStart', config('short', 16))).runId);
    expect(`${short.error ?? ''} ${short.notice ?? ''}`).toContain('over 16 tokens');
    await expect(call('trainStart', config('tiny', 4))).rejects.toThrow(/maxLength/);
  });
});
