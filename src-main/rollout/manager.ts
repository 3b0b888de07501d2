/**
 * The rollout manager (docs/design.md §Rollouts): K episodes per context, generated turn by
 * turn through one batch per turn (every running episode of every context in one
 * `policy.generate` call; a context's K first replies share its prompt), with tool calls
 * executed between turns.
 *
 * An episode ends with the first of:
 *   - `answer`: a reply without tool calls, ended by the model itself;
 *   - `max_tokens`: its generated tokens reach `maxTokens`, or the model's positions run out;
 *   - `max_turns`: a reply with tool calls after `maxTurns` replies (its calls are not run);
 *   - `tool_errors`: its failed tool calls (bad JSON, unknown tool, timeout, error) reach
 *     `toolErrorLimit` (the failing turn's calls are recorded, nothing is generated after).
 * Sample k of context c (c in the order given) has seed `seedBase + c·K + k`; later turns use
 * {@link turnSeed}. Episodes whose id is in `skip` are not generated: a resumed run gives the
 * others exactly the tokens a fresh run would (each sequence's tokens depend on its seed alone).
 */
import crypto from 'node:crypto';
import type { Episode, EpisodeFinish, EpisodeMessage, RolloutRewardSource, ToolCallRecord } from '../../src-shared/rollout.js';
import { ON_POLICY_DEFAULTS } from '../../src-shared/rollout.js';
import type { ChatToolCall } from '../../src-shared/types.js';
import { UserError } from '../../src-shared/types.js';
import { CarriedRows } from '../model/carried-rows.js';
import { madeCallId, parseReply, replyTokens } from '../model/chat-output.js';
import type { ChatMessage } from '../model/tokenizer.js';
import { turnSeed, type Policy, type PolicyOutput, type PolicyPrompt } from './policy.js';
import type { ToolRegistry, ToolSchema } from './tools.js';
import { toolTurnIds } from './turn-tokens.js';

/** Whether a parsed reply calls a tool (a call that does not parse counts: it becomes a tool turn saying so). */
const callsTools = (parsed: ReturnType<typeof parseReply>) => parsed.toolCalls.length > 0 || parsed.toolCallErrors.length > 0;

/** A prompt message of a context (a tool message names its tool). */
/**
 * A message of a context's prompt. A recorded session's assistant turn keeps its tool calls and
 * a tool turn the id of the call it answers, as the model saw them (templateView passes them on).
 */
export type PromptMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; tool_calls?: ChatToolCall[] }
  | { role: 'tool'; name: string; content: string; tool_call_id?: string };

/** How an episode's final answer is scored: +1 / −1 from the answer text. */
export interface RewardCheck {
  source: RolloutRewardSource;
  /** What the check compares answers with, as text (part of {@link contextFingerprint}). */
  key: string;
  score(answer: string): number;
}

export interface RolloutContext {
  /** Names the context in episode ids: `file:line` for a task, `session/turn` for a sample. */
  id: string;
  messages: PromptMessage[];
  /** The tools shown to the model and allowed to run; default: every tool of the registry. */
  tools?: ToolSchema[];
  /**
   * `tools` are a recorded session's (docs/design.md §Tools offered): shown to the model as the
   * session offered them, never run (they are the user's own). A reply that calls them ends its
   * episode, the calls being its answer, which the replay judge reads.
   */
  recordedTools?: boolean;
  reward?: RewardCheck;
}

export interface RolloutSettings {
  /** K: episodes per context. */
  rollouts: number;
  maxTurns: number;
  maxTokens: number;
  toolErrorLimit: number;
  seedBase: number;
  /** The training step (0 for a standalone run): part of every episode id. */
  step: number;
  /** Extra chat-template variables (e.g. `enable_thinking`). */
  templateExtra?: Record<string, unknown>;
}

export interface RunOptions extends Partial<RolloutSettings> {
  tools: ToolRegistry;
  /** Ids of episodes already done (a resumed run): not generated again. */
  skip?: ReadonlySet<string>;
  /** Hears each episode as it ends, in a fixed order; awaited before the run goes on. */
  onEpisode?: (episode: Episode) => void | Promise<void>;
}

export const episodeId = (contextId: string, sample: number, step: number) => `${contextId}#${sample}@${step}`;

/** What a call of a recorded session's tool records instead of a result (RolloutContext.recordedTools). */
export const NOT_RUN = 'not run: the tool is the recorded session\'s own; the call is the answer';

function parsedArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function settingsOf(options: RunOptions): RolloutSettings {
  const s: RolloutSettings = {
    rollouts: options.rollouts ?? ON_POLICY_DEFAULTS.rollouts,
    maxTurns: options.maxTurns ?? ON_POLICY_DEFAULTS.maxTurns,
    maxTokens: options.maxTokens ?? ON_POLICY_DEFAULTS.maxTokens,
    toolErrorLimit: options.toolErrorLimit ?? ON_POLICY_DEFAULTS.toolErrorLimit,
    seedBase: options.seedBase ?? 0,
    step: options.step ?? 0,
    templateExtra: options.templateExtra,
  };
  for (const key of ['rollouts', 'maxTurns', 'maxTokens', 'toolErrorLimit'] as const) {
    if (!Number.isInteger(s[key]) || s[key] < 1) throw new UserError(`rollouts: ${key} must be a whole number ≥ 1, got ${s[key]}`);
  }
  if (!Number.isInteger(s.seedBase) || !Number.isInteger(s.step) || s.step < 0) throw new UserError('rollouts: the seed and step must be whole numbers');
  return s;
}

/** One episode in flight. */
class Running {
  readonly messages: EpisodeMessage[];
  readonly ids: number[];
  readonly promptLength: number;
  readonly generated: { start: number; end: number }[] = [];
  readonly logprobs: number[] = [];
  turns = 0;
  toolCalls = 0;
  invalidToolCalls = 0;
  toolErrors = 0;
  /** The last reply's answer: reasoning and tool-call blocks removed. */
  answer = '';
  finish?: EpisodeFinish;
  emitted = false;
  finishedAt = 0;

  constructor(
    readonly context: RolloutContext,
    readonly contextIndex: number,
    readonly sample: number,
    readonly seed: number,
    readonly id: string,
    promptIds: number[],
    readonly tools: ToolSchema[],
    readonly contextSha256: string,
  ) {
    this.messages = context.messages.map((m) => ({ ...m }));
    this.ids = [...promptIds];
    this.promptLength = promptIds.length;
  }
}

/**
 * sha256 of what a context's episodes depend on: its prompt, its own tool list and its reward
 * check. Each episode carries it, so a resumed run can tell an episode of an edited task from
 * one of the task it has now (./episodes-file.ts `checkResumedEpisodes`).
 */
export function contextFingerprint(context: RolloutContext): string {
  const described = [context.messages, context.tools ?? null, context.reward?.key ?? null];
  return crypto.createHash('sha256').update(JSON.stringify(described)).digest('hex');
}

/** The episode messages as the chat template reads them (the on-policy teacher's prompt renders through it too). */
export function templateView(messages: readonly (EpisodeMessage | PromptMessage)[]): ChatMessage[] {
  return messages.map((m): ChatMessage => {
    if (m.role === 'tool') return { role: 'tool', name: m.name, content: m.content, ...('tool_call_id' in m && m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}) };
    return { role: m.role, content: m.content, ...('tool_calls' in m && m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}) };
  });
}

export async function runRollouts(policy: Policy, contexts: readonly RolloutContext[], options: RunOptions): Promise<Episode[]> {
  const settings = settingsOf(options);
  return new RolloutRun(policy, settings, options).run(contexts);
}

class RolloutRun {
  private readonly started = performance.now();
  /** Each turn's ended sequences' cache rows, which the next turn's prompts continue (docs/design.md §Rollouts). */
  private readonly carry = new CarriedRows();

  constructor(private readonly policy: Policy, private readonly settings: RolloutSettings, private readonly options: RunOptions) {}

  private templateOptions(tools: ToolSchema[]) {
    return { tools: tools.length ? tools : undefined, extra: this.settings.templateExtra };
  }

  private start(contexts: readonly RolloutContext[]): Running[] {
    const { rollouts: K, seedBase, step } = this.settings;
    const all: Running[] = [];
    contexts.forEach((context, c) => {
      const ids = Array.from({ length: K }, (_, k) => episodeId(context.id, k, step));
      if (ids.every((id) => this.options.skip?.has(id))) return;
      const tools = context.tools ?? this.options.tools.schemas();
      const tok = this.policy.tokenizer;
      const promptIds = tok.encode(tok.applyChatTemplate(templateView(context.messages), { ...this.templateOptions(tools), addGenerationPrompt: true }));
      const fingerprint = contextFingerprint(context);
      ids.forEach((id, k) => {
        if (!this.options.skip?.has(id)) all.push(new Running(context, c, k, (seedBase + c * K + k) >>> 0, id, promptIds, tools, fingerprint));
      });
    });
    return all;
  }

  async run(contexts: readonly RolloutContext[]): Promise<Episode[]> {
    try {
      return await this.turns(contexts);
    } finally {
      this.carry.clear();
    }
  }

  private async turns(contexts: readonly RolloutContext[]): Promise<Episode[]> {
    const all = this.start(contexts);
    for (;;) {
      const ready = all.filter((r) => !r.finish && this.hasRoom(r));
      await this.emitFinished(all);
      if (!ready.length) break;
      const groups = this.batchGroups(ready);
      // Only a reply that calls a tool before the last turn goes on, so only its cache row is kept for the next turn.
      const lastTurn = ready.every((r) => r.turns + 1 >= this.settings.maxTurns);
      // (A row kept for nothing costs only memory: a reply read as if tools were offered errs that way.)
      const toolsOffered = ready.some((r) => r.tools.length > 0);
      this.carry.wanted = (out) => !lastTurn && out.finishReason !== 'length' && callsTools(this.parse(out.tokens, toolsOffered));
      const outputs = await this.policy.generate(groups.map((g) => this.prompt(g)), this.carry);
      const withCalls: { r: Running; calls: ReturnType<typeof parseReply> }[] = [];
      groups.forEach((g, i) => g.forEach((r, j) => {
        const calls = this.absorb(r, outputs[i]![j]!);
        if (calls) withCalls.push({ r, calls });
      }));
      await Promise.all(withCalls.map(({ r, calls }) => this.runTools(r, calls)));
    }
    return all.map((r) => this.episode(r));
  }

  /** Ends an episode that can generate no more (budget or positions spent); true if it can go on. */
  private hasRoom(r: Running): boolean {
    if (this.budget(r) > 0) return true;
    this.end(r, 'max_tokens');
    return false;
  }

  private budget(r: Running): number {
    return Math.min(this.settings.maxTokens - r.logprobs.length, this.policy.maxPositions - r.ids.length);
  }

  private end(r: Running, finish: EpisodeFinish): void {
    r.finish = finish;
    r.finishedAt = performance.now();
  }

  /** First replies of one context share a prompt; every later turn is its own prompt. */
  private batchGroups(ready: Running[]): Running[][] {
    const groups = new Map<string, Running[]>();
    ready.forEach((r, i) => {
      const key = r.turns === 0 ? `context ${r.contextIndex}` : `episode ${i}`;
      groups.set(key, [...(groups.get(key) ?? []), r]);
    });
    return [...groups.values()];
  }

  private prompt(group: Running[]): PolicyPrompt {
    const first = group[0]!;
    return { promptIds: first.ids, seeds: group.map((r) => turnSeed(r.seed, r.turns)), maxNewTokens: this.budget(first) };
  }

  /** A reply's tokens less the end token it stopped on. */
  private body(tokens: number[]): number[] {
    return this.policy.tokenizer.eosTokenIds.includes(tokens.at(-1)!) ? tokens.slice(0, -1) : tokens;
  }

  /** A reply's content and tool calls; `toolsOffered` says whether the episode's prompt showed tools. */
  private parse(tokens: number[], toolsOffered: boolean): ReturnType<typeof parseReply> {
    return parseReply(this.body(tokens), replyTokens(this.policy.tokenizer, toolsOffered));
  }

  /** Records a reply; returns its parsed calls when tools must run before the next turn. */
  private absorb(r: Running, out: PolicyOutput): ReturnType<typeof parseReply> | undefined {
    if (out.tokens.length !== out.logprobs.length || !out.tokens.length) throw new Error('the policy returned a reply without tokens, or without one log-prob per token');
    const start = r.ids.length;
    r.ids.push(...out.tokens);
    r.logprobs.push(...out.logprobs);
    r.generated.push({ start, end: r.ids.length });
    r.turns++;
    const parsed = this.parse(out.tokens, r.tools.length > 0);
    r.messages.push({ role: 'assistant', content: this.policy.tokenizer.decode(this.body(out.tokens)), finish: out.finishReason });
    r.answer = parsed.content;
    if (out.finishReason === 'length') this.end(r, 'max_tokens');
    else if (!callsTools(parsed)) this.end(r, 'answer');
    else if (r.context.recordedTools) this.endOnRecordedCalls(r, parsed);
    else if (r.turns >= this.settings.maxTurns) this.end(r, 'max_turns');
    else return parsed;
    return undefined;
  }

  /** A reply that calls a recorded session's tools: its calls are kept, not run, and they are its answer. */
  private endOnRecordedCalls(r: Running, parsed: ReturnType<typeof parseReply>): void {
    const reply = r.messages.at(-1) as Extract<EpisodeMessage, { role: 'assistant' }>;
    reply.toolCalls = parsed.toolCalls.map((c) => ({ name: c.function.name, arguments: parsedArguments(c.function.arguments), ok: false, result: NOT_RUN, ms: 0, notRun: true }));
    r.toolCalls += reply.toolCalls.length;
    this.end(r, 'answer');
  }

  /** Runs a reply's calls in order, records them as tool turns, and appends their tokens (or ends the episode). */
  private async runTools(r: Running, parsed: ReturnType<typeof parseReply>): Promise<void> {
    const offered = new Set(r.tools.map((t) => t.function.name));
    const records: ToolCallRecord[] = [];
    for (const call of parsed.toolCalls) {
      const name = call.function.name;
      if (!offered.has(name)) {
        records.push({ name, arguments: call.function.arguments, ok: false, result: `error: unknown tool '${name}' (available: ${[...offered].join(', ') || 'none'})`, ms: 0 });
        r.invalidToolCalls++;
      } else {
        records.push(await this.options.tools.execute(name, call.function.arguments));
      }
    }
    for (const bad of parsed.toolCallErrors) {
      records.push({ name: '', arguments: bad.raw, ok: false, result: `error: ${bad.error}`, ms: 0 });
      r.invalidToolCalls++;
    }
    r.toolCalls += records.length;
    r.toolErrors += records.filter((c) => !c.ok).length;
    const reply = r.messages.at(-1) as Extract<EpisodeMessage, { role: 'assistant' }>;
    reply.toolCalls = records;
    const history = templateView(r.messages.slice(0, -1));
    const toolMessages: EpisodeMessage[] = records.map((c) => ({ role: 'tool', name: c.name, content: c.result, ...(c.ok ? {} : { error: true }) }));
    r.messages.push(...toolMessages);
    if (r.toolErrors >= this.settings.toolErrorLimit) return this.end(r, 'tool_errors');
    const last = r.ids[r.generated.at(-1)!.end - 1]!;
    // Each result names its call, as templates that pair them want (Mistral's, by 9-character
    // ids); a call that could not be read gets an id of the same form.
    const callIds = [...parsed.toolCalls.map((c) => c.id), ...parsed.toolCallErrors.map((_, i) => madeCallId(parsed.toolCalls.length + i))];
    r.ids.push(...toolTurnIds(this.policy.tokenizer, {
      history,
      stopToken: this.policy.tokenizer.eosTokenIds.includes(last) ? last : undefined,
      toolMessages: templateView(toolMessages).map((m, i) => ({ ...m, tool_call_id: callIds[i] })),
      template: this.templateOptions(r.tools),
    }));
  }

  /** Hands each newly finished episode to `onEpisode`, in the order episodes were started. */
  private async emitFinished(all: Running[]): Promise<void> {
    for (const r of all) {
      if (!r.finish || r.emitted) continue;
      r.emitted = true;
      await this.options.onEpisode?.(this.episode(r));
    }
  }

  private episode(r: Running): Episode {
    const lastSpan = r.generated.at(-1);
    // An episode that generated nothing (its prompt filled the positions) has no answer to score.
    const reward = r.context.reward && lastSpan ? r.context.reward.score(r.answer) : null;
    return {
      id: r.id,
      contextId: r.context.id,
      contextSha256: r.contextSha256,
      sample: r.sample,
      seed: r.seed,
      step: this.settings.step,
      messages: r.messages,
      promptMessages: r.context.messages.length,
      tokens: { inputIds: r.ids, promptLength: r.promptLength, generated: r.generated, logprobs: r.logprobs },
      finish: r.finish!,
      rewards: reward === null ? [] : [{ at: lastSpan!.end - 1, r: reward }],
      reward,
      rewardSource: reward === null ? 'none' : r.context.reward!.source,
      summary: {
        turns: r.turns,
        toolCalls: r.toolCalls,
        invalidToolCalls: r.invalidToolCalls,
        tokens: r.logprobs.length,
        reward,
        seconds: Math.round((r.finishedAt - this.started) / 10) / 100,
      },
    };
  }
}
