// The six JSONL export formats (docs/design.md §Exports). Each format turns one session bundle into lines;
// the writer streams them to disk. Output depends only on the database: sessions in a fixed
// order (created_at, then id), samples by reply turn, object keys in a fixed order, and no
// time of export anywhere, so the same database gives byte-identical files.
//
//   samples   every sample: context, reply, next state, label
//   openclaw  every sample, in OpenClaw-RL's record shape (prompt_text is ChatML)
//             (both add `composite` — score, thresholds, reasons — to composite judges' labels)
//   kto       samples labelled ±1: TRL unpaired preference {prompt, completion, label}
//   sft       replies labelled +1, or repaired replies (the repair replaces the reply): {messages}
//   dpo       preference pairs {prompt, chosen, rejected}: a ChatGPT regeneration
//             (chosen = the kept reply, rejected = the abandoned sibling) and a repair
//             (chosen = the repair, rejected = the original reply). Pairs whose two sides
//             have the same text teach nothing and are skipped.
//   sdft      samples with a hint: TRL SDFT {prompt, privileged_context} where
//             privileged_context is the hint; `teacher_prompt` adds the exact teacher
//             messages Hindsight trains with (the hint appended to the last user message).
import type { ExportFormat } from '../../src-shared/views.js';
import { fullContext } from '../pipeline/classify.js';
import { enhancedContext } from '../pipeline/hint-context.js';
import { renderChatMl, toChatToolCalls, toMessage, type ChatMessage, type ChatToolCall } from '../pipeline/chat-messages.js';
import { argumentsAsTemplatesWrite } from '../model/template-context.js';
import { sampleContextTurns, toolsOfferedAt, type SampleRecord, type SessionBundle, type TurnRecord } from '../store/session-reads.js';

function messageOf(turn: TurnRecord): ChatMessage {
  return toMessage(turn);
}

/** The sample's (windowed) context as chat messages. */
export function contextMessages(bundle: SessionBundle, sample: SampleRecord): ChatMessage[] {
  return sampleContextTurns(bundle.turns, sample).map((i) => messageOf(bundle.turns[i]));
}

export function responseMessage(bundle: SessionBundle, sample: SampleRecord): ChatMessage {
  return messageOf(bundle.turns[sample.responseTurn]);
}

function assistant(content: string): ChatMessage {
  return { role: 'assistant', content };
}

function feedbackTurn(bundle: SessionBundle, sample: SampleRecord): TurnRecord | null {
  return sample.feedbackTurn === null ? null : bundle.turns[sample.feedbackTurn];
}

/**
 * A composite judge's score as exports carry it (docs/design.md §Composite score): the score,
 * the thresholds that mapped it, and each dimension's score and reason. Absent from other
 * labels' lines, so their lines are as before.
 */
function compositeField(s: SampleRecord): { composite?: object } {
  const c = s.label.composite;
  if (!c) return {};
  const dimensions = Object.fromEntries(c.dimensions.map((d) => [d.name, { score: d.score, reason: d.reason }]));
  return { composite: { score: c.score, thresholds: { pos: c.thresholds.pos, neg: c.thresholds.neg }, dimensions } };
}

function samplesLine(bundle: SessionBundle, s: SampleRecord): object {
  const reply = bundle.turns[s.responseTurn];
  return {
    session_id: bundle.id,
    response_turn: s.responseTurn,
    feedback_turn: s.feedbackTurn,
    context: contextMessages(bundle, s),
    response: reply.text,
    ...(reply.toolCalls.length ? { response_tool_calls: toChatToolCalls(reply.toolCalls) } : {}),
    feedback: feedbackTurn(bundle, s)?.text ?? null,
    timestamp: reply.timestamp,
    reward: s.label.reward,
    hint: s.label.hint,
    label_source: s.label.source,
    next_state_role: s.nextStateRole,
    repair: s.label.repair,
    ...compositeField(s),
  };
}

function openclawLine(bundle: SessionBundle, s: SampleRecord): object {
  const reply = bundle.turns[s.responseTurn];
  const context = contextMessages(bundle, s);
  const next = feedbackTurn(bundle, s);
  return {
    session_id: bundle.id,
    turn: s.responseTurn,
    timestamp: reply.timestamp,
    messages: context,
    prompt_text: renderChatMl(context),
    response_text: reply.text,
    tool_calls: toChatToolCalls(reply.toolCalls),
    next_state: next ? { role: next.role, content: next.text } : null,
    score: s.label.reward,
    votes: s.label.votes.map((v) => v.reward ?? null),
    hint: s.label.hint,
    ...compositeField(s),
  };
}

function ktoLine(bundle: SessionBundle, s: SampleRecord): object {
  return { prompt: contextMessages(bundle, s), completion: [responseMessage(bundle, s)], label: s.label.reward === 1 };
}

function sftLine(bundle: SessionBundle, s: SampleRecord): object {
  const repair = s.label.repair?.trim() ? s.label.repair : null;
  const reply = repair !== null ? assistant(repair) : responseMessage(bundle, s);
  return { messages: [...contextMessages(bundle, s), reply] };
}

function sdftLine(bundle: SessionBundle, s: SampleRecord): object {
  const hint = s.label.hint!.trim();
  const context = contextMessages(bundle, s);
  return { prompt: context, privileged_context: hint, teacher_prompt: enhancedContext(context, hint) };
}

const sameText = (a: string, b: string) => a.trim() === b.trim();

/** Each preference pair of a session, built only when asked (counting them builds nothing). */
function* dpoPairs(bundle: SessionBundle): Generator<{ turn: number; line: () => object }> {
  const sampleAt = new Map(bundle.samples.map((s) => [s.responseTurn, s]));
  const promptFor = (turn: number): ChatMessage[] => {
    const sample = sampleAt.get(turn);
    const indices = sample ? sampleContextTurns(bundle.turns, sample) : fullContext(bundle.turns, turn);
    return indices.map((i) => messageOf(bundle.turns[i]));
  };
  const turnsWithPairs = new Set<number>([...bundle.alternatives.map((a) => a.atTurn), ...bundle.samples.filter((s) => s.label.repair).map((s) => s.responseTurn)]);
  for (const turn of [...turnsWithPairs].sort((a, b) => a - b)) {
    const kept = bundle.turns[turn];
    if (!kept || kept.role !== 'assistant') continue;
    const keptMsg = messageOf(kept);
    for (const alt of bundle.alternatives) {
      if (alt.atTurn !== turn || alt.role !== 'assistant' || sameText(alt.text, kept.text) || !alt.text.trim() || !kept.text.trim()) continue;
      const rejected: ChatMessage = { role: 'assistant', content: alt.text, ...(alt.toolCalls.length ? { tool_calls: toChatToolCalls(alt.toolCalls) } : {}) };
      yield { turn, line: () => ({ prompt: promptFor(turn), chosen: [keptMsg], rejected: [rejected] }) };
    }
    const repair = sampleAt.get(turn)?.label.repair;
    if (repair && repair.trim() && !sameText(repair, kept.text)) {
      yield { turn, line: () => ({ prompt: promptFor(turn), chosen: [assistant(repair)], rejected: [keptMsg] }) };
    }
  }
}

/**
 * Each per-sample format: which samples write a line (`keeps`, the one rule that both the writer
 * and the counts before writing use), and the line.
 */
const PER_SAMPLE: Record<Exclude<ExportFormat, 'dpo'>, { keeps: (s: SampleRecord) => boolean; line: (bundle: SessionBundle, s: SampleRecord) => object }> = {
  samples: { keeps: () => true, line: samplesLine },
  openclaw: { keeps: () => true, line: openclawLine },
  kto: { keeps: (s) => s.label.reward === 1 || s.label.reward === -1, line: ktoLine },
  sft: { keeps: (s) => Boolean(s.label.repair?.trim()) || s.label.reward === 1, line: sftLine },
  sdft: { keeps: (s) => Boolean(s.label.hint?.trim()), line: sdftLine },
};

/**
 * How a format's lines carry tools (docs/design.md §Tools offered). `tools`: the list the session
 * offered, after a line's other keys and only where there was one. TRL's trainers (SFT, DPO,
 * KTO) read an example's `tools` as a list or a JSON string and get the string, which keeps a
 * dataset whose rows offer differently shaped tools loadable (Arrow gives a column one type);
 * Hindsight's own records carry the list; SDFT's trainer renders no tools. `callArguments`: a
 * call's arguments as recorded, or as templates write them (argumentsAsTemplatesWrite), so that
 * TRL, which hands a template the string as it is, renders the tokens Hindsight trains.
 */
const TOOL_FORMS: Record<ExportFormat, { tools: 'list' | 'json text' | null; callArguments: 'as recorded' | 'as templates write' }> = {
  samples: { tools: 'list', callArguments: 'as recorded' },
  openclaw: { tools: 'list', callArguments: 'as recorded' },
  kto: { tools: 'json text', callArguments: 'as templates write' },
  sft: { tools: 'json text', callArguments: 'as templates write' },
  dpo: { tools: 'json text', callArguments: 'as templates write' },
  sdft: { tools: null, callArguments: 'as templates write' },
};

/** A line of the reply at `turn`, with the tools offered when it was written (toolsOfferedAt) in `format`'s form. */
function withToolForms(format: ExportFormat, bundle: SessionBundle, line: object, turn: number): object {
  const forms = TOOL_FORMS[format];
  const out = forms.callArguments === 'as templates write' ? (withTemplateArguments(line) as object) : line;
  const tools = toolsOfferedAt(bundle, turn);
  if (!tools || !forms.tools) return out;
  return { ...out, tools: forms.tools === 'list' ? tools : JSON.stringify(tools) };
}

/** `value` with every message's tool-call arguments as templates write them (a line's messages sit at any depth). */
function withTemplateArguments(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withTemplateArguments);
  if (!value || typeof value !== 'object') return value;
  const entries = Object.entries(value).map(([k, v]) => [k, k === 'tool_calls' && Array.isArray(v) ? v.map(callWithTemplateArguments) : withTemplateArguments(v)]);
  return Object.fromEntries(entries);
}

function callWithTemplateArguments(call: ChatToolCall): ChatToolCall {
  return { ...call, function: { ...call.function, arguments: argumentsAsTemplatesWrite(call.function.arguments) } };
}

/** The JSONL lines (without newline) one session contributes to `format`. */
export function* sessionLines(format: ExportFormat, bundle: SessionBundle): Generator<string> {
  if (format === 'dpo') {
    for (const pair of dpoPairs(bundle)) yield JSON.stringify(withToolForms(format, bundle, pair.line(), pair.turn));
    return;
  }
  const { keeps, line } = PER_SAMPLE[format];
  for (const s of bundle.samples) if (keeps(s)) yield JSON.stringify(withToolForms(format, bundle, line(bundle, s), s.responseTurn));
}

/** How many lines one session contributes to `format`, by the same rules, without building them. */
export function sessionLineCount(format: ExportFormat, bundle: SessionBundle): number {
  if (format === 'dpo') {
    let n = 0;
    for (const _ of dpoPairs(bundle)) n++;
    return n;
  }
  const { keeps } = PER_SAMPLE[format];
  return bundle.samples.reduce((n, s) => n + (keeps(s) ? 1 : 0), 0);
}
