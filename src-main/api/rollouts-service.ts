// The Rollouts view's calls (src-shared/rollouts-api.ts, docs/design.md §Rollouts view): the
// episodes an on-policy run wrote to its folder's episodes.jsonl, a page at a time, and one
// episode with its rewards placed on its turns and, for OPD, the teacher–student gap of each
// generated token with the token's text from the run's own tokenizer.
//
// Only the runs listed for the open database (the Training page's, `<db>.training-runs.json`)
// are read: a folder is named by a run's id or by the run's folder itself, and any other path
// is refused, so the view cannot be pointed at an arbitrary file.
import fs from 'node:fs';
import path from 'node:path';
import { LRUCache } from 'lru-cache';
import { gapByTurn, placeRewards } from '../../src-shared/episode-check.js';
import { EPISODE_FINISHES, EPISODES_FILE, type EpisodeFinish } from '../../src-shared/rollout.js';
import { REWARD_SIGNS, rewardSign, type RewardSign, type RolloutDetail, type RolloutPage, type RolloutRun } from '../../src-shared/rollouts-api.js';
import type { TrainRunInfo } from '../../src-shared/training-api.js';
import { UserError } from '../../src-shared/types.js';
import type { CallInput } from '../../src-shared/contract.js';
import { ChatTokenizer } from '../model/tokenizer.js';
import { tokenTexts } from '../train/token-gap.js';
import { EpisodeIndex } from './episode-index.js';

/** Rows a page holds when the call does not say. */
const DEFAULT_PAGE = 200;
/** Episode files and tokenizers kept between calls (least recently used out). */
const KEPT_INDEXES = 8;
const KEPT_TOKENIZERS = 2;

type RunRef = { runId?: string; runDir?: string };
interface ResolvedRun {
  run: TrainRunInfo;
  runDir: string;
  file: string;
}

/** The cache's value for `key`, made and kept if it has none. */
function cached<K extends {}, V extends {}>(cache: LRUCache<K, V>, key: K, make: () => V): V {
  let value = cache.get(key);
  if (value === undefined) cache.set(key, (value = make()));
  return value;
}

/** A folder as the file system names it (symlinks followed), so two spellings compare equal. */
function canonical(dir: string): string {
  const resolved = path.resolve(dir);
  try {
    return fs.realpathSync(resolved);
  } catch {
    return resolved;
  }
}

function zeroCounts<K extends string>(keys: readonly K[]): Record<K, number> {
  return Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;
}

export class RolloutsService {
  private readonly indexes = new LRUCache<string, EpisodeIndex>({ max: KEPT_INDEXES });
  private readonly tokenizers = new LRUCache<string, ChatTokenizer>({ max: KEPT_TOKENIZERS });

  /** `listedRuns`: the training runs listed for the open database. */
  constructor(private readonly listedRuns: () => Promise<TrainRunInfo[]>) {}

  async runs(): Promise<{ runs: RolloutRun[] }> {
    const runs: RolloutRun[] = [];
    for (const run of await this.listedRuns()) {
      const file = path.join(run.config.outDir, EPISODES_FILE);
      const stat = fs.statSync(file, { throwIfNoEntry: false });
      if (!stat?.isFile()) continue;
      runs.push({ runId: run.runId, runDir: run.config.outDir, status: run.status, method: run.config.method, startedAt: run.startedAt, bytes: stat.size });
    }
    return { runs: runs.reverse() };
  }

  async list(input: CallInput<'rolloutsList'>): Promise<RolloutPage> {
    const { run, runDir, file } = await this.resolve(input);
    const { items, notes } = await this.index(file).refresh();
    const counts = { finish: zeroCounts<EpisodeFinish>(EPISODE_FINISHES), reward: zeroCounts<RewardSign>(REWARD_SIGNS) };
    for (const item of items) {
      counts.finish[item.finish]++;
      counts.reward[rewardSign(item.reward)]++;
    }
    const matching = items.filter((item) => (!input.finish || item.finish === input.finish) && (!input.reward || rewardSign(item.reward) === input.reward));
    const offset = input.offset ?? 0;
    return {
      runId: run.runId, runDir, episodes: items.length, total: matching.length, offset,
      items: matching.slice(offset, offset + (input.limit ?? DEFAULT_PAGE)), counts, notes,
    };
  }

  async get(input: CallInput<'rolloutsGet'>): Promise<RolloutDetail> {
    const { run, runDir, file } = await this.resolve(input);
    const found = await this.index(file).read(input.id);
    if (!found) throw new UserError(`Run ${run.runId} has no episode '${input.id}' in ${file}.`);
    const { episode, line } = found;
    let tokenNote: string | null = null;
    let gap: RolloutDetail['gap'] = null;
    if (episode.teacherGap) {
      const tokenizer = this.tokenizer(run.config.modelDir);
      if (tokenizer instanceof Error) tokenNote = `Token ids instead of text: ${tokenizer.message}`;
      const texts = tokenizer instanceof Error ? null : episode.tokens.generated.flatMap((s) => tokenTexts(tokenizer, episode.tokens.inputIds.slice(s.start, s.end)));
      gap = gapByTurn(episode, (k, id) => texts?.[k] ?? `#${id}`);
    }
    return { runId: run.runId, runDir, line, episode, rewards: placeRewards(episode), gap, tokenNote };
  }

  /** The listed run a call names, and its episodes file; refuses anything else. */
  private async resolve(ref: RunRef): Promise<ResolvedRun> {
    const runs = await this.listedRuns();
    let run: TrainRunInfo | undefined;
    if (ref.runId !== undefined) {
      run = runs.find((r) => r.runId === ref.runId);
      if (!run) throw new UserError(`No training run '${ref.runId}' for this database.`);
    } else {
      const wanted = canonical(ref.runDir!);
      run = runs.find((r) => canonical(r.config.outDir) === wanted);
      if (!run) throw new UserError(`${ref.runDir} is not the folder of a training run listed for this database; only those are read.`);
    }
    const runDir = run.config.outDir;
    const file = path.join(runDir, EPISODES_FILE);
    if (!fs.statSync(file, { throwIfNoEntry: false })?.isFile()) {
      throw new UserError(`Run ${run.runId} has no ${EPISODES_FILE} in ${runDir}: only on-policy runs write rollouts.`);
    }
    return { run, runDir, file };
  }

  private index(file: string): EpisodeIndex {
    return cached(this.indexes, file, () => new EpisodeIndex(file));
  }

  /** The run's tokenizer for token texts, or why it cannot be read (not kept: the folder may come back). */
  private tokenizer(modelDir: string): ChatTokenizer | Error {
    try {
      return cached(this.tokenizers, modelDir, () => ChatTokenizer.load(modelDir));
    } catch (err) {
      return err as Error;
    }
  }
}
