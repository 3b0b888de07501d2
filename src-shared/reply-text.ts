/**
 * A reply as the judges and the evaluation's drill-down read it: its text, then a line for each
 * tool call it made (`[tool call] name(arguments)`), so that a reply that only called a tool is
 * not "(empty reply)". The caller clips long arguments where it must.
 */
export function replyWithCalls(content: string, calls: readonly { name: string; arguments: string }[]): string {
  return [content.trim(), ...calls.map((c) => `[tool call] ${c.name}(${c.arguments})`)].filter(Boolean).join('\n');
}

/** The calls of an OpenAI-form message (`tool_calls[].function`), as replyWithCalls takes them. */
export function messageCalls(message: { tool_calls?: readonly { function: { name: string; arguments: string } }[] }): { name: string; arguments: string }[] {
  return (message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
}
