// The Import panel's upload (the `importUpload` call). The browser cannot hand over a path, so
// it sends the bytes: they go to a private temporary folder under the uploaded name (detection
// looks at the extension), are imported like any file, and the folder is removed. Messages and
// the summary's file lines name the uploaded file (its path in a chosen folder), never the
// temporary path.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MAX_UPLOAD_BYTES, type CallInput, type ImportSummary } from '../../src-shared/contract.js';
import { UserError } from '../../src-shared/types.js';
import type { WorkspaceApi } from '../workspace/workspace-api.js';

export async function importUploaded(workspace: WorkspaceApi, { fileName, dataBase64, format, inFolder }: CallInput<'importUpload'>): Promise<ImportSummary> {
  const bytes = Buffer.from(dataBase64, 'base64');
  if (bytes.length > MAX_UPLOAD_BYTES) {
    throw new UserError(`${fileName} is larger than the ${MAX_UPLOAD_BYTES / 1024 / 1024} MB upload limit; import it by path or with 'hindsight import'.`);
  }
  const safeName = path.basename(fileName).replace(/[^\w.\- ]+/g, '_') || 'upload.json';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-upload-'));
  const tmpFile = path.join(dir, safeName);
  const renameInText = (text: string) => text.split(tmpFile).join(fileName).split(dir).join('(upload)');
  try {
    fs.writeFileSync(tmpFile, bytes, { mode: 0o600 });
    // A file of a chosen folder that is not a chat export is skipped, as in a folder import by path.
    const summary = await workspace.importFiles([tmpFile], format ?? 'auto', { inFolder: inFolder === true });
    const files = summary.files.map((f) => ({ ...f, path: renameInText(f.path), reason: f.reason && renameInText(f.reason) }));
    return { ...summary, warnings: summary.warnings.map(renameInText), files };
  } catch (err) {
    if (err instanceof Error) err.message = renameInText(err.message);
    throw err;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
