import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../src/client/errors.ts';
import { LeaderElector, leaderElectionDefaults, maxTolerableExpiredLeaseMs, type ElectionClock, type LeaseAccess, type LeaseObject } from '../src/manager/leader-election.ts';
import { realClock } from '../src/watch/watcher.ts';

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

  it('stopped while leading, it releases the lease after its renew loop has stopped and writes nothing after', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const b = new LeaderElector(config('b'), store.access(), clock);
    const stop = new AbortController();
    let leaseWrites = 0;
    const access = store.access();
    const counting: LeaseAccess = { ...access, replace: (lease, signal) => (leaseWrites++, access.replace(lease, signal)) };
    const leader = new LeaderElector(config('a'), counting, clock);
    await leader.run(stop.signal, { onStartedLeading: () => void setImmediate(() => stop.abort()), onStoppedLeading: () => {} }, { releaseOnCancel: true });
    assert.equal(store.lease?.spec?.holderIdentity, null, 'released');
    const writesAtRelease = leaseWrites;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(leaseWrites, writesAtRelease, 'no lease write after the release');
    assert.equal(leader.isLeader, false);
    assert.equal(await b.tryAcquireOrRenew(), true, 'a successor takes the released lease at once');
  });

  it('stopped while a renewal is in flight that the API server still applies, it releases the lease all the same', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const stop = new AbortController();
    const access = store.access();
    let leading = false;
    const stoppedMidRenewal: LeaseAccess = {
      ...access,
      // The shutdown signal arrives while the renewal's write is on its way; the server applies it.
      replace: async (lease, signal) => {
        if (leading && lease.spec?.holderIdentity === 'a') stop.abort();
        return access.replace(lease, signal);
      },
    };
    const leader = new LeaderElector(config('a'), stoppedMidRenewal, clock);
    await leader.run(stop.signal, { onStartedLeading: () => (leading = true), onStoppedLeading: () => {} }, { releaseOnCancel: true });
    assert.equal(store.lease?.spec?.holderIdentity, null, 'released although the renewal it cancelled moved the resourceVersion on');
    assert.equal(await new LeaderElector(config('b'), store.access(), clock).tryAcquireOrRenew(), true, 'a successor takes the lease at once');
  });

  it('a renewal that hangs is cancelled at the renew deadline and leadership ends there', async () => {
    const store = new LeaseStore();
    let hang = false;
    const cancelled: string[] = [];
    const hanging = (signal: AbortSignal) =>
      new Promise<never>((_, reject) => signal.addEventListener('abort', () => (cancelled.push('cancelled'), reject(new Error('aborted'))), { once: true }));
    const access = store.access();
    const hangable: LeaseAccess = {
      get: (signal) => (hang ? hanging(signal) : access.get(signal)),
      create: (lease, signal) => access.create(lease, signal),
      replace: (lease, signal) => (hang ? hanging(signal) : access.replace(lease, signal)),
    };
    const fast = { namespace: 'ns', name: 'lease', identity: 'a', leaseDurationMs: 3_000, renewDeadlineMs: 200, retryPeriodMs: 50 };
    const elector = new LeaderElector(fast, hangable, realClock);
    let hungAt = 0;
    let stoppedAt = 0;
    await elector.run(new AbortController().signal, {
      onStartedLeading: () => {
        hang = true;
        hungAt = Date.now();
      },
      onStoppedLeading: () => (stoppedAt = Date.now()),
    });
    assert.ok(stoppedAt > 0, 'leadership ended');
    assert.ok(stoppedAt - hungAt < fast.leaseDurationMs, `stopped ${stoppedAt - hungAt} ms after the API server hung; the lease lasts ${fast.leaseDurationMs} ms`);
    assert.deepEqual(cancelled, ['cancelled'], 'the hung request was cancelled');
    assert.equal(elector.isLeader, false);
  });

  it('the health check fails while a leader has not renewed for a lease duration + 20 s', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const stuck = { ...clock, sleep: () => new Promise<void>(() => {}) } as ElectionClock;
    const elector = new LeaderElector(config('a'), store.access(), { now: () => clock.time, sleep: stuck.sleep });
    void elector.run(new AbortController().signal, { onStartedLeading: () => {}, onStoppedLeading: () => {} });
    await new Promise((r) => setImmediate(r));
    assert.equal(elector.isLeader, true);
    assert.equal(elector.healthCheck(), undefined);
    clock.time += 15_000 + maxTolerableExpiredLeaseMs;
    assert.equal(elector.healthCheck(), undefined, 'healthy up to the tolerance');
    clock.time += 1_000;
    assert.match(elector.healthCheck() ?? '', /lease ns\/lease not renewed for 36 s/);
    assert.equal(new LeaderElector(config('b'), store.access(), clock).healthCheck(), undefined, 'a follower is always healthy');
  });

  it('two candidates racing for a free lease: exactly one wins', async () => {
    const store = new LeaseStore();
    const clock = new FakeClock();
    const results = await Promise.all(['a', 'b', 'c'].map((id) => new LeaderElector(config(id), store.access(), clock).tryAcquireOrRenew()));
    assert.equal(results.filter(Boolean).length, 1);
  });
});
