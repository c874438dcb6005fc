// Every operator image, and every operator's package bin, runs with the V8 flags the bundle's hashbang carries.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { OPERATOR_NODE_FLAGS, OPERATORS } from './bundle.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

describe('operator images', () => {
  for (const name of OPERATORS) {
    it(`${name}: copies the whole bundle directory and starts it with the operator's V8 flags`, () => {
      const dockerfile = readFileSync(path.join(root, 'operators', name, 'Dockerfile'), 'utf8');
      assert.match(dockerfile, new RegExp(`^COPY --from=build /src/operators/${name}/dist/ \\./$`, 'm'), 'the chunks beside the entry file are copied too');
      const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(dockerfile);
      assert.ok(entrypoint, 'an exec-form ENTRYPOINT');
      assert.deepEqual(JSON.parse(entrypoint[1]!), ['node', ...OPERATOR_NODE_FLAGS, `${name}-operator.mjs`]);
    });
  }
});

describe('operator commands', () => {
  for (const name of OPERATORS) {
    it(`${name}: the package bin's hashbang passes the operator's V8 flags`, () => {
      const manifest = JSON.parse(readFileSync(path.join(root, 'operators', name, 'package.json'), 'utf8')) as { bin: Record<string, string> };
      const bin = manifest.bin[`${name}-operator`];
      assert.ok(bin, `package.json names a ${name}-operator bin`);
      const hashbang = readFileSync(path.join(root, 'operators', name, bin), 'utf8').split('\n')[0]!;
      assert.match(hashbang, /^#!\/usr\/bin\/env -S node /);
      for (const flag of OPERATOR_NODE_FLAGS) assert.ok(hashbang.split(' ').includes(flag), `${hashbang} lacks ${flag}`);
    });
  }
});
