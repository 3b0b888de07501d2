// The service behind the API contract: one async function per call, over the data facade
// (WorkspaceApi), the settings file, the trainer plug and the judge plug. It knows nothing
// about transports; src-main/app/ (IPC) and http-server.ts (HTTP + SSE) call it through
// `runCall`, which validates every input first.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SESSION_FORMATS, UserError, type SessionFormat } from '../../src-shared/types.js';
import { EXPORT_FORMAT_NEEDS } from '../../src-shared/views.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';
import { type ApiHandlers, type AppInfo, type CallInput, type CaptureStatus, type ChangeReason, type ImportSummary } from '../../src-shared/contract.js';
import { demoExportFiles } from '../import/demo-data.js';
import type { EventHub } from '../workspace/event-hub.js';
import type { HostBridge } from './host.js';
import { HandoffService } from './handoff-service.js';
import { JudgeService } from './judge-service.js';
import { SettingsStore } from '../store/settings-file.js';
import { TokenViewService } from './token-view-service.js';
import { TrainingService } from './training-service.js';
import { trainMemoryInfo } from '../train/memory-check.js';
import { EvalService } from './eval-service.js';
import { LessonsService } from './lessons-service.js';
import { ChatService } from './chat-service.js';
import { CAPTURE_KEY_OFF, captureStatusOff, needCapture, type CaptureController } from './capture-calls.js';
import { RolloutsService } from './rollouts-service.js';
import { importUploaded } from './import-upload.js';
import { isModelPath } from '../model/model-path.js';
import { scanModels } from '../model/model-catalog.js';
import { graphCacheView } from '../model/graph-cache-view.js';
import { clearGraphCache } from '../model/graph-cache.js';
import { exportModel } from '../train/model-export.js';

export type { CaptureController } from './capture-calls.js';

/** Opens a database; `serve` asks for a workspace that also has what live capture needs. */
export type OpenWorkspace<W extends WorkspaceApi = WorkspaceApi> = (dbPath: string) => Promise<W>;

export interface ServiceOptions<W extends WorkspaceApi = WorkspaceApi> {
  dbPath: string;
  /** The app's resources/ folder: the demo exports and the demo model live there. */
  resourcesDir: string;
  version: string;
  transport: AppInfo['transport'];
  host: HostBridge;
  events: EventHub;
  openWorkspace: OpenWorkspace<W>;
}

export class HindsightService<W extends WorkspaceApi = WorkspaceApi> implements ApiHandlers {
  private settingsStore: SettingsStore;
  private readonly training: TrainingService;
  private readonly judges: JudgeService;
  private readonly handoff: HandoffService;
  private readonly tokenViews: TokenViewService;
  private readonly evals: EvalService;
  private readonly lessons: LessonsService;
  private readonly chats: ChatService;
  private readonly rollouts: RolloutsService;
  private capture: CaptureController | null = null;

  private constructor(
    private readonly options: ServiceOptions<W>,
    private workspace: W,
  ) {
    this.settingsStore = SettingsStore.forDatabase(workspace.dbPath, this.demoModelDir);
    this.training = new TrainingService(options.events, () => this.workspace);
    this.judges = new JudgeService(options.events, () => this.settingsStore);
    this.handoff = new HandoffService(() => this.workspace);
    this.tokenViews = new TokenViewService(options.events, () => this.settingsStore);
    this.evals = new EvalService(options.events, { workspace: () => this.workspace, replayJudge: () => this.judges.replayJudge() });
    this.lessons = new LessonsService({ workspace: () => this.workspace, judge: () => this.judges.replayJudge().judge });
    this.chats = new ChatService(options.events, { capture: () => this.capture?.hook ?? null, saved: () => this.workspace.savedChats });
    this.rollouts = new RolloutsService(async () => (await this.training.state()).runs);
  }

  static async create<W extends WorkspaceApi>(options: ServiceOptions<W>): Promise<HindsightService<W>> {
    fs.mkdirSync(path.dirname(options.dbPath), { recursive: true });
    return new HindsightService(options, await options.openWorkspace(options.dbPath));
  }

  /** `serve` plugs live capture in once its endpoint exists. */
  attachCapture(capture: CaptureController): void {
    this.capture = capture;
  }

  /** The open workspace (it changes when the user opens another database). */
  get currentWorkspace(): W {
    return this.workspace;
  }

  /** The settings of the open database. */
  get settings() {
    return this.settingsStore;
  }

  close(): void {
    void this.judges.close(); // stops a run and frees the local judge model's worker
    this.handoff.replayStop(); // the turns in flight finish and are recorded; the next start resumes
    void this.tokenViews.close(); // and the token view's model workers
    this.evals.close(); // a running evaluation stops between batches
    void this.chats.close(); // the Chat page's replies stop and its models' workers close
    this.training.close(); // a running fine-tune stops at a checkpoint, resumable next launch
    this.workspace.close();
  }

  get currentDbPath(): string {
    return this.workspace.dbPath;
  }

  private get demoModelDir(): string {
    return path.join(this.options.resourcesDir, 'models', 'stories260K');
  }

  /** The folder of the demo exports that "Load sample data" imports. */
  private get sampleDataPath(): string {
    return path.join(this.options.resourcesDir, 'samples');
  }

  private changed(reason: ChangeReason): void {
    this.options.events.emit('workspace.changed', { reason });
  }

  async appInfo(): Promise<AppInfo> {
    return {
      version: this.options.version,
      transport: this.options.transport,
      dbPath: this.workspace.dbPath,
      settingsPath: this.settingsStore.filePath,
      sampleDataPath: this.sampleDataPath,
      defaultModelDir: this.settingsStore.raw.defaultModelDir,
      defaultExportDir: path.join(path.dirname(this.workspace.dbPath), 'exports'),
      nativeDialogs: this.options.host.nativeDialogs,
      training: await this.training.availability(),
      judges: await this.judges.availability(),
    };
  }

  async stats() {
    return this.workspace.stats();
  }

  async listSessions(filter: CallInput<'listSessions'>) {
    return this.workspace.listSessions(filter);
  }

  async sourceCounts() {
    const counts = {} as Record<SessionFormat, number>;
    for (const source of SESSION_FORMATS) counts[source] = this.workspace.listSessions({ source, limit: 0 }).total;
    return counts;
  }

  async getSession({ id }: CallInput<'getSession'>) {
    return this.workspace.getSession(id);
  }

  async deleteSession({ id }: CallInput<'deleteSession'>) {
    if (this.capture) return this.capture.deleteSession(id);
    const deleted = this.workspace.deleteSession(id);
    this.changed('delete');
    return { deleted };
  }

  // The Sessions list's bulk actions (src-shared/sessions-api.ts); capture also drops deleted sessions from its log.
  async deleteSessions({ sessionIds }: CallInput<'deleteSessions'>) {
    if (this.capture) return this.capture.deleteSessions(sessionIds);
    const deleted = this.workspace.deleteSessions(sessionIds);
    this.changed('delete');
    return { deleted };
  }
  async labelSessions({ sessionIds, reward }: CallInput<'labelSessions'>) {
    const result = this.workspace.labelSessions(sessionIds, reward);
    this.changed('label');
    return result;
  }

  async captureStatus(): Promise<CaptureStatus> { return this.capture?.status() ?? captureStatusOff(this.settingsStore.view().capture); }
  async captureRollback(): Promise<CaptureStatus> { return needCapture(this.capture).rollback(); }
  async captureKey({ reveal }: CallInput<'captureKey'>) { return this.capture?.keys.view(reveal === true) ?? CAPTURE_KEY_OFF; }
  async captureKeyRegenerate() { return needCapture(this.capture).keys.regenerateView(); }

  async setLabel({ sessionId, responseTurn, patch }: CallInput<'setLabel'>) {
    const label = this.workspace.setLabel(sessionId, responseTurn, patch);
    this.changed('label');
    return label;
  }

  async importFiles({ paths, format }: CallInput<'importFiles'>) {
    const summary = await this.workspace.importFiles(paths, format ?? 'auto');
    this.changed('import');
    return summary;
  }

  /** A file the browser uploaded (./import-upload.ts). */
  async importUpload(input: CallInput<'importUpload'>): Promise<ImportSummary> {
    const summary = await importUploaded(this.workspace, input);
    this.changed('import');
    return summary;
  }

  async loadSampleData() {
    const files = demoExportFiles(this.sampleDataPath);
    if (files.length === 0) throw new UserError(`The demo exports are missing from ${this.sampleDataPath}`);
    return this.importFiles({ paths: files });
  }

  async judgeRun({ backend, hints, votes }: CallInput<'judgeRun'>) {
    const summary = await this.judges.run(this.workspace, backend, hints, votes);
    this.changed('judge');
    return summary;
  }

  /** One cancel for every kind of job (the contract's CANCEL_JOBS). */
  async cancel(input: CallInput<'cancel'>) {
    switch (input.job) {
      case 'judge': return this.judges.cancel();
      case 'tokenView': return this.tokenViews.cancel();
      case 'train': return this.training.cancel(input.runId);
      case 'eval': return this.evals.cancel();
    }
  }

  async tokenView(input: CallInput<'tokenView'>) {
    return this.tokenViews.compute(this.workspace, { ...input, modelDir: input.modelDir && expandHome(input.modelDir), adapterDir: input.adapterDir && expandHome(input.adapterDir) });
  }

  async evalStart(input: CallInput<'evalStart'>) {
    return this.evals.start({ ...input, modelDir: expandHome(input.modelDir), adapters: input.adapters.map(expandHome) });
  }

  async evalStatus() { return this.evals.status(); }

  // Lessons without training (src-main/api/lessons-service.ts).
  async lessonsGet() { return this.lessons.view(); }
  async lessonsSave({ text }: CallInput<'lessonsSave'>) { return this.lessons.save(text); }
  async lessonsDistil() { return this.lessons.distil(); }
  async lessonsWrite({ outPath }: CallInput<'lessonsWrite'>) { return this.lessons.write(expandHome(outPath)); }

  async chatStart(input: CallInput<'chatStart'>) {
    return this.chats.start({ ...input, modelDir: expandHome(input.modelDir), adapterDir: input.adapterDir && expandHome(input.adapterDir) });
  }

  async chatStatus() { return this.chats.status(); }
  async chatStop() { return this.chats.stop(); }
  async chatEnd() { return this.chats.end(); }
  async chatList() { return this.chats.list(); }
  async chatOpen({ id }: CallInput<'chatOpen'>) { return this.chats.open(id); }
  async chatDelete({ id }: CallInput<'chatDelete'>) { return this.chats.delete(id); }

  async checks() {
    return this.workspace.checks();
  }

  async reviewQueue({ limit }: CallInput<'reviewQueue'>) {
    return this.workspace.reviewQueue(limit);
  }

  async exportCounts(filter: CallInput<'exportCounts'>) { return this.workspace.exportCounts(filter); }

  async previewExport({ format, lines, ...filter }: CallInput<'previewExport'>) {
    const preview = this.workspace.previewExport(format, lines, filter);
    return { lines: preview, needs: preview.length ? null : EXPORT_FORMAT_NEEDS[format] };
  }

  async writeExport({ format, outPath, ...filter }: CallInput<'writeExport'>) {
    const resolved = path.resolve(expandHome(outPath));
    if (fs.existsSync(resolved) && fs.statSync(resolved).isDirectory()) {
      throw new UserError(`${resolved} is a folder; give a file name such as ${path.join(resolved, `${format}.jsonl`)}`);
    }
    fs.mkdirSync(path.dirname(resolved), { recursive: true });
    return this.workspace.exportJsonl(format, resolved, filter);
  }

  async handoffTrl(input: CallInput<'handoffTrl'>) {
    const initAdapter = input.initAdapter ? expandHome(input.initAdapter) : undefined;
    return this.handoff.trl({ ...input, outDir: path.resolve(expandHome(input.outDir)), ...(initAdapter ? { initAdapter } : {}) });
  }

  async handoffReplayStart(input: CallInput<'handoffReplayStart'>) {
    return this.handoff.replayStart({ ...input, outDir: path.resolve(expandHome(input.outDir)) });
  }

  async handoffReplayStatus() {
    return this.handoff.status();
  }

  async handoffReplayStop() {
    return this.handoff.replayStop();
  }

  async defaultModelDir() {
    const dir = this.settingsStore.raw.defaultModelDir;
    return { path: dir, exists: isModelPath(dir) };
  }

  async listModels() { return scanModels({ folders: this.settingsStore.raw.modelFolders }); }

  async graphCache() { return graphCacheView(this.settingsStore.raw.modelFolders); }

  async clearGraphCache() { return clearGraphCache(); }

  async exportModel({ adapterDir, modelDir, outDir, merged, lessons }: CallInput<'exportModel'>) {
    const run = path.resolve(expandHome(adapterDir)), out = outDir ? path.resolve(expandHome(outDir)) : path.join(run, 'gguf');
    const system = lessons ? this.lessons.text() : undefined;
    return exportModel({ run, model: expandHome(modelDir), out, ...(merged ? { merged } : {}), ...(system ? { system } : {}) });
  }

  async trainStatus() {
    return this.training.state();
  }

  async trainStart(config: CallInput<'trainStart'>) {
    const onPolicy = config.onPolicy && { ...config.onPolicy, ...(config.onPolicy.taskFile !== undefined ? { taskFile: path.resolve(expandHome(config.onPolicy.taskFile)) } : {}) };
    return this.training.start({ ...config, modelDir: expandHome(config.modelDir), outDir: expandHome(config.outDir), ...(onPolicy ? { onPolicy } : {}) });
  }

  async trainResume({ runId }: CallInput<'trainResume'>) {
    return this.training.resume(runId);
  }

  async trainMemory({ modelDir }: CallInput<'trainMemory'>) {
    return trainMemoryInfo(expandHome(modelDir));
  }

  async trainMetrics({ runId }: CallInput<'trainMetrics'>) {
    return { progress: this.training.metrics(runId), evals: this.training.evaluations(runId) };
  }

  async rolloutRuns() { return this.rollouts.runs(); }
  async rolloutsList(input: CallInput<'rolloutsList'>) {
    return this.rollouts.list({ ...input, runDir: input.runDir && expandHome(input.runDir) });
  }

  async rolloutsGet(input: CallInput<'rolloutsGet'>) {
    return this.rollouts.get({ ...input, runDir: input.runDir && expandHome(input.runDir) });
  }

  async split() {
    return this.workspace.split();
  }

  async setHeldOut({ sessionIds, heldOut }: CallInput<'setHeldOut'>) {
    const split = this.workspace.setHeldOut(sessionIds, heldOut);
    this.changed('split');
    return split;
  }

  async getSettings() {
    return this.settingsStore.view();
  }

  async updateSettings(patch: CallInput<'updateSettings'>) {
    const settings = this.settingsStore.update(patch);
    this.changed('settings');
    this.capture?.settingsChanged();
    return settings;
  }

  async openDatabase({ path: dbPath }: CallInput<'openDatabase'>) {
    const resolved = path.resolve(expandHome(dbPath));
    if (fs.existsSync(resolved) && fs.statSync(resolved).isDirectory()) throw new UserError(`${resolved} is a folder, not a database file.`);
    fs.mkdirSync(path.dirname(resolved), { recursive: true });
    // Open the new one first: when it fails, the current database stays open.
    const next = await this.options.openWorkspace(resolved);
    this.workspace.close();
    this.workspace = next;
    this.settingsStore = SettingsStore.forDatabase(resolved, this.demoModelDir);
    this.changed('database');
    return this.appInfo();
  }

  async pickImportFiles() {
    return { paths: await this.options.host.pickImportFiles() };
  }

  async pickSavePath({ defaultPath }: CallInput<'pickSavePath'>) {
    return { path: await this.options.host.pickSavePath(defaultPath) };
  }

  async pickFolder({ title }: CallInput<'pickFolder'>) {
    return { path: await this.options.host.pickFolder(title) };
  }

  async pickDatabase() {
    return { path: await this.options.host.pickDatabase() };
  }

  async openPath({ path: target }: CallInput<'openPath'>) {
    if (!fs.existsSync(target)) throw new UserError(`${target} does not exist.`);
    return { opened: await this.options.host.openPath(target) };
  }
}

function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p;
}
