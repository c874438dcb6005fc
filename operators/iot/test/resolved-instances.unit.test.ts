import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ResolvedInstances } from '../src/resolved-instances.ts';

const config = { operatorName: 'ls', defaultRegistry: 'registry.example.com/iot' };
const iot = (generation: number | undefined, spec: Record<string, unknown>, uid: string | undefined = 'uid-1') => ({
  metadata: { name: 'tenant-a', namespace: 'ls', uid, generation },
  spec: spec as never,
});

describe('ResolvedInstances', () => {
  it('resolves an IoTService once per uid and generation', () => {
    const resolved = new ResolvedInstances(config);
    const first = resolved.resolve('ls/tenant-a', iot(1, { version: '2.4.1' }));
    assert.ok(first.ok);
    assert.equal(first.instance.spec.version, '2.4.1');
    assert.equal(resolved.resolve('ls/tenant-a', iot(1, { version: '2.4.1' })), first, 'the same generation is not validated again');

    const next = resolved.resolve('ls/tenant-a', iot(2, { version: '2.5.0' }));
    assert.ok(next.ok);
    assert.equal(next.instance.spec.version, '2.5.0', 'a new generation is resolved from its spec');
    const recreated = resolved.resolve('ls/tenant-a', iot(2, { version: '2.6.0' }, 'uid-2'));
    assert.ok(recreated.ok);
    assert.equal(recreated.instance.spec.version, '2.6.0', 'an IoTService created again under the same name is resolved afresh');
  });

  it('keeps a refusal for its generation and resolves the corrected spec of the next', () => {
    const resolved = new ResolvedInstances(config);
    const refused = resolved.resolve('ls/tenant-a', iot(1, { version: '2.4.1', gateway: { replicas: -1 } }));
    assert.equal(refused.ok, false);
    assert.match(refused.ok ? '' : refused.failure.message, /spec\.gateway\.replicas/);
    assert.equal(resolved.resolve('ls/tenant-a', iot(1, { version: '2.4.1', gateway: { replicas: -1 } })), refused);
    assert.equal(resolved.resolve('ls/tenant-a', iot(2, { version: '2.4.1', gateway: { replicas: 1 } })).ok, true);
  });

  it('resolves afresh after forget, and every time when nothing identifies the spec', () => {
    const resolved = new ResolvedInstances(config);
    const first = resolved.resolve('ls/tenant-a', iot(1, { version: '2.4.1' }));
    resolved.forget('ls/tenant-a');
    assert.notEqual(resolved.resolve('ls/tenant-a', iot(1, { version: '2.4.1' })), first);

    const withoutGeneration = resolved.resolve('ls/tenant-b', iot(undefined, { version: '2.4.1' }));
    assert.ok(withoutGeneration.ok);
    const changed = resolved.resolve('ls/tenant-b', iot(undefined, { version: '2.5.0' }));
    assert.ok(changed.ok);
    assert.equal(changed.instance.spec.version, '2.5.0');
  });
});
