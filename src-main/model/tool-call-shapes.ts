/**
 * A tool call as a reply's text is read into it (OpenAI's wire form), and a call that could not be
 * read: what ./chat-output.ts and ./deepseek-calls.ts both return, kept apart so that neither
 * imports the other's module for its types.
 */
export interface OpenAIToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A call in a reply (a `<tool_call>` block, a DeepSeek call, a marked list) whose content could not be read as one. */
export interface ToolCallError {
  error: string;
  raw: string;
}
