// Every operator image runs its bundle directory with the V8 flags the bundle's hashbang carries.
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
