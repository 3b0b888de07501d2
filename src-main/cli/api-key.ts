// `hindsight api-key [--regenerate] [--db PATH] [--json]` (docs/design.md §API key): the stable key
// live-capture clients send to serve's /v1, as Settings → Live capture shows it: printed on stdout
// (where the file is on stderr), made on the first look when the database has none yet, replaced by
// --regenerate (the old key stops working at once, a running serve included). The same file and
// module as the app's (store/api-key-file.ts), so a key file it refuses is refused here in the same
// line; --regenerate replaces such a file, as Settings' Regenerate key does.
import fs from 'node:fs';
import { UserError } from '../../src-shared/types.js';
import { readOrCreateApiKey, replaceApiKey } from '../store/api-key-file.js';
import { apiKeyPathFor } from '../store/db-companions.js';
import { DB_OPTION, defaultDbPath, jsonOption, parseCommandArgs, printJson, type Command } from './args.js';

export const spec = {
  name: 'api-key',
  synopsis: '[--regenerate] [options]',
  about: "Prints the API key chat clients send to 'hindsight serve's /v1 (the key Settings → Live capture shows),\n" +
    'kept, readable by you only, in <db>.api-key beside the database and made on the first look. --regenerate\n' +
    'makes a new one: a client still sending the old key gets 401, a running serve included.',
  options: {
    regenerate: { type: 'boolean', default: false, help: 'replace the key with a new one and print it' },
    ...DB_OPTION,
    ...jsonOption('print {key, path, createdAt, regenerated} as one JSON object'),
  },
} as const;

export const command: Command = async (argv) => {
  const { values: v } = parseCommandArgs(argv, spec);
  const db = v.db ?? defaultDbPath();
  // The key belongs to a database: a mistyped --db must not leave a key file where no serve looks.
  if (!fs.existsSync(db)) throw new UserError(`no database at ${db}: 'hindsight serve' or 'hindsight import' makes one`);
  const file = apiKeyPathFor(db);
  const record = v.regenerate ? replaceApiKey(file) : readOrCreateApiKey(file);
  if (v.json) printJson({ key: record.key, path: record.path, createdAt: record.createdAt, regenerated: v.regenerate });
  else {
    process.stdout.write(`${record.key}\n`);
    const made = new Date(record.createdAt).toISOString();
    process.stderr.write(v.regenerate ? `a new API key, in ${record.path}: clients sending the old one now get 401\n` : `the API key in ${record.path}, made ${made}\n`);
  }
  return 0;
};
