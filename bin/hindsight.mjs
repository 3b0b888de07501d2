#!/usr/bin/env node
// The `hindsight` command. It runs the TypeScript sources through tsx (a runtime
// dependency), so the CLI works from a plain `npm ci` checkout with no build step.
import { register } from 'tsx/esm/api';
import { fileURLToPath } from 'node:url';

register();
const cli = fileURLToPath(new URL('../src-main/cli.ts', import.meta.url));
const { main } = await import(cli);
process.exitCode = await main(process.argv.slice(2));
