/**
 * Unit tests of the pure /proc parsers (bench/lib/proc.ts) and readiness rules
 * (bench/lib/readiness.ts): memory fields in bytes, CPU ticks, the parent and the name from a
 * stat line whose process name holds spaces and parentheses, host busy time, and the
 * rollout/readiness rules the floor waits on.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseHostCpu, parseProcStatParent, parseProcStatTicks, parseProcStatus } from './lib/proc.ts';
import { iotAvailable, podReady, workloadReady } from './lib/readiness.ts';

describe('/proc parsers', () => {
  it('reads VmRSS and VmHWM in bytes', () => {
    const text = 'Name:\tnode\nVmPeak:\t 1000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t11\n';
    assert.deepEqual(parseProcStatus(text), { rssBytes: 102400 * 1024, hwmBytes: 204800 * 1024 });
  });

  it('adds utime and stime, whatever the process name contains', () => {
    const stat = '4242 (node (x) y) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 11 0 100 1000000 25000';
    assert.equal(parseProcStatTicks(stat), 300);
  });

  it('reads the parent pid and the name, whatever the name contains', () => {
    const stat = '4242 (nats (x) y) S 17 4242 4242 0 -1 4194560 5000 0 0 0 250 50 0 0 20 0 11 0 100 1000000 25000';
    assert.deepEqual(parseProcStatParent(stat), { ppid: 17, name: 'nats (x) y' });
  });

  it('counts host busy time as everything but idle and iowait', () => {
    const stat = 'cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n';
    assert.deepEqual(parseHostCpu(stat), { busy: 160, total: 1000 });
  });
});

describe('readiness rules', () => {
  const deployment = (status: Record<string, unknown>, replicas = 2, generation = 1) => ({ kind: 'Deployment', metadata: { generation }, spec: { replicas }, status });

  it('a Deployment is ready when rolled out, available and ready', () => {
    assert.ok(workloadReady(deployment({ observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 })));
    assert.ok(!workloadReady(deployment({ observedGeneration: 0, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 })), 'generation not observed');
    assert.ok(!workloadReady(deployment({ observedGeneration: 1, replicas: 3, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 })), 'old replica left');
    assert.ok(!workloadReady(deployment({ observedGeneration: 1, replicas: 2, updatedReplicas: 2, readyReplicas: 1, availableReplicas: 1 })), 'one not ready');
  });

  it('a StatefulSet is ready with exactly its replicas, all updated and ready, on one revision', () => {
    const sts = (status: Record<string, unknown>) => ({ kind: 'StatefulSet', metadata: { generation: 2 }, spec: { replicas: 1 }, status });
    assert.ok(workloadReady(sts({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1, currentRevision: 'a', updateRevision: 'a' })));
    assert.ok(!workloadReady(sts({ observedGeneration: 2, replicas: 1, updatedReplicas: 1, readyReplicas: 1, currentRevision: 'a', updateRevision: 'b' })));
    assert.ok(!workloadReady(sts({ observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1 })));
  });

  it('a pod is ready by its Ready condition unless it is being deleted', () => {
    assert.ok(podReady({ status: { conditions: [{ type: 'Ready', status: 'True' }] } }));
    assert.ok(!podReady({ status: { conditions: [{ type: 'Ready', status: 'False' }] } }));
    assert.ok(!podReady({ metadata: { deletionTimestamp: 'now' }, status: { conditions: [{ type: 'Ready', status: 'True' }] } }));
  });

  it('an IoTService is Available only for its current (and the awaited) generation', () => {
    const iot = (phase: string, observedGeneration: number, generation = 2) => ({ metadata: { generation }, status: { phase, observedGeneration } });
    assert.ok(iotAvailable(iot('Available', 2)));
    assert.ok(!iotAvailable(iot('Available', 1)), 'status describes an older spec');
    assert.ok(!iotAvailable(iot('Processing', 2)));
    assert.ok(!iotAvailable(iot('Available', 2), 3), 'waiting for a newer generation');
  });
});
