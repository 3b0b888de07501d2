/**
 * DeepSeek's tool calls in a reply's text (docs/design.md §Tool-call dialects, `deepseek`):
 *
 *   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
 *   ```json
 *   {ARGUMENTS}
 *   ```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
 *
 * as DeepSeek-R1, its distills and V3 write them, or `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGUMENTS}<｜tool▁call▁end｜>`
 * (V3.1). The markers are ordinary added tokens in DeepSeek's vocabularies (not special), so
 * decoding keeps them and the calls are read from text, as Hermes `<tool_call>` blocks are, from
 * every model's reply. The closing `<｜tool▁calls▁end｜>` may be missing: DeepSeek-R1's own template
 * writes none after a single call, so a model that learnt from it stops at its end token instead.
 */
import type { OpenAIToolCall, ToolCallError } from './tool-call-shapes.js';

export const DEEPSEEK_CALLS_BEGIN = '<｜tool▁calls▁begin｜>';
const CALLS_END = '<｜tool▁calls▁end｜>';
const CALL_BEGIN = '<｜tool▁call▁begin｜>';
const CALL_END = '<｜tool▁call▁end｜>';
const SEP = '<｜tool▁sep｜>';

/** R1's call after the separator: the name alone on its line, then the arguments in a json fence. */
const FENCED = /^([^\n]+)\n```(?:json)?\n([\s\S]*?)\n?```\s*$/;

/**
 * The text with DeepSeek's call blocks taken out, and the calls they hold; a call that cannot be
 * read (no separator, arguments that are not a JSON object, no end) becomes an error entry, never
 * a throw. `callIndex` numbers the calls after those already read from the same reply.
 */
export function parseDeepSeekCalls(text: string, callIndex = 0): { content: string; toolCalls: OpenAIToolCall[]; errors: ToolCallError[] } {
  const toolCalls: OpenAIToolCall[] = [];
  const errors: ToolCallError[] = [];
  let content = '';
  let rest = text;
  for (let at = rest.indexOf(DEEPSEEK_CALLS_BEGIN); at >= 0; at = rest.indexOf(DEEPSEEK_CALLS_BEGIN)) {
    content += rest.slice(0, at);
    const body = rest.slice(at + DEEPSEEK_CALLS_BEGIN.length);
    const end = body.indexOf(CALLS_END);
    const calls = end < 0 ? body : body.slice(0, end);
    rest = end < 0 ? '' : body.slice(end + CALLS_END.length);
    for (const part of calls.split(CALL_BEGIN).slice(1)) {
      const closed = part.indexOf(CALL_END);
      const call = readCall(closed < 0 ? part : part.slice(0, closed), closed >= 0, callIndex + toolCalls.length);
      if ('error' in call) errors.push(call);
      else toolCalls.push(call);
    }
    if (!calls.includes(CALL_BEGIN)) errors.push({ error: `${DEEPSEEK_CALLS_BEGIN} with no call after it`, raw: calls.trim() });
  }
  return { content: (content + rest).trim(), toolCalls, errors };
}

function readCall(raw: string, closed: boolean, index: number): OpenAIToolCall | ToolCallError {
  if (!closed) return { error: `unterminated DeepSeek call (no ${CALL_END})`, raw: raw.trim() };
  const sep = raw.indexOf(SEP);
  if (sep < 0) return { error: `a DeepSeek call has no ${SEP}`, raw: raw.trim() };
  const before = raw.slice(0, sep).trim();
  const after = raw.slice(sep + SEP.length);
  const fenced = FENCED.exec(after.trim());
  // R1's form puts the call's type before the separator; V3.1's the name.
  const [name, argsText] = fenced ? [fenced[1]!.trim(), fenced[2]!] : [before, after];
  let args: unknown;
  try {
    args = JSON.parse(argsText.trim());
  } catch (err) {
    return { error: `invalid JSON arguments in a DeepSeek call: ${(err as Error).message}`, raw: raw.trim() };
  }
  if (!name) return { error: 'a DeepSeek call has no name', raw: raw.trim() };
  if (!args || typeof args !== 'object' || Array.isArray(args)) return { error: "a DeepSeek call's arguments are not a JSON object", raw: raw.trim() };
  return { id: `call_${index}`, type: 'function', function: { name, arguments: JSON.stringify(args) } };
}
