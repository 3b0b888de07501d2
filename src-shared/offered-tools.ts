/**
 * The tools a conversation offered the model, in the form chat templates read them (their
 * `tools` variable): OpenAI's list of `{type: 'function', function: {name, description?,
 * parameters?}}`. A reply that calls tools was written with this list in its prompt, so
 * training, scoring and evaluation render the prompt with it too (docs/design.md §Tools offered).
 *
 * Sessions keep the list as their source gave it, in their metadata's `tools`: messages files
 * and live capture in OpenAI's form, ShareGPT files (LLaMA-Factory's) as a JSON string of bare
 * function definitions `{name, description, parameters}`. Read through here, every form is
 * OpenAI's list; an entry without a function name is left out, and no entry at all is null.
 */
export interface OfferedTool {
  type: 'function';
  function: { name: string; [key: string]: unknown };
}

export function offeredTools(value: unknown): OfferedTool[] | null {
  let list = value;
  if (typeof list === 'string') {
    try {
      list = JSON.parse(list);
    } catch {
      return null;
    }
  }
  if (!Array.isArray(list)) return null;
  const tools = list.flatMap((item): OfferedTool[] => {
    if (!item || typeof item !== 'object') return [];
    const entry = item as { type?: unknown; function?: unknown; name?: unknown };
    // OpenAI's chat form nests the function; a bare definition, or the Responses API's flat
    // `{type: 'function', name, …}`, is the function itself.
    const fn = entry.function !== undefined ? entry.function : entry.type === undefined || entry.type === 'function' ? withoutType(entry) : undefined;
    if (!fn || typeof fn !== 'object' || typeof (fn as { name?: unknown }).name !== 'string' || !(fn as { name: string }).name) return [];
    return [{ type: 'function', function: { ...(fn as { name: string }) } }];
  });
  return tools.length ? tools : null;
}

function withoutType(entry: object): object {
  const { type: _type, ...rest } = entry as { type?: unknown };
  return rest;
}
