#!/usr/bin/env node
// The `svc` command. This file is tracked (not built) and executable, so npm links it on every
// install path, before `prepare` has built dist/; it only hands over to the built CLI.
import { existsSync } from 'node:fs';

const built = new URL('../dist/bin.js', import.meta.url);
if (!existsSync(built)) {
  process.stderr.write('svc: the CLI is not built yet; run `npm ci` (or `npm run build`) in the svc repository first\n');
  process.exit(1);
}
await import(built.href);
