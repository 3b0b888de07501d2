// Entry of the model worker thread when running from TypeScript sources (CLI via tsx,
// vitest, `npm run bench:*`). A Worker does not inherit the parent's loaders in every host
// (vitest transforms modules itself), so this registers tsx explicitly and then imports the
// real entry. Compiled builds start the compiled worker (model-worker.js, trainer-worker.js,
// eval-worker.js, onpolicy-worker.js) directly and never load this.
import { register } from 'tsx/esm/api';
import { workerData } from 'node:worker_threads';

register();
await import(workerData.entry);
