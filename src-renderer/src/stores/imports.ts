// The Import panel's state: the format chosen, the import running, and the last batch's result,
// one line per file with the total, kept here rather than in the panel so that it survives the
// first-run screen giving way to the Sessions page after the first file lands. Every file of a
// batch is imported (one call, one transaction each); a file that fails is listed with why and
// the others still import.
import { defineStore } from 'pinia';
import type { ImportSummary } from '../../../src-shared/contract.js';
import type { ImportFileResult } from '../../../src-shared/views.js';
import { pickFolderFiles } from '../../../src-shared/import-files.js';
import type { SourceFormat } from '../../../src-shared/types.js';
import { api, errorMessage } from '../api/client';
import { plural } from '../format';
import { useAppStore } from './app';
import { useNewSessionsStore } from './new-sessions';

/** One file's line: the back end's result, or `failed` (nothing of it imported) with the error. */
export type ImportLine = Omit<ImportFileResult, 'outcome'> & { outcome: ImportFileResult['outcome'] | 'failed' };

export interface ImportBatch {
  /** What was imported: a file name, "3 files", a folder, "the sample data". */
  label: string;
  lines: ImportLine[];
  total: Pick<ImportSummary, 'sessions_added' | 'sessions_updated' | 'sessions_unchanged' | 'turns' | 'samples'>;
  warnings: string[];
}

interface Job {
  name: string;
  run: () => Promise<ImportSummary>;
}

function failedLine(name: string, err: unknown): ImportLine {
  return { path: name, outcome: 'failed', format: null, reason: errorMessage(err), sessions_added: 0, sessions_updated: 0, sessions_unchanged: 0, turns: 0, samples: 0, warnings: 0 };
}

function readAsBase64(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).replace(/^data:[^,]*,/, ''));
    reader.onerror = () => reject(reader.error ?? new Error(`could not read ${file.name}`));
    reader.readAsDataURL(file);
  });
}

export const useImportStore = defineStore('imports', {
  state: () => ({
    format: 'auto' as SourceFormat | 'auto',
    /** The label of the batch running, with how far it got ("2 of 4"). */
    busy: null as string | null,
    progress: '',
    batch: null as ImportBatch | null,
  }),
  getters: {
    imported: (state) => state.batch?.lines.filter((l) => l.outcome === 'imported').length ?? 0,
    failed: (state) => state.batch?.lines.filter((l) => l.outcome === 'failed') ?? [],
    /** What the panel shows: 'importing', 'imported' (something landed), 'failed' (nothing did), or 'idle'. */
    state(): 'importing' | 'imported' | 'failed' | 'idle' {
      if (this.busy) return 'importing';
      if (!this.batch) return 'idle';
      return this.imported > 0 || this.failed.length === 0 ? 'imported' : 'failed';
    },
  },
  actions: {
    async runBatch(label: string, jobs: Job[], before: ImportLine[] = [], notes: string[] = []) {
      const app = useAppStore();
      const fresh = useNewSessionsStore();
      this.busy = label;
      this.batch = null;
      const batch: ImportBatch = {
        label, lines: [], total: { sessions_added: 0, sessions_updated: 0, sessions_unchanged: 0, turns: 0, samples: 0 }, warnings: [...notes],
      };
      for (const [i, job] of jobs.entries()) {
        this.progress = jobs.length > 1 ? `${i + 1} of ${jobs.length}: ${job.name}` : '';
        try {
          const summary = await job.run();
          batch.lines.push(...summary.files);
          for (const key of Object.keys(batch.total) as (keyof ImportBatch['total'])[]) batch.total[key] += summary[key];
          batch.warnings.push(...summary.warnings);
          fresh.add(summary.added_ids);
        } catch (err) {
          batch.lines.push(failedLine(job.name, err));
        }
      }
      batch.lines.push(...before);
      this.batch = batch;
      this.busy = null;
      this.progress = '';
      if (this.imported > 0) app.toast('success', `Imported ${label}: ${plural(batch.total.sessions_added, 'new session')}, ${batch.total.sessions_updated} updated`);
    },
    /** Files the browser chose: each uploaded and imported on its own, one line each. */
    async uploadFiles(files: File[]) {
      if (!files.length) return;
      const format = this.format;
      const label = files.length === 1 ? files[0]!.name : `${files.length} files`;
      await this.runBatch(label, files.map((file) => ({ name: file.name, run: async () => api.importUpload({ fileName: file.name, dataBase64: await readAsBase64(file), format }) })));
    },
    /** A folder the browser chose: its exports (src-shared/import-files.ts's rule), each uploaded on its own. */
    async uploadFolder(files: File[]) {
      if (!files.length) return;
      const format = this.format;
      const byPath = new Map(files.map((f) => [f.webkitRelativePath || f.name, f]));
      const pick = pickFolderFiles([...byPath.keys()]);
      const folder = [...byPath.keys()][0]!.split('/')[0] ?? 'the folder';
      const refused: ImportLine[] = pick.refused.map((reason) => ({ ...failedLine(folder, reason), outcome: 'refused', reason }));
      const notes = pick.leftAlone ? [`${folder}: ${plural(pick.leftAlone, 'file')} not .json, .jsonl or .zip left alone`] : [];
      if (!pick.files.length && !refused.length) refused.push(failedLine(folder, `${folder}: no chat export in this folder (no .json, .jsonl or .zip file)`));
      const jobs = pick.files.map((p) => ({
        name: p,
        run: async () => api.importUpload({ fileName: p, dataBase64: await readAsBase64(byPath.get(p)!), format, inFolder: true }),
      }));
      await this.runBatch(folder, jobs, refused, notes);
    },
    /** Paths on the machine that runs the back end (the native dialogs, or the path field): one import. */
    async importPaths(paths: string[]) {
      if (!paths.length) return;
      const format = this.format;
      const label = paths.length === 1 ? paths[0]! : `${paths.length} files`;
      await this.runBatch(label, [{ name: label, run: () => api.importFiles({ paths, format }) }]);
    },
    async loadSample() {
      await this.runBatch('the sample data', [{ name: 'the sample data', run: () => api.loadSampleData() }]);
    },
    dismiss() {
      this.batch = null;
    },
  },
});
