/**
 * The two LLM judge prompts of docs/design.md §Judges, in our own words, with their versions.
 *
 * A label records the prompt version that produced it, so changing a prompt's wording
 * MUST bump its version: the next judge run then re-judges every label made with the old
 * wording (and leaves the rest alone).
 *
 * - Reward judge (Binary RL): sees the reply and the next state; answers \boxed{1},
 *   \boxed{-1} or \boxed{0}.
 * - Hint judge (On-Policy Distillation): does the next state reveal something that would
 *   have made the reply better? \boxed{1} with a hint in [HINT_START]…[HINT_END], or
 *   \boxed{-1}.
 *
 * - Composite reward judge (optional, docs/design.md §Composite score): rates the reply 0–100
 *   on correctness, instruction, tone and length with a reason each, then \boxed{overall}.
 *
 * All end with the boxed answer so thinking models can reason first: the parser
 * (./parse.ts) reads the last \boxed{} after any reasoning.
 */
import { messageCalls, replyWithCalls } from '../../src-shared/reply-text.js';
import type { ChatMessage } from '../../src-shared/types.js';
import type { JudgeInput } from './verdicts.js';

export const REWARD_PROMPT_VERSION = 'reward-v1';
// v2: a successful tool output is not hindsight information; a hint says how the reply should
// have been, never pastes what the tool returned (issue 33, as OpenClaw-RL's hint prompt).
export const HINT_PROMPT_VERSION = 'hint-v2';
/** The composite reward prompt (docs/design.md §Composite score); labels add its thresholds: 'composite-v1@70/30'. */
export const COMPOSITE_PROMPT_VERSION = 'composite-v1';

export interface PromptMessage {
  role: 'system' | 'user';
  content: string;
}

/**
 * Longest stretch of the reply or of the next state put into a prompt. Long pastes would
 * otherwise swamp the judge's context (and cost minutes on a CPU); the start and the end
 * of a text carry most of what a judge needs.
 */
export const MAX_SECTION_CHARS = 3000;

const REWARD_SYSTEM = `You grade one reply of an AI assistant using what happened next.
You are shown the assistant's reply and the next state: the user's next message, or the output of a tool the reply called. Treat the next state as evidence of whether the reply did what the user wanted.

Answer \\boxed{1} when the reply worked: the user moves on, agrees or thanks, or the tool returned a result that is not an error.
Answer \\boxed{-1} when it did not: the user corrects it ("no, I meant ..."), asks for it again, rephrases the request, asks for a change, or the tool reports an error. A request to change the reply counts as -1.
Answer \\boxed{0} when the next state does not show either way.

You may think first. End your answer with exactly one of \\boxed{1}, \\boxed{-1} or \\boxed{0}.`;

const HINT_SYSTEM = `You look back at one reply of an AI assistant in hindsight.
You are shown the assistant's reply and the next state: the user's next message, or the output of a tool the reply called. Decide whether the next state reveals information that would have made the reply better had the assistant known it: a fact, a preference, a constraint, a correction, or an error to avoid.

A tool's output exists only because the reply called the tool; the assistant could not have known it before. When the tool succeeded (its output is not an error), the call was the right move and its output is not hindsight: answer \\boxed{-1}. A hint says how the reply should have been; it never repeats or pastes what a tool returned.

If it does, answer \\boxed{1} and then write a hint for the assistant between [HINT_START] and [HINT_END]: one to three short sentences that say concretely what to do. Write an instruction ("Use Python 3 and add type hints."), not a verdict ("The reply was wrong.").
If it does not (the user simply moves on or thanks, or the reaction gives nothing to act on), answer \\boxed{-1} and write no hint.

You may think first. Then give your answer in this form:
\\boxed{1}
[HINT_START]<your hint>[HINT_END]
or just \\boxed{-1}.`;

const COMPOSITE_SYSTEM = `You rate one reply of an AI assistant, using what happened next as evidence.
You are shown the assistant's reply and the next state: the user's next message, or the output of a tool the reply called.

Rate the reply from 0 to 100 on each of these dimensions, each with a reason of one short sentence:
- correctness: are its facts, code or results right? An error from the tool, or a user pointing out a mistake, counts against it.
- instruction: did it do what the user asked, the way they asked? A correction, a repeated or rephrased request counts against it.
- tone: is it suitably polite and direct, without needless hedging or preaching?
- length: is it as long as the request needs, with no padding and nothing missing?

Then give one overall score from 0 to 100: how well the reply served the user, judged above all by the next state. 100 means the user got what they wanted; 0 means the reply failed them. When the next state shows neither, stay near 50.

You may think first. Then answer in exactly this form, one dimension a line:
correctness: <0-100> | <reason>
instruction: <0-100> | <reason>
tone: <0-100> | <reason>
length: <0-100> | <reason>
\\boxed{<overall score, 0-100>}`;

/** Keeps the head and the tail of an overly long text, saying how much was cut. */
export function clip(text: string, max = MAX_SECTION_CHARS): string {
  if (text.length <= max) return text;
  const head = Math.ceil(max * 0.6);
  const tail = max - head;
  return `${text.slice(0, head)}\n[… ${text.length - max} characters omitted …]\n${text.slice(text.length - tail)}`;
}

/** The reply as the judge reads it: its text, then any tool calls it made. */
function replySection(input: JudgeInput): string {
  const calls = messageCalls(input.responseMessage).map((c) => ({ ...c, arguments: clip(c.arguments, 1000) }));
  return clip(replyWithCalls(input.response, calls) || '(empty reply)');
}

function nextStateSection(input: JudgeInput): string {
  const label = input.nextState.role === 'tool' ? 'Next state (output of the tool the reply called)' : "Next state (the user's next message)";
  return `## ${label}\n${clip(input.nextState.text.trim() || '(empty)')}`;
}

export function rewardPrompt(input: JudgeInput): PromptMessage[] {
  return [
    { role: 'system', content: REWARD_SYSTEM },
    {
      role: 'user',
      content: `## Assistant reply\n${replySection(input)}\n\n${nextStateSection(input)}\n\nDid the reply fulfil the user's intent? End with \\boxed{1}, \\boxed{-1} or \\boxed{0}.`,
    },
  ];
}

export function compositePrompt(input: JudgeInput): PromptMessage[] {
  return [
    { role: 'system', content: COMPOSITE_SYSTEM },
    {
      role: 'user',
      content: `## Assistant reply\n${replySection(input)}\n\n${nextStateSection(input)}\n\nRate the reply on correctness, instruction, tone and length, then end with the overall score as \\boxed{0-100}.`,
    },
  ];
}

export function hintPrompt(input: JudgeInput): PromptMessage[] {
  return [
    { role: 'system', content: HINT_SYSTEM },
    {
      role: 'user',
      content: `## Assistant reply\n${replySection(input)}\n\n${nextStateSection(input)}\n\nDoes the next state reveal what would have made the reply better? Answer \\boxed{1} with [HINT_START]…[HINT_END], or \\boxed{-1}.`,
    },
  ];
}

/** The prompt version a label gets: the reward prompt's, plus the hint prompt's when hints were asked for. */
export function promptVersionFor(hints: boolean, rewardVersion = REWARD_PROMPT_VERSION): string {
  return hints ? `${rewardVersion}+${HINT_PROMPT_VERSION}` : rewardVersion;
}

/** A composite label's reward version names its thresholds: changing them re-judges on the next run. */
export function compositeVersion(t: { pos: number; neg: number }): string {
  return `${COMPOSITE_PROMPT_VERSION}@${t.pos}/${t.neg}`;
}

/** The replay judge's prompt (docs/design.md §Evaluation): bump on any change of wording. */
export const REPLAY_PROMPT_VERSION = 'replay-v1';

const REPLAY_SYSTEM = `You judge a new reply of an AI assistant against what really happened.
You are shown the conversation so far, the reply the assistant actually gave, how the user (or a tool) actually reacted to it, and sometimes a hint saying what would have made the reply better. Then you are shown a NEW reply, written for the same conversation in place of the original.

Use the real reaction as evidence of what the user wanted. Decide how the user would have reacted had they received the new reply instead.
Answer \\boxed{1} when the new reply would have satisfied the user: it gives what the reaction shows they wanted, or avoids what they complained about.
Answer \\boxed{-1} when it would draw the same complaint, or another one (it is wrong, off topic, or ignores the hint).
Answer \\boxed{0} when you cannot tell.

You may think first. End your answer with exactly one of \\boxed{1}, \\boxed{-1} or \\boxed{0}.`;

/** What the replay judge sees of one held-out context and one new reply. */
export interface ReplayJudgeInput {
  /** The conversation before the reply; an assistant turn's tool calls are shown after its text. */
  context: ChatMessage[];
  /** The original reply and the new one, each with its tool calls as text (src-shared/reply-text.ts). */
  original: string;
  reaction: { role: 'user' | 'tool'; text: string } | null;
  hint: string | null;
  reply: string;
}

/** The last turns of the conversation, the newest kept whole first, within one section's length. */
function conversationSection(context: ReplayJudgeInput['context']): string {
  const lines: string[] = [];
  let room = MAX_SECTION_CHARS;
  for (let i = context.length - 1; i >= 0 && room > 0; i--) {
    const text = replyWithCalls(context[i]!.content, messageCalls(context[i]!));
    const line = `[${context[i]!.role}] ${clip(text, Math.max(200, room))}`;
    lines.unshift(line);
    room -= line.length;
  }
  return lines.join('\n') || '(no earlier turns)';
}

export function replayPrompt(input: ReplayJudgeInput): PromptMessage[] {
  const reaction = input.reaction
    ? `## What happened next (${input.reaction.role === 'tool' ? 'output of the tool the reply called' : "the user's next message"})\n${clip(input.reaction.text.trim() || '(empty)')}`
    : '## What happened next\n(unknown)';
  const hint = input.hint ? `\n\n## Hint (what would have made the reply better)\n${clip(input.hint.trim())}` : '';
  return [
    { role: 'system', content: REPLAY_SYSTEM },
    {
      role: 'user',
      content: `## Conversation so far\n${conversationSection(input.context)}\n\n## Original reply\n${clip(input.original.trim() || '(empty reply)')}\n\n${reaction}${hint}\n\n## New reply\n${clip(input.reply.trim() || '(empty reply)')}\n\nWould the new reply have satisfied the user? End with \\boxed{1}, \\boxed{-1} or \\boxed{0}.`,
    },
  ];
}
