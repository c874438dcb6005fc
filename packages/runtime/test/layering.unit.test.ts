import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

// The runtime's floors, bottom first: a module imports from its own folder and from floors below
// it only, so the runtime reads bottom-up (as controller-runtime's packages do).
const floors = ['errors', 'metrics', 'client', 'watch', 'cache', 'queue', 'events', 'apply', 'crd', 'status', 'sharding', 'controller', 'webhook', 'manager', 'testing'];

const src = path.join(path.dirname(fileURLToPath(import.meta.url)), '../src');

describe('the runtime’s layering', () => {
  it('every import of another folder goes down a floor', () => {
    const folders = readdirSync(src, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    assert.deepEqual(folders.filter((f) => !floors.includes(f)), [], 'every folder of src/ has its floor here');
    const upward: string[] = [];
    for (const folder of folders) {
      for (const file of readdirSync(path.join(src, folder), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))) {
        const text = readFileSync(path.join(src, folder, file), 'utf8');
        for (const [, target] of text.matchAll(/from '\.\.\/([a-z-]+)\//g)) {
          if (floors.indexOf(target!) >= floors.indexOf(folder)) upward.push(`${folder}/${file} imports ${target}/`);
        }
      }
    }
    assert.deepEqual(upward, []);
  });
});
