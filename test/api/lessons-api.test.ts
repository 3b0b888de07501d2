// The lessons over the HTTP API (docs/design.md §Lessons): lessonsGet, lessonsDistil (by rules with
// the heuristic judge of Settings), lessonsSave, lessonsWrite; evalStart measuring them beside the
// base unless left out; exportModel writing them as the Modelfile's SYSTEM. Inputs are validated.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EvalState } from '../../src-shared/eval-api.js';
import { LESSONS_HEADER, type LessonsView } from '../../src-shared/lessons.js';
import type { ModelExportResult } from '../../src-shared/model-export-api.js';
import { serveApp, type ServeHandle } from '../../src-main/api/serve-app.js';
import { Checkpoint } from '../../src-main/model/hf-checkpoint.js';
import { initLora, loraSpecs } from '../../src-main/train/lora.js';
import { writeAdapter } from '../../src-main/train/peft.js';
import { Workspace } from '../../src-main/workspace/workspace.js';
import { writeTinyModel } from '../../tools/tiny-models.js';
import { api } from '../helpers/api.js';
import { conv, fakeExport, tempDir } from '../store/helpers.js';

const MODEL = path.resolve('resources/models/stories260K');
let dir: string;
let dbPath: string;
let server: ServeHandle;

beforeAll(async () => {
  dir = tempDir('hindsight-lessons-api-');
  dbPath = path.join(dir, 'h.db');
  const ws = await Workspace.open(dbPath);
  const chats = Array.from({ length: 6 }, (_, k) => conv(`s${k}`, [['user', 'Tell me a story.'], ['assistant', 'The end.'], ['user', 'Too short, make it longer.']]));
  await ws.importExport(fakeExport('c.jsonl', chats));
  for (let k = 0; k < 6; k++) ws.setLabel(`openai:s${k}`, 1, { reward: -1, hint: 'Tell a longer story, with a beginning and an end.' });
  ws.setHeldOut(['openai:s0', 'openai:s1'], true);
  ws.setHeldOut(['openai:s2', 'openai:s3', 'openai:s4', 'openai:s5'], false);
  ws.close();
  server = await serveApp({ dbPath, port: 0, buildRenderer: false });
}, 60_000);
afterAll(async () => {
  await server?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the lessons calls', () => {
  it('show none, distil by rules, save an edit, and write a text file', async () => {
    expect(await api<LessonsView>(server, 'lessonsGet')).toEqual({ lessons: null, hints: 4, heldOutHints: 2, distiller: 'rules' });
    const distilled = await api<LessonsView>(server, 'lessonsDistil');
    expect(distilled.lessons).toMatchObject({ text: `${LESSONS_HEADER}\n- Tell a longer story, with a beginning and an end.`, source: 'rules', hints: 4, note: null });
    const saved = await api<LessonsView>(server, 'lessonsSave', { text: '  - Write at least five sentences.\n' });
    expect(saved.lessons).toMatchObject({ text: '- Write at least five sentences.', source: 'edited', hints: 0 });
    const out = path.join(dir, 'exports', 'lessons.txt');
    expect(await api(server, 'lessonsWrite', { outPath: out })).toEqual({ path: out, chars: '- Write at least five sentences.'.length });
    expect(fs.readFileSync(out, 'utf8')).toBe('- Write at least five sentences.\n');
    await expect(api(server, 'lessonsWrite', { outPath: dir })).rejects.toThrow(/is a folder; give a file name such as .*lessons\.txt/);
    await expect(api(server, 'lessonsSave', { text: 42 })).rejects.toThrow(/text must be a string/);
  });

  it('are measured by evalStart beside the base unless left out', async () => {
    const run = async (lessons?: boolean) => {
      await api<EvalState>(server, 'evalStart', { modelDir: MODEL, adapters: [], metrics: ['likelihood'], ...(lessons === undefined ? {} : { lessons }) });
      for (;;) {
        const s = await api<EvalState>(server, 'evalStatus');
        if (s.state !== 'running') return s;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const withLessons = await run();
    expect(withLessons.state).toBe('done');
    expect(withLessons.report!.models.map((m) => m.name)).toEqual(['base', 'lessons']);
    expect(withLessons.report!.models[1]!.lessons).toBe('- Write at least five sentences.');
    expect((await run(false)).report!.models.map((m) => m.name)).toEqual(['base']);
  }, 60_000);

  it('become the Modelfile SYSTEM of exportModel with lessons: true', async () => {
    const model = path.join(dir, 'tiny');
    writeTinyModel(model, { family: 'qwen3', seed: 2 });
    const adapterDir = path.join(dir, 'run');
    const specs = loraSpecs(Checkpoint.open(model).config, ['q', 'v']);
    writeAdapter(adapterDir, { lora: { r: 2, alpha: 4, targets: ['q', 'v'] }, specs, weights: initLora(specs, 2, 1), baseModel: model });
    const r = await api<ModelExportResult>(server, 'exportModel', { adapterDir, modelDir: model, lessons: true });
    expect(fs.readFileSync(r.modelfile, 'utf8')).toContain('SYSTEM """- Write at least five sentences."""\n');
    await api(server, 'lessonsSave', { text: '' });
    await expect(api(server, 'exportModel', { adapterDir, modelDir: model, lessons: true })).rejects.toThrow(/There are no lessons yet/);
    expect(fs.readFileSync((await api<ModelExportResult>(server, 'exportModel', { adapterDir, modelDir: model })).modelfile, 'utf8')).not.toContain('SYSTEM');
  }, 60_000);
});
