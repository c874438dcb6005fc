import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../src/client/errors.ts';
import { LeaderElector, leaderElectionDefaults, type ElectionClock, type LeaseAccess, type LeaseObject } from '../src/manager/leader-election.ts';

/** One Lease in memory, with resourceVersion conflicts like the API server's. */
class LeaseStore {
  lease: LeaseObject | undefined;
  rv = 0;
  failing = false;
  access(): LeaseAccess {
    return {
      get: async () => {
        if (this.failing) throw new ApiError(0, 'ServiceUnavailable', 'connection refused');
        return this.lease && structuredClone(this.lease);
      },
      create: async (lease) => {
        if (this.failing) throw new ApiError(0, 'ServiceUnavailable', 'connection refused');
        if (this.lease) throw new ApiError(409, 'AlreadyExists', 'exists');
        this.lease = { ...structuredClone(lease), metadata: { ...lease.metadata, resourceVersion: String(++this.rv) } };
        return structuredClone(this.lease);
      },
      replace: async (lease) => {
        if (this.failing) throw new ApiError(0, 'ServiceUnavailable', 'connection refused');
        if (lease.metadata.resourceVersion !== this.lease?.metadata.resourceVersion) throw new ApiError(409, 'Conflict', 'conflict');
        this.lease = { ...structuredClone(lease), metadata: { ...lease.metadata, resourceVersion: String(++this.rv) } };
        return structuredClone(this.lease);
      },
    };
  }
}

class FakeClock implements ElectionClock {
  time = 1_000_000;
  now = () => this.time;
  sleep = async (ms: number) => {
    this.time += ms;
    await new Promise((r) => setImmediate(r));
  };
}

const config = (identity: string) => ({ namespace: 'ns', name: 'lease', identity, ...leaderElectionDefaults });

describe('leader election', () => {
  it('a second candidate cannot take a held, renewed lease', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const a = new LeaderElector(config('a'), store.access(), clock);
    const b = new LeaderElector(config('b'), store.access(), clock);
    assert.equal(await a.tryAcquireOrRenew(), true);
    for (let i = 0; i < 20; i++) {
      clock.time += 2_000;
      assert.equal(await a.tryAcquireOrRenew(), true);
      assert.equal(await b.tryAcquireOrRenew(), false, `b must not take the lease at step ${i}`);
    }
    assert.equal(store.lease?.spec?.holderIdentity, 'a');
  });

  it('takes over only after a full lease duration without renewal, counted on its own clock', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const a = new LeaderElector(config('a'), store.access(), clock);
    const b = new LeaderElector(config('b'), store.access(), clock);
    await a.tryAcquireOrRenew();
    assert.equal(await b.tryAcquireOrRenew(), false);
    clock.time += 14_000;
    assert.equal(await b.tryAcquireOrRenew(), false, 'not expired after 14 s');
    clock.time += 1_000;
    assert.equal(await b.tryAcquireOrRenew(), true, 'expired after 15 s');
    assert.equal(store.lease?.spec?.holderIdentity, 'b');
    assert.equal(store.lease?.spec?.leaseTransitions, 1);
  });

  it('a leader that cannot renew within the renew deadline stops leading', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const a = new LeaderElector(config('a'), store.access(), clock);
    const events: string[] = [];
    const stop = new AbortController();
    const started = clock.now();
    let stoppedAt = 0;
    const run = a.run(stop.signal, {
      onStartedLeading: () => {
        events.push('started');
        store.failing = true;
      },
      onStoppedLeading: () => {
        events.push('stopped');
        stoppedAt = clock.now();
      },
    });
    await run;
    assert.deepEqual(events, ['started', 'stopped']);
    assert.ok(stoppedAt - started >= 10_000 && stoppedAt - started <= 12_000, `stopped after ${stoppedAt - started} ms; expected the 10 s renew deadline`);
    assert.equal(a.isLeader, false);
  });

  it('release lets a successor take the lease at once', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const a = new LeaderElector(config('a'), store.access(), clock);
    const b = new LeaderElector(config('b'), store.access(), clock);
    const stop = new AbortController();
    const run = a.run(stop.signal, { onStartedLeading: () => stop.abort(), onStoppedLeading: () => {} });
    await run;
    assert.equal(a.isLeader, true);
    await a.release();
    assert.equal(store.lease?.spec?.holderIdentity, null);
    assert.equal(await b.tryAcquireOrRenew(), true);
  });

  it('two candidates racing for a free lease: exactly one wins', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const results = await Promise.all(['a', 'b', 'c'].map((id) => new LeaderElector(config(id), store.access(), clock).tryAcquireOrRenew()));
    assert.equal(results.filter(Boolean).length, 1);
  });
});
