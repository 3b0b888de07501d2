// A bounded run of the live-capture soak (bench/soak.ts): concurrent clients on loopback,
// multi-turn, streamed, side and keyless requests, against the local model and through
// proxy mode; zero errors, and every answered request recorded.
import { describe, expect, it } from 'vitest';
import { runSoak } from '../../bench/soak.js';
import { STATE_TIMEOUT_MS, TEST_TIMEOUT_MS } from '../helpers/deadlines.js';

// The request count bounds each run; the time limit only catches a hang. A limit near the
// usual duration would end a run on a loaded machine early, with fewer requests than asserted.
const HANG_S = STATE_TIMEOUT_MS / 1000;

describe('soak (bounded)', () => {
  it('6 clients × 60 requests on the local model: zero errors, all recorded', async () => {
    const r = await runSoak({ clients: 6, requests: 60, seconds: HANG_S, maxTokens: 4, upstream: false });
    expect(r.errors).toEqual([]);
    expect(r.ok).toBe(60);
    expect(r.recorded).toBe(60);
    expect(r.samples).toBeGreaterThan(10);
  }, TEST_TIMEOUT_MS);

  it('4 clients × 30 requests through proxy mode: zero errors, all recorded', async () => {
    const r = await runSoak({ clients: 4, requests: 30, seconds: HANG_S, maxTokens: 4, upstream: true });
    expect(r.errors).toEqual([]);
    expect(r.recorded).toBe(30);
  }, TEST_TIMEOUT_MS);
});
