// The one place the API layer names the data facade's implementation, so tests and the
// desktop app share it.
import { Workspace } from '../core/workspace.js';
import type { OpenWorkspace } from './service.js';

export const openWorkspace: OpenWorkspace = (dbPath) => Workspace.open(dbPath);
