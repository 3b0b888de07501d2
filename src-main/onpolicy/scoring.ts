/**
 * Scoring an on-policy episode as it finishes, and turning episodes into the step's training
 * rows (docs/design.md §On-policy training).
 *
 * - **Task**: the rollout manager already scored the final answer against the task's check.
 * - **Replay judge** (a database sample, rl or combine): the judge reads the context, the
 *   original reply, what the user did next and the hint, and labels the rollout's last reply;
 *   m votes, vote i with the episode's seed + i. The reward sits on the last generated token.
 * - **OPD** (opd or combine, a hinted context): the teacher is the base model (adapter off)
 *   with the hint in the prompt, scoring the episode's own tokens after that prompt; the
 *   episode records teacher − old for each generated token (`teacherGap`), and the step trains
 *   on A_t = teacher_t − old_t (tool-turn tokens stay masked). No judge is needed.
 * - **Label**: a sample captured live from the model being trained and labelled ±1 adds its
 *   captured reply as one more episode of its context (sample K), trained with its rollout
 *   log-probs as old and the user's label as its reward. An unlabelled one adds nothing.
 *
 * The teacher of a row is old + gap read back from its episode, so a row's advantages are the
 * same whether its episode was generated in this process or read from episodes.jsonl on resume.
 */
import type { Episode } from '../../src-shared/rollout.js';
import { methodRecord } from '../../src-shared/training-methods.js';
import { judgeReplay } from '../judge/replay-judge.js';
import type { ChatCompleter } from '../judge/llm-judge.js';
import { episodeId } from '../rollout/manager.js';
import { episodeRow } from '../rollout/training-row.js';
import { fitRow, padBatch, responseValues, type TrainRow } from '../train/batches.js';
import type { TrainMethod, TrainStep } from '../train/training-step.js';
import type { Quantize } from '../model/quantize.js';
import { isTrainingLabel, type StepContext } from './contexts.js';

export interface Scorer {
  method: TrainMethod;
  step: TrainStep;
  maxLength: number;
  /** The replay judge, for database contexts; null without one. */
  judge: ChatCompleter | null;
  votes: number;
  /** The teacher's prompt ids of a hinted context (cached by the caller). */
  teacherPrompt(context: StepContext): number[];
}

/** Where an episode's generated tokens end (the end of its last reply), or null when it generated none. */
function lastGenerated(e: Episode): number | null {
  return e.tokens.generated.at(-1)?.end ?? null;
}

/** The text of the episode's last reply, as the judge reads it. */
function lastReply(e: Episode): string {
  for (let i = e.messages.length - 1; i >= e.promptMessages; i--) if (e.messages[i]!.role === 'assistant') return e.messages[i]!.content;
  return '';
}

/** Adds the judge's reward and the OPD teacher gap an episode is owed (see the module comment). */
export async function scoreEpisode(e: Episode, context: StepContext, s: Scorer): Promise<Episode> {
  const end = lastGenerated(e);
  if (end === null) return e;
  let out = e;
  const { uses } = methodRecord(s.method);
  if (e.reward === null && s.judge && context.judgeInput && uses.reward) {
    const { reward } = await judgeReplay(s.judge, { ...context.judgeInput, reply: lastReply(e) }, { votes: s.votes, seed: e.seed });
    out = { ...out, rewards: [{ at: end - 1, r: reward }], reward, rewardSource: 'replay', summary: { ...out.summary, reward } };
  }
  if (context.hint !== null && uses.hint && out.teacherGap === undefined) {
    const gap = await teacherGap(out, s.teacherPrompt(context), s);
    if (gap) out = { ...out, teacherGap: gap, ...(out.rewardSource === 'none' ? { rewardSource: 'opd' as const } : {}) };
  }
  return out;
}

/**
 * teacher − old for each generated token: the base model on the teacher prompt followed by
 * the episode's tokens after its own prompt (tool turns included, as the policy saw them).
 * Undefined when the reply alone does not fit the run's length.
 */
async function teacherGap(e: Episode, prompt: number[], s: Scorer): Promise<number[] | undefined> {
  const { inputIds, promptLength, generated, logprobs } = e.tokens;
  const response = inputIds.slice(promptLength, lastGenerated(e)!);
  const row: TrainRow = { inputIds: [...prompt, ...response], responseStart: prompt.length, reward: 0, origin: e.id };
  if (fitRow(row, s.maxLength) === 'over') return undefined;
  const batch = padBatch([row]);
  const teacher = responseValues(await s.step.baseLogprobs(batch), batch.seqLen, 0, row);
  const gap: number[] = [];
  let k = 0;
  for (const span of generated) for (let t = span.start; t < span.end; t++) gap.push(teacher[t - promptLength]! - logprobs[k++]!);
  return gap;
}

/**
 * The captured reply of a sample live-captured from the model being trained, as episode K of
 * its context in this step: its own prompt and tokens, its rollout log-probs, the user's label.
 */
export function capturedEpisode(context: StepContext, K: number, step: number): Episode | null {
  const c = context.captured;
  // Without a ±1 label the reply has no reward: never train it as a reward of 0.
  if (!c || c.tokens.length === 0 || !isTrainingLabel(context.label)) return null;
  const start = c.promptIds.length, end = start + c.tokens.length;
  const reward = context.label;
  return {
    id: episodeId(context.id, K, step), contextId: context.id, sample: K, seed: 0, step,
    messages: [...context.rollout.messages.map((m) => ({ ...m })), { role: 'assistant', content: context.judgeInput?.original ?? '', finish: 'captured' }],
    promptMessages: context.rollout.messages.length,
    tokens: { inputIds: [...c.promptIds, ...c.tokens], promptLength: start, generated: [{ start, end }], logprobs: [...c.logprobs] },
    finish: 'answer',
    rewards: [{ at: end - 1, r: reward }],
    reward, rewardSource: 'label',
    summary: { turns: 1, toolCalls: 0, invalidToolCalls: 0, tokens: c.tokens.length, reward, seconds: 0 },
  };
}

/** One training row of a step, with its teacher log-probs (OPD) on the row's response tokens. */
export interface StepRow {
  row: TrainRow;
  teacher?: Float32Array;
}

/**
 * An episode as a training row (../rollout/training-row.ts), null when it has nothing to
 * train (no generated token, no reward under rl, no reward and no teacher under combine), or
 * 'over' when it does not fit the run's length. Such an episode is skipped, not cut from the
 * left as an offline row is: its old log-probs are those of the whole context, so a cut row
 * would start with ρ ≠ 1. A rollout without a reward (combine, no judge) trains through its
 * teacher only, in a group of its own, so GRPO never mixes it with scored ones. The rollout's
 * log-probs are its old where the rollouts ran the step's arithmetic (an fp32 base), and only
 * measured against the policy's own otherwise (`quantize`: TrainRow.rolloutLogprobs).
 */
export function stepRow(e: Episode, context: StepContext, method: TrainMethod, maxLength: number, quantize: Quantize): StepRow | 'over' | null {
  const line = episodeRow(e);
  if (!line) return null;
  const { uses } = methodRecord(method);
  const teacherOn = uses.hint && e.teacherGap !== undefined;
  const rewarded = e.reward !== null && uses.reward;
  if (!rewarded && !teacherOn) return null;
  const row: TrainRow = {
    inputIds: line.input_ids, responseStart: line.response_start, reward: rewarded ? line.reward : 0, responseMask: line.response_mask,
    // A quantised base's rollouts are not the step's arithmetic: old is then the policy's own (TrainRow.rolloutLogprobs).
    ...(quantize === 'none' ? { oldLogprobs: line.old_logprobs } : { rolloutLogprobs: line.old_logprobs }),
    group: rewarded ? line.group : `${line.group}/unscored`, origin: e.id,
    ...(rewarded && line.rewards.length ? { rewards: line.rewards } : {}),
    ...(context.sessionId !== undefined ? { sessionId: context.sessionId } : {}),
  };
  if (fitRow(row, maxLength) !== 'fits') return 'over';
  return { row, ...(teacherOn ? { teacher: teacherOnRow(e, line.response_start) } : {}) };
}

/** old + gap at each generated token, laid onto the row's response (tool-turn tokens: 0, masked). */
function teacherOnRow(e: Episode, responseStart: number): Float32Array {
  const { generated, logprobs } = e.tokens;
  const out = new Float32Array(lastGenerated(e)! - responseStart);
  let k = 0;
  for (const span of generated) {
    for (let t = span.start; t < span.end; t++, k++) out[t - responseStart] = logprobs[k]! + e.teacherGap![k]!;
  }
  return out;
}
