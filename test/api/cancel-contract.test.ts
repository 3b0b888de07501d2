// The contract's one `cancel` call, keyed by job kind (issue 28): each kind takes exactly its
// fields, strictly, and the events are one declaration (EVENT_NAMES is read off it).
import { describe, expect, it } from 'vitest';
import { CALL_NAMES, CANCEL_JOBS, EVENT_NAMES, isEventName, validateCall, ValidationError } from '../../src-shared/contract.js';

const problem = (input: unknown): string => {
  try {
    validateCall('cancel', input);
  } catch (err) {
    if (err instanceof ValidationError) return err.message;
    throw err;
  }
  return 'accepted';
};

describe('cancel', () => {
  it('takes every job kind with its own fields', () => {
    expect(validateCall('cancel', { job: 'judge' })).toEqual({ job: 'judge' });
    expect(validateCall('cancel', { job: 'tokenView' })).toEqual({ job: 'tokenView' });
    expect(validateCall('cancel', { job: 'eval' })).toEqual({ job: 'eval' });
    expect(validateCall('cancel', { job: 'train', runId: 'run-1' })).toEqual({ job: 'train', runId: 'run-1' });
    expect(CANCEL_JOBS).toEqual(['judge', 'tokenView', 'train', 'eval']);
  });

  it('refuses a missing or unknown kind, a missing run, and a field the kind does not have', () => {
    expect(problem({})).toBe('invalid input: job is required');
    expect(problem(undefined)).toBe('invalid input: job is required');
    expect(problem({ job: 'chat' })).toBe('invalid input: job must be one of "judge", "tokenView", "train", "eval", got "chat"');
    expect(problem({ job: 'train' })).toBe('invalid input: runId is required');
    expect(problem({ job: 'train', runId: '' })).toBe('invalid input: runId must not be empty');
    expect(problem({ job: 'judge', runId: 'run-1' })).toBe('invalid input: runId is not a known field (expected job)');
    expect(problem([])).toBe('invalid input: input must be an object, got an array');
  });

  it('replaces the four one-off cancel calls', () => {
    expect(CALL_NAMES.filter((name) => /cancel/i.test(name))).toEqual(['cancel']);
  });
});

describe('events', () => {
  it('lists every event once, from the one declaration', () => {
    expect(new Set(EVENT_NAMES).size).toBe(EVENT_NAMES.length);
    expect(EVENT_NAMES).toContain('train.progress');
    expect(EVENT_NAMES.every(isEventName)).toBe(true);
    expect(isEventName('train.cancel')).toBe(false);
  });
});
