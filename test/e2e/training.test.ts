// A real fine-tune driven from the browser (Debian's Chromium, playwright-core) against a real
// `hindsight serve` on a temporary database and a random port, on the demo model
// (resources/models/stories260K) and the real trainer (ONNX Runtime, CPU EP):
//   - a small crafted export is uploaded, labelled by the heuristic judge through Settings'
//     "Run this judge now" (±1 rewards and hints), and one label is set with the keyboard;
//   - Fine-tune on the Training page with Precision fp16 (priced and recorded as such) and Recomputation off: the live progress bar with ETA, the six charts filling
//     from the trainer's events, the execution provider actually used ("CPU");
//   - Cancel mid-run, then Resume to the end without losing or repeating a step;
//   - the adapter folder at the end, checked on disk (PEFT files and trainer_log.jsonl),
//     shown in the browser with a Copy button and a note that a browser cannot open it;
//   - a second run (Binary RL) starts with empty charts and says why it has no teacher gap;
//   - a CUDA request without the CUDA provider fails with the reason, never on the CPU;
//   - a run going when serve stops (closed, or killed) is listed after a restart and resumes
//     to the end.
// Screenshots: training-cancelled.png, training-running.png (resumed, mid-run) and
// training.png (finished); see helpers.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closeApp, haveChromium, openApp, reportMissingChromium, shot, startServe, TEST_TIMEOUT_MS, type ServeHandle, type ToastRecord } from './helpers.js';

reportMissingChromium('training.test.ts');

// Long enough that the page sees step 3 with the run still going on a loaded machine, where
// the events of several steps can arrive in one batch (16 was not, once in CI).
const STEPS = 40;
const BATCH = 2;
const SAVE_EVERY = 2;

/** Four story requests whose reactions the heuristic judge reads as +1, +1, −1 (with a hint), −1 (with a hint). */
const CONVERSATIONS = [
  ['Tell me a story about a cat.', 'Once upon a time there was a dog named Max.', 'No, I said a cat, not a dog. Please use a cat.'],
  ['Tell me a story about a girl and a ball.', 'Lily had a red ball. She played with it in the park every day.', 'Perfect, thanks! That is exactly what I wanted.'],
  ['Write a short story about the sun.', 'The sun was big and hot. It made the flowers grow.', 'Great, thank you!'],
  ['Tell me a story about a bird.', 'Once upon a time there was a fish in the sea. The fish was sad and swam far away.', 'That is too long. You should keep it to one sentence about a bird.'],
];

interface SampleView {
  responseTurn: number;
  label: { reward: number | null; hint: string | null; source: string | null } | null;
}
interface RunInfo {
  runId: string;
  status: string;
  executionProvider: string | null;
  adapterDir: string | null;
  config: { outDir: string; steps: number; device: string; precision?: string; recompute?: string };
}
interface Progress {
  step: number;
  total_steps: number;
  teacher_student_gap: number | null;
}

let dir: string;
let serve: ServeHandle;
let browser: Browser;
let page: Page;
let pageErrors: string[] = [];
let toasts: ToastRecord;

const chartPoints = (key: string) => page.locator(`[data-chart=${key}]`).getAttribute('data-points').then(Number);
const waitForStatus = (status: string) => page.locator(`[data-testid=train-status]`, { hasText: status }).waitFor();
/**
 * Waits until the page draws the shown run up to `step`: the step counter and the loss chart.
 * The status chip can change before the charts do (a reload or a resume reads the run's
 * status first, then its history), so a test that reads the charts waits for this first.
 */
const waitForDrawnTo = (step: number) =>
  page.waitForFunction(
    (n) => document.querySelector('[data-testid=train-step] b')?.textContent === String(n) && document.querySelector('[data-chart=loss]')?.getAttribute('data-points') === String(n),
    step,
  );
/** The lines of a run's trainer_log.jsonl: steps, and the held-out split and evaluations (with a `type`). */
const logLines = (outDir: string) =>
  fs.readFileSync(path.join(outDir, 'trainer_log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Progress & { type?: string });
const stepLines = (outDir: string) => logLines(outDir).filter((l) => l.type === undefined);
const checkpointStep = (outDir: string) => JSON.parse(fs.readFileSync(path.join(outDir, 'checkpoints', 'latest.json'), 'utf8')).step as number;
/** The run settings its latest checkpoint holds (trainer_state.json), which a resume continues with. */
const checkpointSettings = (outDir: string) => {
  const latest = JSON.parse(fs.readFileSync(path.join(outDir, 'checkpoints', 'latest.json'), 'utf8')) as { dir: string };
  return JSON.parse(fs.readFileSync(path.join(outDir, 'checkpoints', latest.dir, 'trainer_state.json'), 'utf8')).settings as { precision: string | null; recompute: string };
};

async function allSamples(): Promise<SampleView[]> {
  const { sessions } = await serve.api<{ sessions: { id: string }[] }>('listSessions', {});
  const details = await Promise.all(sessions.map((s) => serve.api<{ samples: SampleView[] }>('getSession', { id: s.id })));
  return details.flatMap((d) => d.samples);
}

describe.skipIf(!haveChromium)('a fine-tune from the Training page, in a browser', { timeout: TEST_TIMEOUT_MS }, () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hindsight-e2e-train-'));
    const lines = CONVERSATIONS.map(([ask, reply, reaction]) =>
      JSON.stringify({ messages: [{ role: 'user', content: ask }, { role: 'assistant', content: reply }, { role: 'user', content: reaction }] }),
    );
    fs.writeFileSync(path.join(dir, 'stories.jsonl'), lines.join('\n') + '\n');
    serve = await startServe(path.join(dir, 'train.db'));
    ({ browser, page, pageErrors, toasts } = await openApp(serve, { viewport: { width: 1360, height: 900 }, login: false }));
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(serve.url).origin });
  }, TEST_TIMEOUT_MS);

  afterAll(async () => {
    await closeApp(browser, serve, dir);
  }, TEST_TIMEOUT_MS);

  it('imports an export, labels it with the heuristic judge from Settings and one key press', async () => {
    await page.goto(serve.loginUrl);
    await page.getByRole('heading', { name: 'Welcome to Hindsight' }).waitFor();
    await page.setInputFiles('[data-testid=import-file]', path.join(dir, 'stories.jsonl'));
    await page.locator('.session-row').nth(3).waitFor();

    await page.locator('[data-nav=settings]').click();
    await page.locator('input[name=backend][value=heuristic]').check();
    await page.locator('[data-action=run-judge]').click();
    // The toast counts the rewards it gave, as the labels below are.
    expect(await toasts.next('Judged 4 samples')).toContain('Judged 4 samples: 2 good (+1), 2 bad (−1).');
    const judged = await allSamples();
    expect(judged.map((s) => s.label?.reward).sort()).toEqual([-1, -1, 1, 1]);
    expect(judged.filter((s) => s.label?.hint).length).toBe(2);

    // The ball story's +1, confirmed by hand: it becomes a manual label.
    await page.locator('[data-nav=sessions]').click();
    // JSONL conversations have no titles: find it by its text.
    await page.fill('[data-testid=session-search]', 'girl and a ball');
    await page.waitForFunction(() => document.querySelectorAll('.session-row').length === 1);
    await page.locator('.session-link').click();
    await page.locator('.turn.selected').waitFor();
    // First −1 over the heuristic's +1: the chip and the inspector show the manual value, not the
    // judge's old vote beside it ("−1 manual +1", issue 34).
    await page.keyboard.press('2');
    const chip = page.locator('.turn.selected [data-testid=reward-chip]', { hasText: 'manual' });
    await chip.waitFor();
    expect((await chip.innerText()).replace(/\s+/g, ' ').trim()).toBe('−1 manual');
    expect(await page.locator('[data-testid=replaced-votes]').textContent()).toContain("Your label, −1, replaces the judge's earlier vote");
    expect(await page.locator('.inspector-pane [data-testid=reward-chip]').textContent()).not.toContain('+1');
    await shot(page, 'annotator-manual-label');
    await page.keyboard.press('1');
    await page.locator('.turn.selected [data-testid=reward-chip]', { hasText: '+1' }).waitFor();
    expect((await page.locator('.turn.selected [data-testid=reward-chip]').innerText()).replace(/\s+/g, ' ').trim()).toBe('+1 manual');
    expect((await allSamples()).filter((s) => s.label?.source === 'manual').map((s) => s.label?.reward)).toEqual([1]);
  });

  it('fine-tunes the demo model with live progress and charts, cancels mid-run and resumes to the end', async () => {
    await page.locator('[data-nav=training]').click();
    await page.locator('[data-action=fine-tune]').waitFor();
    expect(await page.locator('[data-testid=train-model]').inputValue()).toMatch(/resources[/\\]models[/\\]stories260K$/);
    expect(await page.locator('input[name=method][value=combine]').isChecked()).toBe(true);
    await page.fill('[data-testid=train-steps]', String(STEPS));
    await page.fill('[data-testid=train-batch]', String(BATCH));
    await page.fill('[data-testid=train-save-every]', String(SAVE_EVERY));
    // Precision beside Device: the device's default (fp32 on the CPU) until fp16 is chosen, which the estimate prices.
    expect(await page.locator('[data-testid=train-quantize] option[value=none]').textContent()).toBe('none (fp32)');
    expect(await page.locator('[data-testid=train-precision] option').first().textContent()).toBe('default (fp32)');
    await page.selectOption('[data-testid=train-precision]', 'fp16');
    await page.locator('[data-testid=train-memory-parts]', { hasText: /^fp16 weights / }).waitFor();
    expect(await page.locator('[data-testid=train-quantize] option[value=none]').textContent()).toBe('none (fp16)');
    // Recomputation, in the folded Optimizer and LoRA section (folded again for the screenshots): Auto until Off is chosen.
    const advanced = page.locator('summary', { hasText: 'Optimizer and LoRA' });
    await advanced.click();
    expect(await page.locator('[data-testid=train-recompute] option:checked').textContent()).toBe('Auto (from 1,024)');
    await page.selectOption('[data-testid=train-recompute]', 'off');
    await advanced.click();
    const outDir = await page.locator('[data-testid=train-out]').inputValue();
    await page.locator('[data-action=fine-tune]').click();
    expect(await page.locator('[data-testid=train-run-weights]').textContent()).toBe('fp16 base');
    expect(await page.locator('[data-testid=train-run-recompute]').textContent()).toBe('recomputation off');

    // The trainer reports the execution provider it really runs on.
    await page.locator('[data-testid=train-device]', { hasText: /^\s*CPU\s*$/ }).waitFor();
    // Cancel from inside the page as soon as step 3 is drawn: a driver round trip would let
    // the fast demo model run on.
    const etaBeforeCancel = await page.waitForFunction(
      () => {
        const step = Number(document.querySelector('[data-testid=train-step] b')?.textContent ?? 0);
        if (step < 3) return false;
        const eta = document.querySelector('[data-testid=train-eta]')!.textContent;
        const cancel = document.querySelector<HTMLButtonElement>('[data-action=cancel-train]');
        if (!cancel) throw new Error(`step ${step} was first drawn with the run ${document.querySelector('[data-testid=train-status]')?.textContent}: too late to cancel`);
        cancel.click();
        return eta;
      },
      undefined,
      { polling: 'raf' },
    );
    expect(await etaBeforeCancel.jsonValue()).toMatch(/ETA\s*(<1s|\d+s|\d+m \d+s)/);
    await waitForStatus('cancelled');
    // The checkpoint kept on cancel, and the log so far, are on disk; the page draws that step.
    const stoppedAt = checkpointStep(outDir);
    await waitForDrawnTo(stoppedAt);
    expect(stoppedAt).toBeGreaterThanOrEqual(3);
    expect(stoppedAt).toBeLessThan(STEPS);
    expect(await page.locator('[data-testid=train-eta]').textContent()).toMatch(/ETA\s*—/);
    expect(Number(await page.locator('[data-testid=train-progress]').getAttribute('aria-valuenow'))).toBe(Math.round((100 * stoppedAt) / STEPS));
    expect(await page.locator('[data-testid=adapter-folder]').textContent()).toContain(`Adapter saved at step ${stoppedAt} of ${STEPS}`);
    expect(stepLines(outDir)).toHaveLength(stoppedAt);
    expect(fs.existsSync(path.join(outDir, 'checkpoints', `step-${String(stoppedAt).padStart(6, '0')}`))).toBe(true);

    await shot(page, 'training-cancelled');

    await page.locator('[data-action=resume-train]', { hasText: `Resume from step ${stoppedAt}` }).click();
    await page.waitForFunction((from) => Number(document.querySelector('[data-testid=train-step] b')?.textContent ?? 0) >= from + 3, stoppedAt);
    await shot(page, 'training-running');
    await waitForStatus('finished');

    // The whole run is drawn, the steps before the cancel included, each once.
    await waitForDrawnTo(STEPS);
    expect(await page.locator('[data-testid=train-progress]').getAttribute('aria-valuenow')).toBe('100');
    expect(await page.locator('[data-testid=train-eta]').textContent()).toMatch(/ETA\s*done/);
    for (const key of ['loss', 'reward', 'kl', 'clip', 'throughput']) expect(await chartPoints(key), key).toBe(STEPS);
    const [run] = (await serve.api<{ runs: RunInfo[] }>('trainStatus')).runs;
    const { progress } = await serve.api<{ progress: Progress[] }>('trainMetrics', { runId: run!.runId });
    expect(progress.map((p) => p.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    // Combined on rows with and without hints: the gap is drawn where a batch had a teacher.
    const withGap = progress.filter((p) => p.teacher_student_gap !== null).length;
    expect(withGap).toBeGreaterThan(0);
    expect(await chartPoints('gap')).toBe(withGap);
    expect(run!.executionProvider).toMatch(/cpu/i);
    // The run's record and the settings it resumed with carry the Precision and Recomputation chosen.
    expect(run!.config.precision).toBe('fp16');
    expect(checkpointSettings(outDir)).toMatchObject({ precision: 'fp16', recompute: 'off' });

    // The adapter folder really holds a PEFT adapter and one log line per step.
    expect(run!.adapterDir).toBe(outDir);
    const config = JSON.parse(fs.readFileSync(path.join(outDir, 'adapter_config.json'), 'utf8'));
    expect(config).toMatchObject({ peft_type: 'LORA', task_type: 'CAUSAL_LM', r: 16, lora_alpha: 32 });
    expect(fs.statSync(path.join(outDir, 'adapter_model.safetensors')).size).toBeGreaterThan(1000);
    expect(stepLines(outDir).map((l) => l.step)).toEqual(progress.map((p) => p.step));
    // Four sessions with samples: one is held out, never trained on, and evaluated at the start,
    // every few steps and at the end (docs/design.md §Evaluation).
    const split = logLines(outDir).filter((l) => l.type === 'held_out');
    expect(split).toEqual([{ type: 'held_out', sessions: 1, samples: 1 }]);
    expect(logLines(outDir).filter((l) => l.type === 'eval').map((l) => l.step)).toContain(STEPS);

    // In a browser the folder cannot be opened: the path, a Copy button, and why.
    const box = page.locator('[data-testid=adapter-folder]');
    expect(await box.locator('b').textContent()).toBe('Adapter ready');
    expect(await box.locator('[data-testid=adapter-path]').textContent()).toBe(outDir);
    expect(await box.locator('[data-action=open-adapter]').count()).toBe(0);
    expect(await box.locator('[data-testid=adapter-browser-note]').textContent()).toContain('A browser cannot open folders');
    await page.evaluate(() => document.querySelector('.content')!.scrollTo(0, 0));
    await shot(page, 'training');
    await box.locator('[data-action=copy-adapter-path]').click();
    await box.locator('[data-action=copy-adapter-path]', { hasText: 'Copied' }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(outDir);
    await expect(serve.api('openPath', { path: outDir })).rejects.toThrow(/browser cannot open folders/);

    // A reload redraws the finished run from the server's record.
    await page.reload();
    toasts.reset();
    await waitForStatus('finished');
    await waitForDrawnTo(STEPS);
  });

  it('starts a second run with empty charts, and says why Binary RL has no teacher gap', async () => {
    await page.locator('input[name=method][value=rl]').check();
    await page.fill('[data-testid=train-steps]', '4');
    // Two fields of the folded Optimizer and LoRA section, off their defaults for the reload below: a pass per row, every token weighed alike.
    await page.locator('summary', { hasText: 'Optimizer and LoRA' }).click();
    await page.fill('[data-testid=train-micro-batch]', '1');
    await page.selectOption('[data-testid=train-loss-agg]', 'token-mean');
    // Recomputation on below 1,024 tokens, where Auto leaves it off: the estimate prices it.
    expect(await page.locator('[data-testid=train-memory-parts]').textContent()).not.toContain('with recomputation');
    await page.selectOption('[data-testid=train-recompute]', 'on');
    await page.locator('[data-testid=train-memory-parts]', { hasText: 'with recomputation' }).waitFor();
    const outDir = await page.locator('[data-testid=train-out]').inputValue();
    expect(outDir).toMatch(/[/\\]rl-\d{8}-\d{6}$/);
    const before = await page.locator('.run-line').getAttribute('data-run-id');
    await page.locator('[data-action=fine-tune]').click();
    await page.waitForFunction((id) => document.querySelector('.run-line')?.getAttribute('data-run-id') !== id, before);
    // The first run's steps are gone from every chart.
    expect(await chartPoints('loss')).toBeLessThan(STEPS);
    await waitForStatus('finished');
    await waitForDrawnTo(4);
    expect(await chartPoints('gap')).toBe(0);
    expect(await page.locator('[data-chart=gap] .chart-empty').textContent()).toContain('no teacher');
    expect(fs.existsSync(path.join(outDir, 'adapter_model.safetensors'))).toBe(true);
    expect(checkpointSettings(outDir).recompute).toBe('on');
    // The card and Past runs (newest first) say the Recomputation chosen beside the base.
    expect(await page.locator('[data-testid=train-run-recompute]').textContent()).toBe('recomputation on');
    expect(await page.locator('[data-history-run] td.small').allTextContents()).toEqual([
      expect.stringMatching(/ · fp16 base · recomputation on$/),
      expect.stringMatching(/ · fp16 base · recomputation off$/),
    ]);
  });

  it('a wrong model folder: its error shows at the top of the page and of Progress, and the last run reads as the previous one', async () => {
    // The settings typed for the last runs survive a reload (Steps was 4, Micro-batch 1, Loss aggregation token-mean, Precision fp16, Recomputation on).
    await page.reload();
    await page.locator('[data-testid=train-status]').waitFor();
    expect(await page.locator('[data-testid=train-steps]').inputValue()).toBe('4');
    expect(await page.locator('input[name=method][value=rl]').isChecked()).toBe(true);
    expect(await page.locator('[data-testid=train-micro-batch]').inputValue()).toBe('1');
    expect(await page.locator('[data-testid=train-loss-agg]').inputValue()).toBe('token-mean');
    expect(await page.locator('[data-testid=train-precision]').inputValue()).toBe('fp16');
    expect(await page.locator('[data-testid=train-recompute]').inputValue()).toBe('on');
    // Top-K distillation is kept too (0 again before a run: Binary RL has no teacher to distil), and a
    // kept value outside its bounds falls back to the default.
    await page.locator('summary', { hasText: 'Optimizer and LoRA' }).click();
    await page.selectOption('[data-testid=train-recompute]', 'auto'); // Auto again for the later runs
    await page.fill('[data-testid=train-opd-topk]', '8');
    await page.waitForFunction(() => JSON.parse(localStorage.getItem('hindsight.training.form') ?? '{}').opdTopK === 8);
    await page.reload();
    await page.locator('[data-testid=train-status]').waitFor();
    expect(await page.locator('[data-testid=train-opd-topk]').inputValue()).toBe('8');
    // Written before the page's scripts run on the next load (once: the flag lives in this tab's
    // sessionStorage), so no late form write of the open page can put 8 back over it.
    await page.addInitScript(() => {
      if (sessionStorage.getItem('hs-test-topk-written')) return;
      sessionStorage.setItem('hs-test-topk-written', '1');
      localStorage.setItem('hindsight.training.form', JSON.stringify({ ...JSON.parse(localStorage.getItem('hindsight.training.form')!), opdTopK: 5000 }));
    });
    await page.reload();
    await page.locator('[data-testid=train-status]').waitFor();
    expect(await page.locator('[data-testid=train-opd-topk]').inputValue()).toBe('0');
    expect(await page.locator('[data-testid=train-micro-batch]').inputValue()).toBe('1');
    // Back to the device's default (the first option) for the later runs: the runs record no precision, and a reload keeps none.
    await page.selectOption('[data-testid=train-precision]', { index: 0 });
    await page.waitForFunction(() => !('precision' in JSON.parse(localStorage.getItem('hindsight.training.form') ?? '{}')));
    const model = await page.locator('[data-testid=train-model]').inputValue();
    // The model picker (where there is one) types a path through "Other…".
    const picker = page.locator('[data-testid=train-model-pick]');
    if (await picker.count()) await picker.selectOption('__other__');
    await page.fill('[data-testid=train-model]', path.join(dir, 'no-such-model'));
    const before = await page.locator('.run-line').getAttribute('data-run-id');
    await page.locator('[data-action=fine-tune]').click();
    const banner = page.locator('[data-testid=train-error]');
    await banner.waitFor();
    expect(await banner.textContent()).toMatch(/did not start.*no-such-model has no config\.json/);
    // Where the user looks: on screen at 1360×900 right after pressing Fine-tune.
    const box = (await banner.boundingBox())!;
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.y + box.height).toBeLessThanOrEqual(900);
    // The Progress panel says it first, and the finished run below it is the previous one.
    expect(await page.locator('[data-testid=train-start-failed]').textContent()).toMatch(/Not started: .*no-such-model.*previous run/s);
    expect(await page.locator('[data-testid=train-previous-run]').isVisible()).toBe(true);
    expect(await page.locator('.run-line').getAttribute('data-run-id')).toBe(before);
    // The refused call is the one page error this expects (Chromium logs the 422).
    const refused = pageErrors.findIndex((e) => /status of 422/.test(e));
    expect(refused).toBeGreaterThanOrEqual(0);
    pageErrors.splice(refused, 1);
    await shot(page, 'training-wrong-model');
    await page.fill('[data-testid=train-model]', model);
    await page.locator('[data-action=dismiss-train-error]').click();
    await banner.waitFor({ state: 'detached' });
    expect(await page.locator('[data-testid=train-previous-run]').count()).toBe(0);
  });

  /** Starts a 2-step run on `device` from the page and returns how it ended: failed or finished. */
  async function runOnDevice(device: 'cuda' | 'webgpu'): Promise<string | null> {
    await page.selectOption('[data-testid=train-device-select]', device);
    await page.fill('[data-testid=train-steps]', '2');
    const before = await page.locator('.run-line').getAttribute('data-run-id');
    await page.locator('[data-action=fine-tune]').click();
    await page.waitForFunction((id) => document.querySelector('.run-line')?.getAttribute('data-run-id') !== id, before);
    const status = page.locator('[data-testid=train-status]', { hasText: /^(failed|finished)$/ });
    await status.waitFor();
    return status.textContent();
  }

  it('reports a CUDA request plainly: it runs on CUDA where the provider is installed, or fails with the reason', async () => {
    const status = await runOnDevice('cuda');
    // No Precision chosen: the run takes CUDA's default, fp16, and its card says so.
    expect(await page.locator('[data-testid=train-precision] option').first().textContent()).toBe('default (fp16)');
    expect(await page.locator('[data-testid=train-run-weights]').textContent()).toBe('fp16 base');
    // Recomputation left at Auto: the card says nothing of it.
    expect(await page.locator('[data-testid=train-run-recompute]').count()).toBe(0);
    if (status === 'failed') {
      // Never a silent fall-back to the CPU: the run stops and says what is missing.
      expect(await page.locator('[data-testid=train-run-error]').textContent()).toMatch(/CUDA provider is not installed.*setup:gpu/);
      expect(await page.locator('[data-testid=train-device]').textContent()).toContain('CUDA requested, did not start');
      expect(await page.locator('[data-action=resume-train]').count()).toBe(0);
      expect(await page.locator('[data-testid=train-error]').count()).toBe(0);
      await shot(page, 'training-cuda-missing');
    } else {
      expect(await page.locator('[data-testid=train-device]').textContent()).toContain('CUDA GPU');
    }
  });

  it('reports a WebGPU request plainly: it runs on the GPU where a driver answers, or fails naming the driver', async () => {
    if ((await runOnDevice('webgpu')) === 'failed') {
      expect(await page.locator('[data-testid=train-run-error]').textContent()).toMatch(/WebGPU found no GPU .*Vulkan driver.*Install the driver and restart Hindsight, or set the Device field to CPU/);
      expect(await page.locator('[data-testid=train-device]').textContent()).toContain('WebGPU requested, did not start');
      await shot(page, 'training-webgpu-missing');
    } else {
      expect(await page.locator('[data-testid=train-device]').textContent()).toContain('WebGPU GPU');
    }
  });

  afterEach(async () => {
    // The later runs are on the CPU, whatever a failed test left selected.
    if (await page.locator('[data-testid=train-device-select]').count()) await page.selectOption('[data-testid=train-device-select]', 'cpu');
  });

  /** Starts a combined run of `steps` and returns its adapter folder once `atStep` is drawn. */
  async function startRunUntil(steps: number, atStep: number): Promise<string> {
    await page.locator('input[name=method][value=combine]').check();
    await page.fill('[data-testid=train-steps]', String(steps));
    await page.fill('[data-testid=train-batch]', String(BATCH));
    await page.fill('[data-testid=train-save-every]', String(SAVE_EVERY));
    const outDir = await page.locator('[data-testid=train-out]').inputValue();
    const before = await page.locator('.run-line').getAttribute('data-run-id');
    await page.locator('[data-action=fine-tune]').click();
    await page.waitForFunction((id) => document.querySelector('.run-line')?.getAttribute('data-run-id') !== id, before);
    await page.waitForFunction((n) => Number(document.querySelector('[data-testid=train-step] b')?.textContent ?? 0) >= n, atStep);
    return outDir;
  }

  async function restartServe(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    await serve.stop(signal);
    serve = await startServe(path.join(dir, 'train.db'));
    await page.goto(serve.loginUrl);
    await page.locator('[data-nav=training]').click();
  }

  async function resumeToTheEnd(from: number, steps: number, outDir: string): Promise<void> {
    // The charts come back from the run's trainer_log.jsonl, up to its checkpoint.
    await page.waitForFunction((n) => document.querySelector('[data-chart=loss]')?.getAttribute('data-points') === String(n), from);
    await page.locator('[data-action=resume-train]', { hasText: `Resume from step ${from}` }).click();
    await waitForStatus('finished');
    await waitForDrawnTo(steps);
    const run = (await serve.api<{ runs: RunInfo[] }>('trainStatus')).runs.at(-1)!;
    const { progress } = await serve.api<{ progress: Progress[] }>('trainMetrics', { runId: run.runId });
    expect(progress.map((p) => p.step)).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
    expect(fs.existsSync(path.join(outDir, 'adapter_model.safetensors'))).toBe(true);
  }

  it('closing serve mid-run cancels at a checkpoint; after a restart the run resumes to the end', async () => {
    const outDir = await startRunUntil(40, 3);
    await restartServe('SIGTERM');
    await waitForStatus('cancelled');
    // The cancel on close kept a checkpoint at the last step, and the page shows that step.
    const stoppedAt = checkpointStep(outDir);
    await waitForDrawnTo(stoppedAt);
    expect(stoppedAt).toBeLessThan(40);
    await resumeToTheEnd(stoppedAt, 40, outDir);
  });

  it('a run cut off by a crash is listed as interrupted and resumes from its last checkpoint', async () => {
    const outDir = await startRunUntil(40, 5);
    await restartServe('SIGKILL');
    await waitForStatus('cancelled');
    const checkpoint = checkpointStep(outDir);
    expect(checkpoint).toBeGreaterThanOrEqual(4);
    expect(await page.locator('[data-testid=train-run-error]').textContent()).toContain(`resume continues from the checkpoint at step ${checkpoint}`);
    await resumeToTheEnd(checkpoint, 40, outDir);
    const runs = (await serve.api<{ runs: RunInfo[] }>('trainStatus')).runs;
    // The CUDA and WebGPU runs finish where their GPU answers, and fail where none does.
    const onGpu = expect.stringMatching(/^(failed|finished)$/);
    expect(runs.map((r) => r.status)).toEqual(['finished', 'finished', onGpu, onGpu, 'finished', 'finished']);
    expect(runs.map((r) => r.config.device)).toEqual(['cpu', 'cpu', 'cuda', 'webgpu', 'cpu', 'cpu']);
    expect(runs.map((r) => r.config.precision)).toEqual(['fp16', 'fp16', undefined, undefined, undefined, undefined]);
    expect(runs.map((r) => r.config.recompute)).toEqual(['off', 'on', 'auto', 'auto', 'auto', 'auto']);
  });

  it('logged no errors in the page', () => {
    // Killing serve (the crash above) cuts the page's event stream and calls: Chromium logs those.
    const cutByTheKill = /net::ERR_(INCOMPLETE_CHUNKED_ENCODING|CONNECTION_RESET|CONNECTION_REFUSED|EMPTY_RESPONSE)/;
    expect(pageErrors.filter((e) => !cutByTheKill.test(e))).toEqual([]);
  });
});
