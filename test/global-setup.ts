// Builds the UI once before any test runs. Several browser tests start their own
// `hindsight serve`, and each would otherwise build a missing or stale out/renderer at the
// same moment on a fresh checkout: slow on 2 cores, and racing on the final swap.
import { ensureRendererBuilt } from '../src-main/api/renderer-build.js';

export default async function setup(): Promise<void> {
  await ensureRendererBuilt((line) => process.stderr.write(`global setup: ${line}\n`));
}
