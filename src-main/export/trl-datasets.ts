// The datasets of a TRL hand-off (docs/design.md §Hand-off), one JSONL file per trainer, in
// the fields TRL's trainers read (conversational form: lists of {role, content} messages):
//
//   kto.jsonl    {prompt, completion, label}      KTOTrainer (unpaired preference)
//   dpo.jsonl    {prompt, chosen, rejected}       DPOTrainer (preference pairs)
//   sft.jsonl    {messages}                       SFTTrainer
//   sdft.jsonl   {prompt, privileged_context}     the experimental SDFTTrainer: the hint is
//                                                the teacher-only context
//   grpo.jsonl   {prompt, next_state, next_state_role, session_id, turn}
//                                                GRPOTrainer prompts; the extra columns reach
//                                                the reward function, which asks the judge
//
// The first three are the `hindsight export` lines themselves (./formats.ts); sdft drops the
// export's `teacher_prompt`, which TRL's SDFT script refuses.
//
// A hand-off writes them twice over (docs/design.md §Hand-off): `data/` with the sessions the
// cluster trains on, `heldout/` with the held-out sessions, for its evaluation only.
import fs from 'node:fs';
import path from 'node:path';
import type { TrlMethod } from '../../src-shared/handoff.js';
import type { Store } from '../store/database.js';
import { iterateBundles, type SessionBundle } from '../store/session-reads.js';
import { contextMessages, sessionLines } from './formats.js';
import { writeJsonl } from './writer.js';

export const DATASET_FILES: Record<TrlMethod, string> = {
  kto: 'kto.jsonl',
  dpo: 'dpo.jsonl',
  sft: 'sft.jsonl',
  sdft: 'sdft.jsonl',
  grpo: 'grpo.jsonl',
};

/** The columns each dataset has, in order (what the schema test checks). */
export const DATASET_FIELDS: Record<TrlMethod, readonly string[]> = {
  kto: ['prompt', 'completion', 'label'],
  dpo: ['prompt', 'chosen', 'rejected'],
  sft: ['messages'],
  sdft: ['prompt', 'privileged_context'],
  grpo: ['prompt', 'next_state', 'next_state_role', 'session_id', 'turn'],
};

function* grpoLines(bundle: SessionBundle): Generator<string> {
  for (const s of bundle.samples) {
    if (s.feedbackTurn === null) continue;
    const next = bundle.turns[s.feedbackTurn]!;
    yield JSON.stringify({ prompt: contextMessages(bundle, s), next_state: next.text, next_state_role: next.role, session_id: bundle.id, turn: s.responseTurn });
  }
}

function* sdftLines(bundle: SessionBundle): Generator<string> {
  for (const line of sessionLines('sdft', bundle)) {
    const { prompt, privileged_context } = JSON.parse(line) as { prompt: unknown; privileged_context: string };
    yield JSON.stringify({ prompt, privileged_context });
  }
}

/** Which sessions go into a set of datasets. */
export type SessionFilter = (sessionId: string) => boolean;

export function* datasetLines(store: Store, method: TrlMethod, keep: SessionFilter = () => true): Generator<string> {
  for (const bundle of iterateBundles(store)) {
    if (!keep(bundle.id)) continue;
    if (method === 'grpo') yield* grpoLines(bundle);
    else if (method === 'sdft') yield* sdftLines(bundle);
    else yield* sessionLines(method, bundle);
  }
}

/** Writes every dataset of the sessions `keep` accepts to `folder` under `dir`; returns each file with its line count. */
export function writeTrlDatasets(store: Store, dir: string, folder: string, keep: SessionFilter): { file: string; lines: number }[] {
  fs.mkdirSync(path.join(dir, folder), { recursive: true });
  return (Object.keys(DATASET_FILES) as TrlMethod[]).map((method) => {
    const file = `${folder}/${DATASET_FILES[method]}`;
    return { file, lines: writeJsonl(path.join(dir, file), datasetLines(store, method, keep)) };
  });
}

/** Removes the dataset files an earlier hand-off wrote to `folder` (and the folder when that empties it). */
export function removeTrlDatasets(dir: string, folder: string): void {
  for (const name of Object.values(DATASET_FILES)) fs.rmSync(path.join(dir, folder, name), { force: true });
  try {
    fs.rmdirSync(path.join(dir, folder));
  } catch {
    // absent, or it holds files of the user's own: left as it is
  }
}
