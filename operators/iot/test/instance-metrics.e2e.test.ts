/**
 * The IoT operator's instance metrics on the real local cluster, as a scraper reads /metrics: an
 * IoTService's series appear with its phase, follow it from Failed to Available and through a
 * spec change (pod figures and time to Available included), and vanish when it is deleted; a
 * replica waiting for the lease serves none of them, so two replicas never report one object twice.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Manager } from '@iot-operator/runtime';
import { waitFor, type TestEnv } from '@iot-operator/runtime/testing';
import { createLandscape, createPullSecret, deleteAllInstances, getIoT, iotService, iotTestEnv, startOperator, waitForPhase } from './e2e-support.ts';
import { IoTServiceV1alpha1Type } from '../src/iotservice-types.ts';

let env: TestEnv;
let landscape: string;
let leader: Manager;
let standby: Manager;

before(async () => {
  env = await iotTestEnv();
  landscape = await createLandscape(env, false);
  leader = await startOperator(env, landscape, { leaderElect: true });
  await waitFor('the first replica to lead', async () => ({ done: leader.isLeader, value: undefined }));
  standby = await startOperator(env, landscape, { leaderElect: true });
});

after(async () => {
  if (leader) await deleteAllInstances(env, landscape).catch(() => undefined);
  await standby?.stop();
  await leader?.stop();
  await env?.cleanup();
});

/** The samples of /metrics whose name starts with `prefix`, as `name{labels}` → value. */
async function scrape(mgr: Manager, prefix = 'iotservice_'): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${mgr.httpPort}/metrics`)).text();
  return new Map(
    text
      .split('\n')
      .filter((line) => line.startsWith(prefix))
      .map((line) => {
        const at = line.lastIndexOf(' ');
        return [line.slice(0, at), Number(line.slice(at + 1))];
      }),
  );
}

const of = (name: string) => `namespace="${landscape}",name="${name}"`;
const phases = (name: string, current: string) =>
  Object.fromEntries(['Available', 'Failed', 'Processing'].map((p) => [`iotservice_status_phase{${of(name)},phase="${p}"}`, p === current ? 1 : 0]));

/** Waits until /metrics shows `expected` (a subset of its samples); returns every iotservice_ sample. */
async function scrapeUntil(what: string, expected: Record<string, number>): Promise<Map<string, number>> {
  return waitFor(what, async () => {
    const samples = await scrape(leader);
    const differing = Object.entries(expected).filter(([series, value]) => samples.get(series) !== value);
    return { done: differing.length === 0, value: samples, seen: Object.fromEntries(differing.map(([series]) => [series, samples.get(series) ?? 'absent'])) };
  });
}

describe('instance metrics on the real cluster', () => {
  it('show an IoTService in its phase, follow it to Available and through a spec change, and drop it when deleted', async () => {
    const name = 'tenant-m';
    await env.client.create(IoTServiceV1alpha1Type, iotService(name, landscape));
    const failed = await waitForPhase(env, landscape, name, 'Failed');
    const failedAt = Date.parse(failed.status!.conditions!.find((c) => c.type === 'Degraded')!.lastTransitionTime) / 1000;
    await scrapeUntil('the Failed phase on /metrics', { ...phases(name, 'Failed'), [`iotservice_status_phase_transition_timestamp_seconds{${of(name)}}`]: failedAt });

    await createPullSecret(env, landscape);
    const available = await waitForPhase(env, landscape, name, 'Available');
    const availableAt = Date.parse(available.status!.conditions!.find((c) => c.type === 'Ready')!.lastTransitionTime) / 1000;
    let samples = await scrapeUntil('the Available phase on /metrics', {
      ...phases(name, 'Available'),
      [`iotservice_status_pods_ready{${of(name)}}`]: 7,
      [`iotservice_status_pods_desired{${of(name)}}`]: 7,
      [`iotservice_status_phase_transition_timestamp_seconds{${of(name)}}`]: availableAt,
      iotservice_time_to_available_seconds_count: 1,
    });
    // Conditions carry whole seconds: on kwok's nodes Failed → Available can fall within one second.
    assert.ok(availableAt >= failedAt, 'the transition time moved with the phase');
    const sinceCreation = (Date.parse(available.status!.conditions!.find((c) => c.type === 'Ready')!.lastTransitionTime) - Date.parse(String(available.metadata.creationTimestamp))) / 1000;
    assert.ok(Math.abs(samples.get('iotservice_time_to_available_seconds_sum')! - sinceCreation) < 2, `time to Available counts from creation (${sinceCreation} s): ${samples.get('iotservice_time_to_available_seconds_sum')}`);

    await env.client.patch(IoTServiceV1alpha1Type, name, landscape, { spec: { gateway: { replicas: 3 } } }, 'merge');
    await waitFor('the spec change to be Available', async () => {
      const iot = await getIoT(env, landscape, name);
      return { done: iot?.metadata.generation === 2 && iot.status?.observedGeneration === 2 && iot.status.phase === 'Available', value: undefined, seen: iot?.status };
    }, { timeoutMs: 90_000 });
    samples = await scrapeUntil('the new pod count on /metrics', {
      ...phases(name, 'Available'),
      [`iotservice_status_pods_ready{${of(name)}}`]: 8,
      [`iotservice_status_pods_desired{${of(name)}}`]: 8,
      iotservice_time_to_available_seconds_count: 2,
    });
    assert.deepEqual([...samples.keys()].filter((series) => series.includes('name=') && !series.includes(`name="${name}"`)), [], 'labelled by namespace and name only');

    await env.client.delete(IoTServiceV1alpha1Type, name, landscape);
    await waitFor('the IoTService to be gone', async () => ({ done: (await getIoT(env, landscape, name)) === undefined, value: undefined }), { timeoutMs: 120_000 });
    samples = await waitFor('its series to vanish from /metrics', async () => {
      const now = await scrape(leader);
      return { done: ![...now.keys()].some((series) => series.includes(`name="${name}"`)), value: now, seen: [...now.keys()] };
    });
    assert.equal(samples.get('iotservice_time_to_available_seconds_count'), 2, 'the histogram keeps what it counted');
  });

  it('a replica waiting for the lease serves no instance series, so an IoTService is reported once', async () => {
    await env.client.create(IoTServiceV1alpha1Type, iotService('tenant-n', landscape));
    await waitForPhase(env, landscape, 'tenant-n', 'Available');
    await scrapeUntil('tenant-n on the leader', phases('tenant-n', 'Available'));
    assert.equal(standby.isLeader, false);
    const standbySeries = [...(await scrape(standby, 'iotservice_status_')).keys()];
    assert.deepEqual(standbySeries, []);
    assert.ok((await scrape(standby, 'leader_election_master_status')).size > 0, "the standby's /metrics answers");
  });
});
