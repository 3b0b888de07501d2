// The documented Node version is one every installed dependency accepts: `npm ci` on it prints
// no EBADENGINE warning. Read from the lockfile, so it checks what `npm ci` really installs.
import fs from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url);
const readJson = (name: string) => JSON.parse(fs.readFileSync(new URL(name, ROOT), 'utf8'));

interface LockedPackage {
  version?: string;
  optional?: boolean;
  engines?: { node?: string } | string[];
}

describe('the Node version the project documents', () => {
  const documented: string = readJson('package.json').engines.node;
  const minimum = semver.minVersion(documented)!.version;

  it('is the one the README names', () => {
    const readme = fs.readFileSync(new URL('README.md', ROOT), 'utf8');
    expect(readme).toContain(`Node ${minimum.replace(/\.0$/, '')} or newer`);
  });

  it('is accepted by every package npm ci installs', () => {
    const lock: { packages: Record<string, LockedPackage> } = readJson('package-lock.json');
    const refusing: string[] = [];
    for (const [where, pkg] of Object.entries(lock.packages)) {
      if (!where) continue; // the project itself
      const range = Array.isArray(pkg.engines) ? undefined : pkg.engines?.node;
      // npm skips an optional package whose engines refuse the running Node, without a
      // warning (rollup lists a native helper that way); a required one gets EBADENGINE.
      if (!range || pkg.optional) continue;
      if (!semver.satisfies(minimum, range)) refusing.push(`${where}@${pkg.version} wants node ${range}`);
    }
    expect(refusing).toEqual([]);
  });
});
