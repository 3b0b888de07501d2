// The one place the API layer names the data facade's implementation, so tests and the
// desktop app share it.
import { Workspace } from '../workspace/workspace.js';
import type { OpenWorkspace } from './app-service.js';

export const openWorkspace: OpenWorkspace<Workspace> = (dbPath) => Workspace.open(dbPath);
