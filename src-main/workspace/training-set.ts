// The training set (trainable samples, and the at-least-one rule) and the checks that warn
// about it before a run.
import path from 'node:path';
import type { Reward, SessionFormat, ToolCall } from '../../src-shared/types.js';
import { APP_TRAIN_DEFAULTS, type TrainMethod } from '../../src-shared/training.js';
import type { CheckReport, TrainingSample } from '../../src-shared/views.js';
import type { LessonHint } from '../../src-shared/lessons.js';
import { hintForTraining } from '../judge/hint-rules.js';
import { sessionSamplesFor, whyNothingToTrain, type SampleSignal } from '../pipeline/training-signal.js';
import { contextMessages, responseMessage } from '../export/formats.js';
import { latestRollout } from '../store/capture-exchanges.js';
import type { Store } from '../store/database.js';
import { countHintRunLabels, countHints } from '../store/label-rows.js';
import { countCallsToUndefinedTools, readStats, sessionsWithoutSamples } from '../store/overview-reads.js';
import { iterateBundles, toolsOfferedAt, type SampleRecord, type SessionBundle, type TurnRecord } from '../store/session-reads.js';
import { countUnreviewedUncertain } from './review-queue.js';

export interface TrainingSampleOptions {
  method?: TrainMethod;
  /** Attach the rollout of samples captured live from this model folder. */
  rolloutsFor?: string;
  format?: SessionFormat;
  /** Attach what came next (`reaction`), which the on-policy replay judge reads. */
  reactions?: boolean;
}

/** A stored sample with what training sees of it: its reward and the hint training uses. */
function signalOf(s: SampleRecord): SampleRecord & { reward: Reward; hint: string | null; hinted: boolean } {
  const hint = hintForTraining(s.label);
  return { ...s, reward: s.label.reward ?? 0, hint, hinted: hint !== null };
}

/**
 * The samples a run of `method` (default the app's, combine) learns from, after the at-least-one rule
 * per session and method (docs/design.md §At-least-one). With `rolloutsFor` (a model
 * folder), samples captured live from that model carry their rollout (see
 * TrainingSample.rollout); without it none does, so a run on another model never mistakes a
 * rollout's log-probs for its own.
 */
export function trainingSamples(
  store: Store, heldOut: ReadonlySet<string>, options: TrainingSampleOptions = {},
): TrainingSample[] {
  const out: TrainingSample[] = [];
  const rolloutModel = options.rolloutsFor ? path.resolve(options.rolloutsFor) : null;
  for (const bundle of iterateBundles(store, undefined, options.format)) {
    if (heldOut.has(bundle.id)) continue; // held out for evaluation: never trained on
    for (const { sample: s, kept } of sessionSamplesFor(options.method ?? APP_TRAIN_DEFAULTS.method, bundle.samples.map(signalOf))) {
      out.push({
        sessionId: bundle.id,
        responseTurn: s.responseTurn,
        messages: contextMessages(bundle, s),
        response: responseMessage(bundle, s),
        ...offeredBy(bundle, s.responseTurn),
        reward: s.reward,
        hint: s.hint,
        repair: s.label.repair,
        keptByAtLeastOne: kept,
        ...(options.reactions ? reactionOf(bundle, s) : {}),
        ...(rolloutModel && bundle.format === 'capture' ? rolloutOf(store, bundle.id, bundle.turns[s.responseTurn], rolloutModel) : {}),
      });
    }
  }
  return out;
}

/** The tools the model was offered when it wrote the reply at `turn`, where it was offered some (TrainingSample.tools). */
function offeredBy(bundle: SessionBundle, turn: number): Pick<TrainingSample, 'tools'> {
  const tools = toolsOfferedAt(bundle, turn);
  return tools ? { tools } : {};
}

/** What came next after a sample's reply (the user's reaction or a tool's output), when something did. */
function reactionOf(bundle: { turns: readonly { text: string }[] }, s: SampleRecord): Pick<TrainingSample, 'reaction'> {
  return s.feedbackTurn !== null && s.nextStateRole !== null ? { reaction: { role: s.nextStateRole, text: bundle.turns[s.feedbackTurn]?.text ?? '' } } : {};
}

/**
 * Every sample of the sessions `include` accepts, labelled or not, as evaluation reads them
 * (docs/design.md §Evaluation): the reward (0 when unlabelled), the hint training would use,
 * and the repair.
 */
export function evaluationSamples(store: Store, include: (sessionId: string) => boolean): TrainingSample[] {
  const out: TrainingSample[] = [];
  for (const bundle of iterateBundles(store)) {
    if (!include(bundle.id)) continue;
    for (const s of bundle.samples.map(signalOf)) {
      out.push({
        sessionId: bundle.id, responseTurn: s.responseTurn, messages: contextMessages(bundle, s), response: responseMessage(bundle, s), ...offeredBy(bundle, s.responseTurn),
        reward: s.reward, hint: s.hint, repair: s.label.repair, keptByAtLeastOne: false,
        ...reactionOf(bundle, s),
      });
    }
  }
  return out;
}

/**
 * One sample as training would see it (its context, its reply, the hint training uses), whether
 * or not a run would select it; null when the session has no sample at that reply. For the
 * token view (docs/design.md §Token view), which scores a single reply.
 */
export function trainingSampleAt(store: Store, sessionId: string, responseTurn: number): TrainingSample | null {
  for (const bundle of iterateBundles(store, sessionId)) {
    const s = bundle.samples.find((x) => x.responseTurn === responseTurn);
    if (!s) return null;
    const { reward, hint } = signalOf(s);
    return {
      sessionId: bundle.id, responseTurn, messages: contextMessages(bundle, s), response: responseMessage(bundle, s), ...offeredBy(bundle, responseTurn),
      reward, hint, repair: s.label.repair, keptByAtLeastOne: false,
    };
  }
  return null;
}

/**
 * The hints lessons are distilled from (docs/design.md §Lessons): each sample's hint as training
 * would use it (typed, or a judge's that passes the filter), of the sessions trained on, in
 * stable order. Held-out sessions' hints are only counted: lessons made from them would tell the
 * model the answers the evaluation asks for.
 */
export function lessonHints(store: Store, heldOut: ReadonlySet<string>): { hints: LessonHint[]; heldOut: number } {
  const hints: LessonHint[] = [];
  let held = 0;
  for (const bundle of iterateBundles(store)) {
    for (const s of bundle.samples) {
      const hint = hintForTraining(s.label);
      if (hint === null) continue;
      if (heldOut.has(bundle.id)) held++;
      else hints.push({ sessionId: bundle.id, responseTurn: s.responseTurn, hint, source: s.label.source, updatedAt: s.label.updatedAt ?? 0 });
    }
  }
  return { hints, heldOut: held };
}

/** Why a run of `method` on this database would learn nothing (what it needs, what there is), or null. */
export function nothingToTrain(store: Store, method: TrainMethod, heldOut: ReadonlySet<string>): string | null {
  const trainable: SampleSignal[] = [];
  const held: SampleSignal[] = [];
  for (const bundle of iterateBundles(store)) (heldOut.has(bundle.id) ? held : trainable).push(...bundle.samples.map(signalOf));
  const why = whyNothingToTrain(method, trainable);
  if (why === null || whyNothingToTrain(method, held) !== null) return why;
  return `${why} (held-out sessions are not counted: they are kept for evaluation; move one to training on the Sessions page or with 'hindsight split --train ID')`;
}

/**
 * The latest rollout of the local model `modelDir` for this reply, while the reply is the one it
 * generated: the same text and the same tool calls (names and arguments; the user may have
 * edited either on the timeline since).
 */
function rolloutOf(store: Store, sessionId: string, turn: TurnRecord, modelDir: string): Pick<TrainingSample, 'rollout'> {
  const found = latestRollout(store, sessionId, turn.index, modelDir);
  const calls = (list: readonly ToolCall[]) => JSON.stringify(list.map((c) => [c.name, c.arguments]));
  return found && found.reply.text === turn.text && calls(found.reply.toolCalls) === calls(turn.toolCalls) ? { rollout: found.rollout } : {};
}

/** A judge run with hints stores a prompt version with a '+' part ('heuristic-v2+hints', 'reward-v1+hint-v2'). */
function noHintWarning(store: Store): string {
  return countHintRunLabels(store) > 0
    ? 'No sample has a hint: the judge ran with hints and found none in the reactions; On-Policy Distillation has nothing to learn from (write hints in the annotator).'
    : 'No sample has a hint: On-Policy Distillation has nothing to learn from (run the judge with hints).';
}

export function checkReport(store: Store): CheckReport {
  const stats = readStats(store);
  const warnings: string[] = [];
  const { pos, neg, unlabeled } = stats.labeled;
  const hints = countHints(store);
  if (stats.samples === 0) warnings.push('No samples yet: import chats in which an assistant reply got a reaction.');
  if (unlabeled > 0) warnings.push(`${unlabeled} of ${stats.samples} samples are unlabeled: run the judge or label them.`);
  if (pos + neg > 0 && (pos === 0 || neg === 0)) {
    warnings.push(`Only ${pos === 0 ? 'negative' : 'positive'} rewards (${pos} +1, ${neg} −1): Binary RL learns best from both.`);
  } else if (pos + neg > 0 && Math.max(pos, neg) > 4 * Math.min(pos, neg)) {
    warnings.push(`Rewards are imbalanced: ${pos} +1 against ${neg} −1.`);
  }
  if (stats.samples > 0 && hints === 0) warnings.push(noHintWarning(store));
  if (stats.sessions_without_samples > 0) warnings.push(`${stats.sessions_without_samples} ${stats.sessions_without_samples === 1 ? 'session yields' : 'sessions yield'} no sample; see the list for why.`);
  const undefinedCalls = countCallsToUndefinedTools(store);
  if (undefinedCalls > 0) {
    warnings.push(`${undefinedCalls} ${undefinedCalls === 1 ? 'reply calls' : 'replies call'} tools the conversation never defined (ChatGPT's and Claude's built-in web search and code): the text trains, the calls do not.`);
  }
  const unreviewedUncertain = countUnreviewedUncertain(store);
  if (unreviewedUncertain > 0) warnings.push(`${unreviewedUncertain} label${unreviewedUncertain === 1 ? '' : 's'} still unreviewed and uncertain: check them on the app's Review page (hindsight serve or the desktop app).`);
  return { stats, unreviewedUncertain, sessionsWithoutSamples: sessionsWithoutSamples(store), warnings };
}
