// The Rollouts view and the Training page's On-policy section in a browser (Debian's Chromium,
// playwright-core) against a real `hindsight serve`. The database lists one on-policy run
// whose folder the test writes as such a run leaves it: episodes.jsonl in the shape of
// src-shared/rollout.ts (tool calls, a failed one, rewards on turns, an OPD gap, a line that
// is not an episode and a torn last line) and a trainer_log.jsonl whose steps carry the PPO
// metrics.
//   - Rollouts: the run is listed, its episodes too with the notes; an episode opens as a
//     conversation, a tool call unfolds to its arguments and result, the per-turn reward and
//     the OPD token gap show; the filters narrow the list.
//   - Training: the PPO charts appear beside the loss for that run and not for a run without
//     them; the On-policy section reveals its fields with their defaults, and a run started
//     with it from a task file trains on-policy to the end, its rollout metrics charted.
// Screenshots: rollouts.png, training-on-policy.png.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StepLog } from '../../src-shared/trainer-log-line.js';
import type { Episode } from '../../src-shared/rollout.js';
import { episodesFileText, gapOf, runInfo, sampleEpisodes, writeEpisodes, writeRunsFile } from '../helpers/episodes.js';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle } from './helpers.js';

reportMissingChromium('rollouts.test.ts');

const STEPS = 6;
/** Episodes of the older run: more than one page of the list (500). */
const MANY = 620;

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let episodes: Episode[];

/** The steps of an on-policy run with `gae`: each carries drift, the value loss, the explained variance and the rollouts' reward. */
function stepLines(): StepLog[] {
  return Array.from({ length: STEPS }, (_, i) => ({
    step: i + 1, total_steps: STEPS, epoch: 0, loss: 0.8 - 0.1 * i, reward_mean: -0.2 + 0.1 * i, adv_mean: 0, teacher_student_gap: null,
    approx_kl: 0.002 * i, clipfrac: 0.01 * i, grad_norm: 0.5, lr: 1e-4, tokens: 400, tokens_per_s: 900, elapsed_s: 2 * (i + 1), eta_s: 2 * (STEPS - i - 1),
    execution_provider: 'CPUExecutionProvider', drift: 0.0004 + 0.0001 * (i % 2), value_loss: 0.5 / (i + 1), explained_variance: -0.3 + 0.2 * i,
    episodes: 16, episode_reward_mean: -0.25 + 0.15 * i,
  }));
}

const chartPoints = (key: string) => page.locator(`[data-chart=${key}]`).getAttribute('data-points').then(Number);
const row = (e: Episode) => page.locator(`.episode-row[data-episode="${e.id}"]`);
const shownEpisode = (e: Episode) => page.locator(`[data-testid=episode-detail] .episode[data-episode="${e.id}"]`);

describe.skipIf(!haveChromium)('the Rollouts view and the On-policy section, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-rollouts-'));
    const dbPath = path.join(dir, 'rollouts.db');
    episodes = sampleEpisodes();
    const runDir = path.join(dir, 'adapters', 'onpolicy-run');
    writeEpisodes(runDir, episodesFileText(episodes, { ...episodes[0]!, id: 'tasks.jsonl:9#0@7' }));
    fs.writeFileSync(path.join(runDir, 'trainer_log.jsonl'), stepLines().map((l) => JSON.stringify(l)).join('\n') + '\n');
    // An older run with many episodes: the list loads them a page at a time.
    const many = Array.from({ length: MANY }, (_, i) => JSON.stringify({ ...episodes[i % 5]!, id: `many#${i}`, step: 1 + Math.floor(i / 16) }));
    writeEpisodes(path.join(dir, 'adapters', 'big-run'), many.join('\n') + '\n');
    writeRunsFile(dbPath, [runInfo('0f0f0f0f0f0f', path.join(dir, 'adapters', 'big-run'), undefined, Date.now() - 3_600_000), runInfo('a1b2c3d4e5f6', runDir)]);
    fs.writeFileSync(path.join(dir, 'tasks.jsonl'), JSON.stringify({ messages: [{ role: 'user', content: 'Tell me a story.' }], answer_regex: '\\bLily\\b' }) + '\n');
    serve = await startServe(dbPath);
    ({ browser, page, pageErrors } = await openApp(serve, { viewport: { width: 1360, height: 900 } }));
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  }, TEST_TIMEOUT_MS);

  it('lists the run’s episodes, with a note for each line it skipped', async () => {
    await page.locator('[data-nav=rollouts]').click();
    await row(episodes[4]!).waitFor();
    expect(await page.locator('[data-testid=rollout-run] option').allTextContents()).toEqual([
      expect.stringMatching(/^a1b2c3d4e5f6 · combine · .* · finished · \d+ KB$/),
      expect.stringMatching(/^0f0f0f0f0f0f · combine · .* · finished · \d{3} KB$/),
    ]);
    expect(await page.locator('.episode-row').count()).toBe(5);
    expect(await page.locator('[data-testid=rollouts-count]').textContent()).toBe('5 of 5 episodes');
    const notes = await page.locator('[data-testid=rollouts-notes] li').allTextContents();
    expect(notes).toEqual([expect.stringMatching(/^line 5: not an episode/), 'line 8 is incomplete (a run still writing it, or one cut off); skipped']);
    const failing = await row(episodes[1]!).textContent();
    expect(failing).toMatch(/tasks\.jsonl:1\s*k 1 · step 1\s*−1\s*task/);
    expect(failing).toMatch(/answered\s*2 turns\s*1 tool call · 1 failed\s*\d+ tokens/);
    // The first episode opens by itself.
    await shownEpisode(episodes[0]!).waitFor();
  });

  it('opens an episode as a conversation: a folded tool call with its arguments and result, and the reward on its turn', async () => {
    await row(episodes[1]!).click();
    const episode = shownEpisode(episodes[1]!);
    await episode.waitFor();
    expect(await episode.locator('.prompt .msg').allTextContents()).toEqual([expect.stringContaining('You are a helpful assistant.'), expect.stringContaining('What is 17 times 3?')]);
    // Two assistant turns; the failed call's tool message folds into the call.
    expect(await episode.locator('.msg.generated').count()).toBe(2);
    const call = episode.locator('[data-testid=tool-call]');
    expect(await call.getAttribute('open')).toBeNull();
    expect(await call.locator('[data-testid=tool-result]').isVisible()).toBe(false);
    expect(await call.getAttribute('class')).toContain('failed');
    expect(await call.locator('summary').textContent()).toMatch(/⚠\s*calculator\({"expression":"17\/0"}\)\s*error\s*3 ms/);
    await call.locator('summary').click();
    await call.locator('[data-testid=tool-result]', { hasText: 'error: division by zero' }).waitFor();
    expect(await call.locator('pre').first().textContent()).toBe('{\n  "expression": "17/0"\n}');
    // The −1 is on the last token of the second turn.
    const secondTurn = episode.locator('.msg.generated').nth(1);
    expect(await secondTurn.locator('[data-testid=turn-reward]').textContent()).toMatch(/−1\s*this turn/);
    expect(await episode.locator('.msg.generated').first().locator('[data-testid=turn-reward]').count()).toBe(0);
    expect(await episode.locator('[data-testid=episode-reward]').textContent()).toMatch(/−1\s*task/);

    // Two rewarded turns, each with its own reward.
    await row(episodes[3]!).click();
    const twoTurns = shownEpisode(episodes[3]!);
    await twoTurns.waitFor();
    expect(await twoTurns.locator('[data-testid=turn-reward]').allTextContents()).toEqual([expect.stringMatching(/\+0\.5/), expect.stringMatching(/−0\.5/)]);
    await twoTurns.locator('[data-testid=tool-call] summary').first().click();
    await twoTurns.locator('[data-testid=tool-result]', { hasText: '4' }).first().waitFor();
    await shot(page, 'rollouts');
  });

  it('shows an OPD episode’s teacher–student gap token by token', async () => {
    await page.selectOption('[data-testid=filter-finish]', 'max_tokens');
    await page.waitForFunction(() => document.querySelectorAll('.episode-row').length === 1);
    const opd = episodes[2]!;
    const episode = shownEpisode(opd);
    await episode.waitFor();
    const gap = episode.locator('[data-testid=turn-gap]');
    expect(await gap.locator('summary').textContent()).toMatch(new RegExp(`Teacher–student gap · ${opd.teacherGap!.length} tokens · mean [+−]\\d\\.\\d{3}`));
    await gap.locator('summary').click();
    const tokens = gap.locator('.tok');
    await tokens.first().waitFor();
    expect(await tokens.evaluateAll((spans) => spans.map((s) => Number((s as HTMLElement).dataset.value)))).toEqual(opd.teacherGap!.map((_, k) => gapOf(k)));
    expect((await gap.locator('[data-testid=token-view]').textContent())!.trim()).toBe('Once upon a time there was a little cat named Tom.');
    await tokens.nth(3).hover();
    expect(await gap.locator('[data-testid=token-view-readout]').textContent()).toMatch(/^".*" {2}[+−]\d\.\d{4} · log p old -?\d\.\d{4} → teacher -?\d\.\d{4}$/);
  });

  it('filters by reward sign, and by both filters together', async () => {
    await page.selectOption('[data-testid=filter-finish]', '');
    await page.selectOption('[data-testid=filter-reward]', 'positive');
    await page.waitForFunction(() => document.querySelectorAll('.episode-row').length === 1);
    await row(episodes[0]!).waitFor();
    await page.selectOption('[data-testid=filter-reward]', 'none');
    await page.waitForFunction(() => document.querySelectorAll('.episode-row').length === 2);
    expect(await page.locator('[data-testid=rollouts-count]').textContent()).toBe('2 of 5 episodes');
    await page.selectOption('[data-testid=filter-finish]', 'answer');
    await page.locator('.empty', { hasText: 'No episode matches.' }).waitFor();
    expect(await page.locator('[data-testid=episode-detail]').textContent()).not.toContain('tasks.jsonl');
  });

  it('re-reads a run’s file on Reload, and pages a long list into a virtual list', async () => {
    await page.selectOption('[data-testid=filter-finish]', '');
    await page.selectOption('[data-testid=filter-reward]', '');
    await page.waitForFunction(() => document.querySelector('[data-testid=rollouts-count]')?.textContent === '5 of 5 episodes');
    // The run appends an episode (completing its torn line first): Reload shows it.
    const extra = { ...episodes[3]!, id: 'tasks.jsonl:2#1@8', step: 8 };
    fs.appendFileSync(path.join(dir, 'adapters', 'onpolicy-run', 'episodes.jsonl'), `\n${JSON.stringify(extra)}\n`);
    await page.locator('[data-action=reload-rollouts]').click();
    await row(extra).waitFor();
    expect(await page.locator('[data-testid=rollouts-count]').textContent()).toBe('6 of 6 episodes');

    await page.selectOption('[data-testid=rollout-run]', '0f0f0f0f0f0f');
    await page.locator('[data-testid=rollouts-count]', { hasText: `${MANY} of ${MANY} episodes` }).waitFor();
    const more = page.locator('[data-action=load-more-rollouts]');
    expect(await more.textContent()).toBe(`500 of ${MANY} · load ${MANY - 500} more`);
    // Only the rows in and near view exist in the page.
    expect(await page.locator('.episode-row').count()).toBeLessThan(60);
    await more.click();
    await more.waitFor({ state: 'detached' });
    await page.locator('.episode-vlist').evaluate((el) => el.scrollTo(0, el.scrollHeight));
    await page.locator(`.episode-row[data-episode="many#${MANY - 1}"]`).click();
    await shownEpisode({ id: `many#${MANY - 1}` } as Episode).waitFor();
    expect(await page.locator('.episode-row').count()).toBeLessThan(60);
    await page.selectOption('[data-testid=rollout-run]', 'a1b2c3d4e5f6');
    await row(extra).waitFor();
  });

  it('charts the PPO metrics beside the loss for a run whose steps carry them', async () => {
    await page.locator('[data-nav=training]').click();
    await page.waitForFunction((n) => document.querySelector('[data-chart=loss]')?.getAttribute('data-points') === String(n), STEPS);
    const charts = await page.locator('[data-testid=train-charts] [data-chart]').evaluateAll((els) => els.map((e) => e.getAttribute('data-chart')));
    expect(charts.slice(0, 5)).toEqual(['loss', 'drift', 'value_loss', 'explained_variance', 'episode_reward']);
    for (const key of ['drift', 'value_loss', 'explained_variance', 'episode_reward']) expect(await chartPoints(key), key).toBe(STEPS);
    expect(await page.locator('[data-chart=episode_reward] .chart-last').textContent()).toBe('0.5');
    expect(await page.locator('[data-testid=train-run-summary]').textContent()).toMatch(/on-policy, K 4, reward/);
  });

  it('reveals the On-policy fields with their defaults, and trains on-policy from a task file', async () => {
    expect(await page.locator('[data-testid=op-rollouts]').count()).toBe(0);
    await page.locator('[data-testid=on-policy-toggle]').check();
    const value = (id: string) => page.locator(`[data-testid=${id}]`).inputValue();
    expect([await value('op-rollouts'), await value('op-epochs'), await value('op-contexts'), await value('op-turns'), await value('op-tokens')]).toEqual(['4', '2', '4', '4', '256']);
    expect(await page.locator('input[name=advantage][value=reward]').isChecked()).toBe(true);
    expect(await page.locator('[data-testid=op-grpo-std]').isDisabled()).toBe(true);
    expect(await page.locator('[data-testid=op-normalize]').isChecked()).toBe(false);
    expect(await page.locator('[data-testid=on-policy]').textContent()).toContain('Tasks give verifiable rewards: one JSON per line with messages and answer or answer_regex.');
    for (const a of ['reward', 'grpo', 'gae']) expect(await page.locator(`input[name=advantage][value=${a}]`).locator('..').textContent()).toMatch(/\w+.{20,}/);

    await page.locator('input[name=advantage][value=grpo]').check();
    await page.locator('[data-testid=op-grpo-std]').check();
    await page.fill('[data-testid=op-rollouts]', '3');
    await page.fill('[data-testid=op-task-file]', path.join(dir, 'tasks.jsonl'));
    await page.locator('[data-testid=op-task-file]').blur();
    await page.fill('[data-testid=train-steps]', '5');
    await page.locator('[data-testid=train-steps]').blur();

    await page.locator('[data-action=fine-tune]').click();
    // This run's own line (the page showed the earlier, finished run until now), then its end.
    await page.locator('[data-testid=train-run-summary]', { hasText: 'on-policy, K 3, grpo' }).waitFor();
    await page.locator('[data-testid=train-status]', { hasText: 'finished' }).waitFor();
    const { runs } = await serve.api<{ runs: { config: { steps: number; onPolicy?: unknown; outDir: string } }[] }>('trainStatus');
    expect(runs.at(-1)!.config).toMatchObject({
      steps: 5,
      onPolicy: { rollouts: 3, ppoEpochs: 2, advantage: 'grpo', grpoStd: true, normalizeAdvantages: false, contextsPerStep: 4, maxTurns: 4, maxTokens: 256, taskFile: path.join(dir, 'tasks.jsonl') },
    });
    // The run's steps carry the rollout metrics, charted beside the loss.
    await page.waitForFunction(() => document.querySelector('[data-chart=loss]')?.getAttribute('data-points') === '5');
    for (const key of ['drift', 'episode_reward']) expect(await chartPoints(key), key).toBe(5);
    expect(await page.locator('[data-chart=value_loss]').count()).toBe(0); // grpo: no value head
    // Its episodes are on disk for the Rollouts view: one task, three rollouts a step.
    const lines = fs.readFileSync(path.join(runs.at(-1)!.config.outDir, 'episodes.jsonl'), 'utf8').trim().split('\n');
    expect(lines).toHaveLength(15);
    // The screenshot shows this real run's charts beside the form that started it.
    await page.mouse.move(0, 0);
    // Tall enough for the whole form with the section open, beside the run's charts.
    await page.setViewportSize({ width: 1360, height: 1400 });
    await page.evaluate(() => document.querySelector('.content')!.scrollTo(0, 0));
    await shot(page, 'training-on-policy');
    await page.setViewportSize({ width: 1360, height: 900 });
  });

  it('logged no errors in the page', () => {
    expect(pageErrors).toEqual([]);
  });
});
