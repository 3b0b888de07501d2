// Every `--help` goes to stdout, exits 0, and describes every flag the command's parser
// accepts, with its default. The flags come from each command's own declaration (its
// `spec`, the object its parser reads), so a flag added to a parser is checked here too.
import { describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.js';
import { COMMANDS } from '../../src-main/cli.js';
import { allOptions, type OptionSpec } from '../../src-main/cli/args.js';

/** The help text of one flag: its line and the lines continuing it, up to the next flag or heading. */
function entryOf(help: string, name: string, option: OptionSpec): string | null {
  const lines = help.split('\n');
  const flag = option.short ? `  -${option.short}, --${name}` : `  --${name}`;
  const start = lines.findIndex((l) => l === flag || l.startsWith(`${flag} `));
  if (start < 0) return null;
  let end = start + 1;
  while (end < lines.length && /^ {3,}\S/.test(lines[end]!) && !/^ {2}-/.test(lines[end]!)) end++;
  return lines.slice(start, end).map((l) => l.trim()).join(' ');
}

describe('hindsight --help', () => {
  it('prints the commands to stdout and exits 0; no command at all is bad usage on stderr', async () => {
    for (const argv of [['--help'], ['-h'], ['help']]) {
      const r = await cli(...argv);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe('');
      for (const name of Object.keys(COMMANDS)) expect(r.stdout).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
    }
    const bare = await cli();
    expect(bare.code).toBe(2);
    expect(bare.stdout).toBe('');
    expect(bare.stderr).toContain('usage: hindsight <command>');
  });

  it('`hindsight help train` is `hindsight train --help`', async () => {
    const a = await cli('help', 'train');
    expect(a.code).toBe(0);
    expect(a.stdout).toBe((await cli('train', '--help')).stdout);
  });
});

describe.each(Object.keys(COMMANDS))('hindsight %s --help', (name) => {
  it('goes to stdout, exits 0, and describes every flag the parser accepts with its default', async () => {
    const r = await cli(name, '--help');
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout.startsWith(`usage: hindsight ${name} `)).toBe(true);
    expect((await cli(name, '-h')).stdout).toBe(r.stdout);

    const { spec } = await COMMANDS[name]!.load();
    expect(spec.name).toBe(name);
    const options = Object.entries<OptionSpec>(allOptions(spec));
    expect(options.length).toBeGreaterThan(1);
    for (const [flag, option] of options) {
      const entry = entryOf(r.stdout, flag, option);
      expect(entry, `--${flag} is missing from ${name}'s help`).not.toBeNull();
      expect(entry!.length, `--${flag} has no description`).toBeGreaterThan(`--${flag}`.length + 10);
      if (option.type === 'boolean') continue; // a switch: off unless given
      if (option.required) expect(entry).toMatch(/\(required\b/);
      else if (option.default !== undefined) expect(entry).toContain(`(default: ${option.default})`);
      else expect(entry, `--${flag} says nothing of what happens without it`).toMatch(/\(default: .+\)/);
    }
  });
});
