// `hindsight serve [--port P] [--db PATH] [--host 127.0.0.1]`: the app's UI and API for a
// browser, on loopback only, guarded by a per-launch token (see src-main/api/http-server.ts).
// Prints the URL to open, which carries the token once; runs until Ctrl+C. Chat clients of the
// OpenAI-compatible /v1 use the database's stable API key instead (`<db>.api-key`, shown in
// Settings; src-main/capture/capture-key.ts), which this command names but never prints.
import fs from 'node:fs';
import path from 'node:path';
import { assertLoopbackHost } from '../http/access.js';
import { defaultDbPath } from '../store/db-location.js';
import { serveApp } from '../api/serve-app.js';
import { UserError } from '../../src-shared/types.js';
import { DB_OPTION, intFlag, jsonOption, parseCommandArgs, printJson, UsageError, type Command } from './args.js';
import { isGgufPath, isModelPath } from '../model/model-path.js';
import { modelFlag } from './model-flags.js';
import { apiKeyPathFor } from '../store/db-companions.js';

export const DEFAULT_PORT = 8787;

export const spec = {
  name: 'serve',
  synopsis: '[options]',
  about: 'Serves the Hindsight UI and API on a loopback address for a browser, and the OpenAI-compatible\n' +
    'API under /v1. Prints the URL to open (it carries this launch\'s access token); runs until Ctrl+C.\n' +
    "/v1's API key stays the same across launches: Settings → Live capture shows it (copy, regenerate);\n" +
    'it is kept, readable by you only, in <db>.api-key beside the database.',
  options: {
    port: { type: 'string', value: 'P', help: 'port to listen on; 0 picks a free one', otherwise: String(DEFAULT_PORT) },
    host: { type: 'string', value: 'H', help: '127.0.0.1, ::1 or localhost; other addresses are refused', otherwise: '127.0.0.1' },
    capture: { type: 'boolean', help: 'turn live capture on (saved in Settings): every chat through /v1 is recorded' },
    upstream: {
      type: 'string', value: 'URL', otherwise: 'the local model',
      help: 'proxy /v1/chat/completions to this OpenAI-compatible server, e.g. http://127.0.0.1:11434/v1 (its key: env HINDSIGHT_UPSTREAM_API_KEY)',
    },
    'upstream-model': { type: 'string', value: 'M', help: 'the model name to ask the upstream for', otherwise: "the client's" },
    model: { type: 'string', value: 'DIR', help: "the model /v1 serves (a folder, a .gguf file, or a name 'hindsight models' lists)", otherwise: 'the model chosen in Settings' },
    adapter: { type: 'string', value: 'DIR', help: 'a PEFT LoRA adapter to serve applied (until the background loop trains one)', otherwise: 'none' },
    'api-only': { type: 'boolean', help: 'do not build the UI (a headless capture proxy; the UI is served only if already built)' },
    ...DB_OPTION,
    ...jsonOption('print {"url","loginUrl","port","db","apiKeyFile"} as one JSON line once listening'),
  },
} as const;

export const command: Command = async (argv) => {
  const { values } = parseCommandArgs(argv, spec);
  const host = values.host ?? '127.0.0.1';
  assertLoopbackHost(host); // before any work, so a bad --host fails fast
  const port = intFlag('port', values.port, DEFAULT_PORT, 0);
  if (port > 65535) throw new UsageError(`--port must be ≤ 65535, got ${port}`);
  const dbPath = path.resolve(values.db ?? defaultDbPath());
  if (values.model !== undefined) values.model = modelFlag(values.model, '--model', dbPath);
  if (values.upstream !== undefined && !/^https?:\/\/[^\s/]+/.test(values.upstream)) {
    throw new UsageError(`--upstream must be an http(s) base URL such as http://127.0.0.1:11434/v1, got '${values.upstream}'`);
  }
  for (const [flag, dir, file] of [['model', values.model, 'config.json'], ['adapter', values.adapter, 'adapter_config.json']] as const) {
    if (dir !== undefined && !(flag === 'model' && isGgufPath(dir) ? isModelPath(dir) : fs.existsSync(path.join(dir, file)))) throw new UserError(`--${flag} ${dir}: no ${flag === 'model' && isGgufPath(dir) ? 'such file' : `${file} there`}`);
  }
  const upstream = values.upstream
    ? { baseUrl: values.upstream, ...(values['upstream-model'] ? { model: values['upstream-model'] } : {}), ...(process.env.HINDSIGHT_UPSTREAM_API_KEY ? { apiKey: process.env.HINDSIGHT_UPSTREAM_API_KEY } : {}) }
    : undefined;
  const log = (line: string) => process.stderr.write(`hindsight serve: ${line}\n`);

  let server;
  try {
    server = await serveApp({
      dbPath,
      host,
      port,
      log,
      capture: values.capture === true,
      ...(values['api-only'] ? { buildRenderer: false } : {}),
      ...(upstream ? { upstream } : {}),
      ...(values.model ? { openaiModelDir: path.resolve(values.model) } : {}),
      ...(values.adapter ? { openaiAdapterDir: path.resolve(values.adapter) } : {}),
    });
  } catch (err) {
    if (err instanceof UserError) throw err;
    throw new UserError(`could not start: ${(err as Error).message}`);
  }
  if (values.json) printJson({ url: server.url, loginUrl: server.loginUrl, port: server.port, db: dbPath, apiKeyFile: apiKeyPathFor(server.service.currentDbPath) });
  else {
    process.stdout.write(`Hindsight is serving ${dbPath}\nOpen this URL in your browser (it carries this launch's access token):\n\n  ${server.loginUrl}\n\nPress Ctrl+C to stop.\n`);
  }

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      server.close().then(resolve, resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  return 0;
};
