// The committed Dockerfiles are the ones scripts/dockerfiles.ts generates from its one template.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { dockerfile, dockerfilePath, OPERATOR_IMAGES } from '../dockerfiles.ts';

describe('operator Dockerfiles', () => {
  for (const operator of OPERATOR_IMAGES) {
    it(`${operator}: the committed Dockerfile is the generated one (npm run generate:dockerfiles)`, () => {
      assert.equal(readFileSync(dockerfilePath(operator), 'utf8'), dockerfile(operator));
    });
  }

  it('every FROM names a build argument with a public default, and the images differ only in what they carry', () => {
    for (const operator of OPERATOR_IMAGES) {
      const text = dockerfile(operator);
      for (const from of text.matchAll(/^FROM (\S+)/gm)) assert.match(from[1]!, /^\$\{[A-Z_]+\}$/, `${operator}: FROM ${from[1]}`);
      for (const arg of text.matchAll(/^ARG ([A-Z_]+_IMAGE)=(\S+)$/gm)) assert.match(arg[2]!, /^(node|golang):/, `${operator}: ${arg[1]} defaults to a public image`);
      assert.match(text, /^USER 1000:1000$/m);
    }
    const withoutName = (operator: string) => dockerfile(operator as 'iot').replaceAll('@iot-operator/', '@SCOPE/').replaceAll(operator, 'OPERATOR');
    assert.equal(withoutName('memcached'), withoutName('iot'));
    assert.equal(withoutName('ptemplate'), withoutName('iot'));
    assert.match(dockerfile('armada'), /^COPY --from=helm \/out\/helm \/usr\/local\/bin\/helm$/m);
  });

  it('images/bases.sh provides exactly the base image arguments the Dockerfiles declare', () => {
    const bases = readFileSync(path.join(path.dirname(dockerfilePath('iot')), '../../images/bases.sh'), 'utf8');
    const line = /^build_args\(\) \{\n\s*echo "([^"]+)"/m.exec(bases);
    assert.ok(line, 'bases.sh prints its build arguments from build_args()');
    const provided = [...line[1]!.matchAll(/--build-arg ([A-Z_]+)=\$([A-Z_]+)/g)].map((m) => m[1]!);
    const declared = new Set(OPERATOR_IMAGES.flatMap((operator) => [...dockerfile(operator).matchAll(/^ARG ([A-Z_]+_IMAGE)=/gm)].map((m) => m[1]!)));
    assert.deepEqual([...provided].sort(), [...declared].sort());
    for (const name of provided) assert.match(bases, new RegExp(`^${name}=localhost/iot-operator/\\S+$`, 'm'), `${name} names a local image`);
  });
});
