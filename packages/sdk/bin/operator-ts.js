#!/usr/bin/env node
// The operator-ts command. In this repository it runs the TypeScript sources through tsx; the
// published package carries no sources and runs the compiled dist/cli.js.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import('../dist/cli.js');
}
