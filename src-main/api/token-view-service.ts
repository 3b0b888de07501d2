// The token view from the app (docs/design.md §Token view): one reply's tokens with the hint's
// OPD advantage (teacher − student) or a trained adapter's change (adapter − base) per token.
//
// The rows and the arithmetic are the trainer's (src-main/train/token-gap.ts); the log-probs
// come from the chosen model (the settings' default model folder unless the call names one)
// scoring in its worker thread (src-main/model/local-model.ts), so the app never blocks on
// ONNX Runtime. An adapter is fed beside the base, as the capture endpoint serves it
// (src-main/train/adapted-model.ts). Progress goes out as `tokenview.progress`; a request is
// cancelled by `cancel({ job: 'tokenView' })` or by a newer request (the inspector follows the selection),
// between two worker calls. Views are cached in memory, least recently used out, under a key
// made of the model, the adapter's bytes and the very token ids scored (so the context, the
// hint and the reply are all in it): a changed hint or reply is a new key, never a stale view.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { LRUCache } from 'lru-cache';
import { UserError } from '../../src-shared/types.js';
import { defaultMaxLength } from '../../src-shared/training.js';
import type { TokenView, TokenViewMode, TokenViewResult } from '../../src-shared/token-view.js';
import type { CallInput } from '../../src-shared/contract.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { LocalModel } from '../model/local-model.js';
import type { ScoreRow } from '../model/inference-engine.js';
import { adapterKey, loadAdaptedModel } from '../train/adapted-model.js';
import { adapterChange, hintGap, replyIds, replyRow, tokenTexts } from '../train/token-gap.js';
import type { TrainRow } from '../train/batches.js';
import type { SettingsStore } from '../store/settings-file.js';
import type { EventHub } from '../workspace/event-hub.js';
import { isModelPath } from '../model/model-path.js';

/** Views kept: each is a few floats per reply token. */
const CACHE_ENTRIES = 64;
/** Models kept loaded: the base and one adapted (each is a worker with its own weights). */
const MODELS_KEPT = 2;

class Cancelled extends Error {}

/** Rejects with Cancelled as soon as the signal aborts; the work itself runs on in its worker. */
function unlessAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Cancelled());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

type Request = CallInput<'tokenView'>;

interface Scored {
  values: Float32Array;
  from: number[];
  to: number[];
}

export class TokenViewService {
  private running: AbortController | null = null;
  private readonly views = new LRUCache<string, TokenView>({ max: CACHE_ENTRIES });
  /** A model pushed out is closed; one deleted (its load failed) or cleared (close()) is not closed here. */
  private readonly models = new LRUCache<string, Promise<LocalModel>>({
    max: MODELS_KEPT,
    dispose: (m, _dir, reason) => void (reason === 'evict' && m.then((model) => model.close(), () => {})),
  });

  constructor(
    private readonly events: EventHub,
    private readonly settings: () => SettingsStore,
  ) {}

  async compute(workspace: WorkspaceApi, request: Request): Promise<TokenViewResult> {
    this.running?.abort(); // the newest request wins: the inspector moved on
    const abort = new AbortController();
    this.running = abort;
    try {
      return { cancelled: false, view: await this.view(workspace, request, abort.signal) };
    } catch (err) {
      if (err instanceof Cancelled) return { cancelled: true, view: null };
      throw err;
    } finally {
      if (this.running === abort) this.running = null;
    }
  }

  /** Stops the running computation; its caller gets `cancelled`. */
  cancel(): { cancelled: boolean } {
    if (!this.running) return { cancelled: false };
    this.running.abort();
    this.running = null;
    return { cancelled: true };
  }

  async close(): Promise<void> {
    this.running?.abort();
    const models = [...this.models.values()];
    this.models.clear();
    this.views.clear();
    await Promise.all(models.map((m) => m.then((model) => model.close(), () => {})));
  }

  private async view(workspace: WorkspaceApi, request: Request, signal: AbortSignal): Promise<TokenView> {
    const { sessionId, responseTurn, mode } = request;
    const sample = workspace.trainingSampleAt(sessionId, responseTurn);
    if (!sample) throw new UserError(`There is no sample at reply #${responseTurn} of ${sessionId}.`);
    if (mode === 'hint' && !sample.hint) throw new UserError(noHintReason(workspace, sessionId, responseTurn));
    const modelDir = path.resolve(request.modelDir ?? this.settings().raw.defaultModelDir);
    if (!isModelPath(modelDir)) throw new UserError(`There is no model at ${modelDir}: choose a model folder or .gguf file in Settings or on the Training page.`);
    const adapterDir = mode === 'adapter' ? adapterFolder(request.adapterDir) : null;
    const steps = mode === 'hint' ? 3 : 4;
    const progress = (step: number, message: string) => this.events.emit('tokenview.progress', { sessionId, responseTurn, mode, step, steps, message });

    progress(1, `Loading ${path.basename(modelDir)}`);
    const base = await unlessAborted(this.model(modelDir), signal);
    const { row, truncated } = replyRow(sample, base.tokenizer, defaultMaxLength(base.config.maxPositionEmbeddings));
    // A view is kept by the adapter's content: a retrained adapter in the same folder is another view.
    const adapted = adapterDir ? adapterKey(adapterDir) : null;
    const key = cacheKey(mode, modelDir, adapted, row);
    const cached = this.views.get(key);
    if (cached) {
      progress(steps, 'Done (cached)');
      return { ...cached, sessionId, responseTurn, cached: true };
    }
    const score = async (model: LocalModel, span: ScoreRow) => (await unlessAborted(model.score([span]), signal))[0]!;
    let scored: Scored;
    if (mode === 'hint') {
      progress(2, 'Scoring the reply after the context (student)');
      const student = await score(base, row);
      progress(3, 'Scoring the reply after the context with the hint (teacher)');
      const teacher = await score(base, row.teacher!);
      scored = { values: hintGap(row, student, teacher), from: student, to: teacher };
    } else {
      progress(2, 'Scoring the reply with the base model');
      const before = await score(base, row);
      progress(3, `Loading ${path.basename(modelDir)} with the adapter ${path.basename(adapterDir!)}`);
      const withAdapter = await unlessAborted(this.adaptedModel(modelDir, adapterDir!, adapted!, base), signal);
      progress(4, 'Scoring the reply with the adapter');
      const after = await score(withAdapter, row);
      scored = { values: adapterChange(before, after), from: before, to: after };
    }
    const view = buildView(request, { modelDir, adapterDir, hint: mode === 'hint' ? sample.hint : null, truncated }, row, scored, base);
    this.views.set(key, view);
    progress(steps, 'Done');
    return view;
  }

  /** A loaded model, kept for the next request (loading costs seconds). */
  private model(dir: string): Promise<LocalModel> {
    return this.kept(dir, () => LocalModel.load(dir, { device: 'cpu' }));
  }

  /** The model with the adapter fed beside it, in the base's form of the weights, so that before and after differ by the adapter alone. */
  private adaptedModel(modelDir: string, adapterDir: string, content: string, base: LocalModel): Promise<LocalModel> {
    return this.kept(`${modelDir}\0${content}`, () => loadAdaptedModel(modelDir, adapterDir, { device: 'cpu', quantize: base.quantize, ignoreMemory: true }));
  }

  private kept(key: string, load: () => Promise<LocalModel>): Promise<LocalModel> {
    let model = this.models.get(key);
    if (!model) {
      model = load();
      model.catch(() => this.models.delete(key));
      this.models.set(key, model);
    }
    return model;
  }
}

function buildView(
  request: Request, about: Pick<TokenView, 'modelDir' | 'adapterDir' | 'hint' | 'truncated'>, row: TrainRow, scored: Scored, model: LocalModel,
): TokenView {
  const ids = replyIds(row);
  const texts = tokenTexts(model.tokenizer, ids);
  const tokens = ids.map((id, i) => ({ id, text: texts[i]!, from: scored.from[i]!, to: scored.to[i]!, value: scored.values[i]! }));
  const mean = tokens.length ? tokens.reduce((a, t) => a + t.value, 0) / tokens.length : 0;
  return {
    mode: request.mode, sessionId: request.sessionId, responseTurn: request.responseTurn, ...about,
    tokens, mean, cached: false, executionProvider: model.executionProvider ?? 'cpu',
  };
}

function cacheKey(mode: TokenViewMode, modelDir: string, adapter: string | null, row: TrainRow): string {
  const spans = [row.inputIds, row.responseStart, row.teacher?.inputIds ?? null, row.teacher?.responseStart ?? null];
  return crypto.createHash('sha256').update(JSON.stringify([mode, modelDir, adapter, spans])).digest('hex');
}

function adapterFolder(dir: string | undefined): string {
  if (!dir) throw new UserError('Choose a trained adapter (a training run’s output folder) to see what it changes.');
  const resolved = path.resolve(dir);
  if (!fs.existsSync(resolved)) throw new UserError(`There is no adapter at ${resolved}.`);
  return resolved;
}

/** Why a sample shows no hint gap: no hint at all, or a judge's hint that training leaves out. */
function noHintReason(workspace: WorkspaceApi, sessionId: string, responseTurn: number): string {
  const label = workspace.listSamples(sessionId).find((s) => s.responseTurn === responseTurn)?.label;
  if (label?.hint) return 'This reply’s hint comes from a judge and is too short or vague for training, so it teaches nothing: write a hint to see what it would teach.';
  return 'This reply has no hint: write one (or run a judge with hints) to see what it would teach.';
}
