#!/usr/bin/env -S node --max-semi-space-size=2 --heap-growing-percent=20 --no-opt --single-threaded
// Entry point of the iot-operator command: loads the TypeScript sources through tsx.
import { register } from 'tsx/esm/api';
register();
await import('../src/main.ts');
