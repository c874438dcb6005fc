/**
 * The watcher: an explicit list+watch state machine for one resource selection.
 *
 * States (kept in `Watcher.state`):
 * - `Empty`: nothing known; the next step lists from the first page (or, after a continue token
 *   expired, lists everything in one request).
 * - `InitPage`: a paginated list is under way (500 objects per page, continue token kept), or
 *   an unpaginated one (`full`).
 * - `InitListed`: the list is complete; the next step opens a watch from the list's resourceVersion.
 * - `Watching`: a watch stream is open; every event advances the resourceVersion.
 * - `Unserved` (an `optional` resource only): the API server answered the list with 404, it does
 *   not serve the resource (a CRD not installed); the next step waits `unservedRelistMs`, then
 *   lists again.
 *
 * Events (what it emits to its sink):
 * - `Init`: a (re)list starts; the sink prepares a fresh buffer.
 * - `InitApply`: one object of the list.
 * - `InitDone`: the list is complete; the sink swaps in the buffer atomically and emits deletes
 *   for objects that vanished meanwhile.
 * - `Apply`: an object was added or modified while watching.
 * - `Delete`: an object was deleted while watching.
 *
 * Guarantees (runtime guarantee 1):
 * - The resourceVersion is opaque: it is stored and sent back, never parsed or compared.
 * - Watches ask for bookmarks; a bookmark advances the resourceVersion and emits nothing.
 * - Each watch asks the server to end it after a random 5–10 minutes (client-go's default), so
 *   connections are refreshed; a watch that ends normally is resumed at once from the last
 *   resourceVersion.
 * - 410 Gone (on connect or as an ERROR event) leads to a relist. A 410 on a list's continue
 *   token (the token expired while paging) falls back to one full, unpaginated list, as
 *   client-go's pager does, so a large list that outlives its token still completes.
 * - A watch that ends within `minWatchDurationMs` (1 s) having delivered no event is an error
 *   (`ShortWatchError`), retried with backoff: a server or proxy that closes every watch at
 *   once cannot make the watcher spin.
 * - A watch that delivers nothing — no answer to the watch request, no event, no bookmark —
 *   for `watchIdleTimeoutMs` is closed
 *   and reported (`WatchStalledError`), then resumed from the last resourceVersion with backoff.
 *   The default, 120 s, is twice the API server's bookmark interval (it sends a bookmark at
 *   least every minute to a watch that asked for them), so a healthy quiet watch never trips it.
 * - A dropped connection, a refused request or a malformed event is reported to `onError` and
 *   retried from the last resourceVersion after a backoff of 800 ms doubling to 30 s with jitter
 *   (client-go's reflector defaults); the backoff resets after 2 minutes without failure.
 * - An `optional` resource the API server does not serve (404 on the first page of a list) is
 *   an empty, complete list (`InitDone`: the informer is synced, and what it held is deleted),
 *   not an error; `served` is false until a list succeeds. A 404 while watching one (its CRD
 *   deleted) relists at once. For any other resource a 404 is an error like the others.
 * - Nothing is emitted after `signal` aborts; `run` then resolves at once, even while a list
 *   request is still unanswered.
 */
import { isApiError } from '../client/errors.ts';
import type { KubeObject } from '../client/resource.ts';
import type { ListWatchSource } from './source.ts';

export type WatcherState =
  | { name: 'Empty'; full?: boolean }
  | { name: 'InitPage'; continue?: string; full?: boolean }
  | { name: 'InitListed'; resourceVersion: string }
  | { name: 'Watching'; resourceVersion: string }
  | { name: 'Unserved' };

export type WatcherEvent<T extends KubeObject> =
  | { type: 'Init' }
  | { type: 'InitApply'; object: T }
  | { type: 'InitDone' }
  | { type: 'Apply'; object: T }
  | { type: 'Delete'; object: T };

export interface WatcherClock {
  now(): number;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  random(): number;
}

export interface WatcherConfig {
  /** Objects per list page. Default 500, as client-go. */
  pageSize: number;
  /** Reconnect backoff, client-go reflector defaults: 800 ms initial, 30 s max, factor 2, jitter 1.0. */
  initialBackoffMs: number;
  maxBackoffMs: number;
  /** A run this long without failure resets the backoff (client-go: 2 minutes). */
  backoffResetMs: number;
  /** Server-side watch timeout is chosen uniformly in [min, 2×min] seconds (client-go: 5–10 minutes). */
  minWatchTimeoutSeconds: number;
  /** A watch ending sooner than this without any event is an error (client-go: 1 s). */
  minWatchDurationMs: number;
  /** A watch that delivers no event and no bookmark for this long is restarted (2× the 1-minute bookmark interval). */
  watchIdleTimeoutMs: number;
  /** The resource may not be served (its CRD not installed): a 404 on its list is an empty list. Default false. */
  optional: boolean;
  /** How long an optional resource the API server does not serve waits before it is listed again. */
  unservedRelistMs: number;
}

/** A watch closed by the server (or something between) almost at once, without a single event. */
export class ShortWatchError extends Error {
  override readonly name = 'ShortWatchError';
}

/** A watch stream that stopped delivering anything, bookmarks included. */
export class WatchStalledError extends Error {
  override readonly name = 'WatchStalledError';
}

export const defaultWatcherConfig: WatcherConfig = {
  pageSize: 500,
  initialBackoffMs: 800,
  maxBackoffMs: 30_000,
  backoffResetMs: 120_000,
  minWatchTimeoutSeconds: 300,
  minWatchDurationMs: 1_000,
  watchIdleTimeoutMs: 120_000,
  optional: false,
  unservedRelistMs: 30_000,
};

export const realClock: WatcherClock = {
  now: () => Date.now(),
  random: () => Math.random(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done, { once: true });
    }),
};

export class Watcher<T extends KubeObject> {
  state: WatcherState = { name: 'Empty' };
  private failures = 0;
  private isServed = true;
  private healthySince: number;
  private readonly config: WatcherConfig;

  constructor(
    private readonly source: ListWatchSource<T>,
    private readonly sink: (event: WatcherEvent<T>) => void,
    private readonly onError: (err: unknown, state: WatcherState) => void = () => {},
    config: Partial<WatcherConfig> = {},
    private readonly clock: WatcherClock = realClock,
  ) {
    this.config = { ...defaultWatcherConfig, ...config };
    this.healthySince = clock.now();
  }

  get description(): string {
    return this.source.description;
  }

  /** False while an optional resource is not served by the API server: its last list was a 404. */
  get served(): boolean {
    return this.isServed;
  }

  /** Runs the state machine until the signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.step(signal);
      } catch (err) {
        if (signal.aborted) return;
        await this.fail(err, signal);
      }
    }
  }

  /** Performs one transition of the state machine. Exposed for tests. */
  async step(signal: AbortSignal): Promise<void> {
    const state = this.state;
    switch (state.name) {
      case 'Empty':
        this.sink({ type: 'Init' });
        this.state = { name: 'InitPage', full: state.full };
        return;
      case 'InitPage': {
        // A list that hangs must not hold up a shutdown: stop waiting for it when the signal aborts.
        const listed = untilAborted(this.source.list({ limit: state.full ? 0 : this.config.pageSize, continue: state.continue }), signal);
        const page = await listed.catch((err: unknown) => {
          if (this.config.optional && isApiError(err, 'NotFound') && state.continue === undefined) return 'unserved' as const;
          throw err;
        });
        if (page === 'aborted' || signal.aborted) return;
        if (page === 'unserved') {
          // Not served (its CRD is not installed): nothing to hold, and nothing wrong.
          this.isServed = false;
          this.sink({ type: 'InitDone' });
          this.state = { name: 'Unserved' };
          return;
        }
        this.isServed = true;
        for (const object of page.items) this.sink({ type: 'InitApply', object });
        if (page.continue) {
          this.state = { name: 'InitPage', continue: page.continue };
        } else {
          this.sink({ type: 'InitDone' });
          this.state = { name: 'InitListed', resourceVersion: page.resourceVersion };
        }
        return;
      }
      case 'InitListed':
      case 'Watching':
        await this.watchFrom(state.resourceVersion, signal);
        return;
      case 'Unserved':
        await this.clock.sleep(this.config.unservedRelistMs, signal);
        this.state = { name: 'Empty' };
        return;
    }
  }

  private async watchFrom(resourceVersion: string, signal: AbortSignal): Promise<void> {
    const timeoutSeconds = Math.floor(this.config.minWatchTimeoutSeconds * (1 + this.clock.random()));
    const stop = new AbortController();
    const forward = () => stop.abort();
    signal.addEventListener('abort', forward, { once: true });
    const started = this.clock.now();
    let received = 0;
    try {
      const stalled = () => new WatchStalledError(`watch of ${this.description} delivered nothing (no event, no bookmark) for ${this.config.watchIdleTimeoutMs} ms; restarting it`);
      const opened = await this.orIdle(this.source.watch({ resourceVersion, timeoutSeconds, signal: stop.signal }));
      if (opened === 'idle') throw stalled();
      const events = opened[Symbol.asyncIterator]();
      this.state = { name: 'Watching', resourceVersion };
      for (;;) {
        const next = await this.orIdle(events.next());
        if (signal.aborted) return;
        if (next === 'idle') throw stalled();
        if (next.done) break;
        received++;
        const event = next.value;
        const rv = event.object.metadata.resourceVersion;
        if (rv) this.state = { name: 'Watching', resourceVersion: rv };
        if (event.type === 'ADDED' || event.type === 'MODIFIED') this.sink({ type: 'Apply', object: event.object });
        else if (event.type === 'DELETED') this.sink({ type: 'Delete', object: event.object });
      }
      const lastedMs = this.clock.now() - started;
      if (received === 0 && lastedMs < this.config.minWatchDurationMs) {
        throw new ShortWatchError(`very short watch of ${this.description}: closed after ${lastedMs} ms without any event`);
      }
    } finally {
      signal.removeEventListener('abort', forward);
      stop.abort();
    }
  }

  /** `pending`'s outcome, or 'idle' when it takes longer than the idle timeout. */
  private orIdle<R>(pending: Promise<R>): Promise<R | 'idle'> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve('idle'), this.config.watchIdleTimeoutMs);
      pending.then(
        (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  private async fail(err: unknown, signal: AbortSignal): Promise<void> {
    if (this.config.optional && isApiError(err, 'NotFound')) {
      // An optional resource gone while watched (its CRD deleted): the relist finds out.
      this.state = { name: 'Empty' };
      return;
    }
    this.onError(err, this.state);
    const gone = isApiError(err, 'Gone') || isApiError(err, 'Expired');
    if (gone && this.state.name === 'InitPage' && this.state.continue !== undefined) {
      // The continue token expired while paging: list everything in one request instead.
      this.state = { name: 'Empty', full: true };
      return;
    }
    if (gone) {
      // The resourceVersion (or continue token) is too old: start over with a fresh list.
      this.state = { name: 'Empty' };
      this.failures = 0;
      return;
    }
    if (this.clock.now() - this.healthySince >= this.config.backoffResetMs) this.failures = 0;
    const base = Math.min(this.config.initialBackoffMs * 2 ** this.failures, this.config.maxBackoffMs);
    this.failures++;
    const delay = Math.min(base * (1 + this.clock.random()), this.config.maxBackoffMs);
    await this.clock.sleep(delay, signal);
    this.healthySince = this.clock.now();
  }
}

/** `pending`'s outcome, or 'aborted' as soon as `signal` aborts (the request is left to finish or fail alone). */
function untilAborted<R>(pending: Promise<R>, signal: AbortSignal): Promise<R | 'aborted'> {
  if (signal.aborted) {
    pending.catch(() => undefined); // left to fail alone: not an unhandled rejection
    return Promise.resolve('aborted');
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => resolve('aborted');
    signal.addEventListener('abort', onAbort, { once: true });
    pending.then(
      (result) => {
        signal.removeEventListener('abort', onAbort);
        resolve(result);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}
