/**
 * A user's own tools (docs/design.md §Rollouts): a JSON file of OpenAI-style schemas, each
 * call executed by POSTing `{"name", "arguments"}` to an HTTP endpoint the user runs on this
 * machine. Only loopback addresses are accepted (127.0.0.0/8, ::1, localhost, which is
 * connected as 127.0.0.1 rather than looked up), redirects are not followed and no proxy is
 * used, so a call can reach nothing but the user's own endpoint.
 *
 * The endpoint answers 2xx with the result: a JSON object's `result` (text, or any JSON,
 * sent on as JSON), else the body as text; a JSON object with `error` and no `result` is a
 * failed call. Any other status is a failed call, with the body's `error` (or its first
 * line) as the reason.
 */
import fs from 'node:fs';
import http from 'node:http';
import { UserError } from '../../src-shared/types.js';
import { BUILTIN_TOOL_NAMES } from './builtin-tools.js';
import { TOOL_NAME, type Tool, type ToolSchema } from './tools.js';

/** Most bytes read from an endpoint's answer. */
const MAX_RESPONSE_BYTES = 1 << 20;

/** Reads and checks a tools file; every problem names the file and the entry. */
export function readToolSchemas(file: string): ToolSchema[] {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UserError(code ? `cannot read ${file}: ${code}` : `${file}: invalid JSON (${(err as Error).message})`);
  }
  if (!Array.isArray(raw)) throw new UserError(`${file}: expected a JSON array of tool schemas ([{"type":"function","function":{…}}, …])`);
  const seen = new Set<string>();
  return raw.map((entry, i) => {
    const schema = checkToolSchema(entry, `${file}: tool ${i + 1}`);
    const name = schema.function.name;
    if ((BUILTIN_TOOL_NAMES as readonly string[]).includes(name)) throw new UserError(`${file}: tool ${i + 1}: '${name}' is the name of a built-in tool`);
    if (seen.has(name)) throw new UserError(`${file}: tool ${i + 1}: a second tool named '${name}'`);
    seen.add(name);
    return schema;
  });
}

/** Checks one OpenAI-style schema; `where` prefixes the one-line error. */
export function checkToolSchema(entry: unknown, where: string): ToolSchema {
  const fail = (msg: string): never => {
    throw new UserError(`${where}: ${msg}`);
  };
  if (!entry || typeof entry !== 'object' || Array.isArray(entry)) fail('expected an object {"type":"function","function":{"name",…}}');
  const e = entry as Record<string, unknown>;
  if (e.type !== 'function') fail(`"type" must be "function", got ${JSON.stringify(e.type)}`);
  const fn = e.function as Record<string, unknown> | undefined;
  if (!fn || typeof fn !== 'object' || Array.isArray(fn)) fail('"function" must be an object with "name", "description" and "parameters"');
  if (typeof fn!.name !== 'string' || !TOOL_NAME.test(fn!.name)) fail(`"function.name" must be 1–64 letters, digits, _ or -, got ${JSON.stringify(fn!.name)}`);
  if (fn!.description !== undefined && typeof fn!.description !== 'string') fail('"function.description" must be a string');
  const params = fn!.parameters;
  if (params !== undefined && (!params || typeof params !== 'object' || Array.isArray(params))) fail('"function.parameters" must be a JSON Schema object');
  return entry as ToolSchema;
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** The endpoint's URL after the loopback check; throws a one-line UserError otherwise. */
export function loopbackUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UserError(`--tool-url ${JSON.stringify(text)} is not a URL (for example http://127.0.0.1:8765/tool)`);
  }
  if (url.protocol !== 'http:') throw new UserError(`--tool-url must be http:// on this machine, got ${url.protocol}//`);
  const host = url.hostname.toLowerCase();
  if (!LOOPBACK_NAMES.has(host) && !/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)) {
    throw new UserError(`--tool-url must point at this machine (127.0.0.1, ::1 or localhost), not ${url.hostname}: user tools never reach the network`);
  }
  if (url.username || url.password) throw new UserError('--tool-url must not carry a user name or password');
  return url;
}

/** POSTs one call and returns the endpoint's result text; rejects with a one-line reason. */
export function postToolCall(url: URL, name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<string> {
  const host = url.hostname === 'localhost' ? '127.0.0.1' : url.hostname.replace(/^\[|\]$/g, '');
  const body = JSON.stringify({ name, arguments: args });
  return new Promise((resolve, reject) => {
    const req = http.request({
      host, port: url.port || 80, path: `${url.pathname}${url.search}`, method: 'POST', signal,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_RESPONSE_BYTES) req.destroy(new Error(`the answer is larger than ${MAX_RESPONSE_BYTES} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) return reject(new Error(`the tool endpoint answered ${status}: ${errorText(text)}`));
        try {
          resolve(resultText(text));
        } catch (err) {
          reject(err);
        }
      });
      res.on('error', reject);
    });
    req.on('error', (err) => reject(signal.aborted ? new Error('cancelled') : new Error(`cannot reach the tool endpoint: ${(err as NodeJS.ErrnoException).code ?? err.message}`)));
    req.end(body);
  });
}

function parsedObject(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** A 2xx body's result: `result` of a JSON object, an `error` without one is a failure, else the text. */
function resultText(text: string): string {
  const obj = parsedObject(text);
  if (obj && obj.result === undefined && obj.error !== undefined) throw new Error(`the tool reported: ${String(obj.error)}`);
  if (!obj || obj.result === undefined) return text;
  return typeof obj.result === 'string' ? obj.result : JSON.stringify(obj.result);
}

function errorText(text: string): string {
  const obj = parsedObject(text);
  if (obj && typeof obj.error === 'string') return obj.error;
  return text.split('\n')[0]!.slice(0, 200) || '(no body)';
}

/** The user's tools as registry tools, each one POSTing to `url`. */
export function userTools(schemas: readonly ToolSchema[], url: URL): Tool[] {
  return schemas.map((schema) => ({
    schema,
    run: (args, { signal }) => postToolCall(url, schema.function.name, args, signal),
  }));
}
