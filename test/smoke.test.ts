import { describe, expect, it } from 'vitest';
import { main } from '../src-main/cli.js';

describe('cli', () => {
  it('exits 2 with usage on an unknown command', async () => {
    expect(await main(['no-such-command'])).toBe(2);
  });
});
