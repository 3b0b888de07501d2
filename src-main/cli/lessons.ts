// `hindsight lessons [--regenerate | --set FILE | --clear] [--out FILE] [--json] [--db PATH]`
// (docs/design.md §Lessons): the user's hints distilled into a short system prompt the base
// model follows without training. Without a flag it prints the stored lessons (the text on
// stdout, where they came from on stderr). --regenerate distils them again from the hints of the
// sessions trained on, by the LLM judge of the database's Settings (or the --judge-* flags), by
// rules with the heuristic or when the judge's answer holds none. --set stores a text the user
// wrote; --out writes the lessons to a file, as a system prompt to paste elsewhere.
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MAX_LESSONS_TEXT, type LessonsView, type StoredLessons } from '../../src-shared/lessons.js';
import { UserError } from '../../src-shared/types.js';
import { DEFAULT_JUDGE_URL, type LlmJudgeSpec } from '../judge/backends.js';
import { distillerName, distilLessonsInto } from '../judge/lessons-judge.js';
import { PRIVATE_FILE_MODE, writeFileAtomicSync } from '../store/atomic-file.js';
import { SettingsStore } from '../store/settings-file.js';
import { withWorkspace } from '../workspace/workspace.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, usageLine, UsageError, type Command } from './args.js';
import { DEVICE_OPTION, deviceFlag, JUDGE_MODEL_HELP, llmJudgeFlags } from './model-flags.js';

const DEMO_MODEL_DIR = fileURLToPath(new URL('../../resources/models/stories260K', import.meta.url));
const JUDGE = 'with --regenerate (default: the judge on the Settings page of this database)';

export const spec = {
  name: 'lessons',
  synopsis: '[--regenerate | --set FILE | --clear] [--out FILE] [options]',
  about: "Lessons without training: your hints and corrections distilled into a short system prompt that the\n" +
    "base model follows instead of being fine-tuned. Prints the stored lessons; --regenerate distils them\n" +
    "again from the hints of the sessions trained on (held-out ones never: 'hindsight eval' measures the\n" +
    'lessons on them beside your adapters), by the LLM judge when one is set, else by rules.',
  options: {
    regenerate: { type: 'boolean', default: false, help: 'distil the lessons again from the hints and store them' },
    set: { type: 'string', value: 'FILE', help: "store this file's text as the lessons ('-' reads stdin)", otherwise: 'unchanged' },
    clear: { type: 'boolean', default: false, help: 'remove the lessons' },
    out: { type: 'string', value: 'FILE', help: 'also write the lessons to FILE, as a system prompt', otherwise: 'stdout only' },
    'judge-backend': { type: 'string', value: 'heuristic|local|openai', help: 'who distils: rules (heuristic) or an LLM judge', group: JUDGE, otherwise: "the Settings page's" },
    'judge-model': { type: 'string', value: 'DIR|NAME', help: JUDGE_MODEL_HELP, group: JUDGE, required: 'with --judge-backend local|openai' },
    'judge-url': { type: 'string', value: 'URL', help: "the OpenAI-compatible server's base URL, up to /v1", group: JUDGE, otherwise: DEFAULT_JUDGE_URL },
    'judge-api-key': { type: 'string', value: 'K', help: 'bearer key for the judge server', group: JUDGE, otherwise: 'env HINDSIGHT_JUDGE_API_KEY, else none' },
    'judge-context': { type: 'string', value: 'N', help: "the OpenAI-compatible judge's context in tokens: the prompt is fitted to it", group: JUDGE, otherwise: 'learnt from its first context-length error' },
    device: { ...DEVICE_OPTION.device, group: JUDGE },
    ...DB_OPTION,
    ...jsonOption('print {lessons, hints, heldOutHints, distiller} as one JSON object'),
  },
} as const;
const USAGE = usageLine(spec);

type Values = ReturnType<typeof parseCommandArgs<typeof spec.options>>['values'];

/** The LLM judge that distils: the flags', else the database's Settings' (null: rules). */
function judgeSpec(v: Values, db: string): LlmJudgeSpec | null {
  const backend = v['judge-backend'];
  const device = deviceFlag(v.device);
  if (backend === undefined) {
    for (const k of ['judge-model', 'judge-url', 'judge-api-key', 'judge-context'] as const) if (v[k] !== undefined) throw new UsageError(`--${k} needs --judge-backend local|openai`);
    const s = SettingsStore.forDatabase(db, DEMO_MODEL_DIR).raw;
    if (s.judgeBackend === 'local') return { backend: 'local', modelDir: s.localModelDir, device };
    if (s.judgeBackend === 'openai' && s.openaiModel.trim()) {
      return { backend: 'openai', baseUrl: s.openaiBaseUrl, model: s.openaiModel, apiKey: s.openaiApiKey || undefined, contextTokens: s.openaiContextTokens || undefined };
    }
    return null;
  }
  if (backend === 'heuristic') return null;
  if (backend !== 'local' && backend !== 'openai') throw new UsageError(`--judge-backend must be heuristic, local or openai, got '${backend}'`);
  return llmJudgeFlags(backend, v, device);
}

function readText(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw new UserError(`--set ${file}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (text.length > MAX_LESSONS_TEXT) throw new UserError(`--set ${file}: ${text.length} characters; lessons are a short system prompt of at most ${MAX_LESSONS_TEXT}`);
  return text.trim();
}

function provenance(l: StoredLessons): string {
  const by = l.source === 'judge' ? `by the judge ${l.judge}` : l.source === 'rules' ? 'by rules' : 'as you wrote them';
  const from = l.source === 'edited' ? '' : ` from ${l.hints} hint${l.hints === 1 ? '' : 's'}`;
  return `lessons ${by}${from}, ${new Date(l.updatedAt).toISOString()}${l.note ? `\nnote: ${l.note}` : ''}`;
}

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  const actions = [v.regenerate, v.set !== undefined, v.clear].filter(Boolean).length;
  if (actions > 1) throw new UsageError(`give one of --regenerate, --set, --clear\n${USAGE}`);
  const db = v.db ?? defaultDbPath();
  if (!fs.existsSync(db)) throw new UserError(`no database at ${db}: import chats first`);
  const judge = v.regenerate ? judgeSpec(v, db) : null;
  if (!v.regenerate && v['judge-backend'] !== undefined) throw new UsageError('--judge-backend goes with --regenerate');
  const view = await withWorkspace(db, async (ws): Promise<LessonsView> => {
    if (v.regenerate) {
      await distilLessonsInto(ws, judge);
    } else if (v.set !== undefined) {
      const text = readText(v.set);
      ws.setLessons(text ? { text, source: 'edited', judge: null, hints: 0, updatedAt: Date.now(), note: null } : null);
    } else if (v.clear) ws.setLessons(null);
    const { hints, heldOut } = ws.lessonHints();
    return { lessons: ws.lessons(), hints: hints.length, heldOutHints: heldOut, distiller: distillerName(judge) };
  }, { access: actions ? 'write' : 'read' });
  const l = view.lessons;
  if (v.out) {
    if (!l) throw new UserError(`no lessons to write to ${v.out}: distil them first (hindsight lessons --regenerate)`);
    // Owner-only: the lessons come from private chats.
    writeFileAtomicSync(v.out, Buffer.from(l.text + '\n', 'utf8'), PRIVATE_FILE_MODE);
  }
  if (v.json) printJson(view);
  else if (l) {
    process.stdout.write(l.text + '\n');
    process.stderr.write(provenance(l) + (v.out ? `\nwritten to ${v.out}` : '') + '\n');
  } else {
    process.stderr.write(`no lessons yet: ${view.hints} hint${view.hints === 1 ? '' : 's'} to distil them from (hindsight lessons --regenerate)` +
      `${view.heldOutHints ? `; ${view.heldOutHints} of held-out sessions are left out` : ''}\n`);
  }
  return 0;
};
