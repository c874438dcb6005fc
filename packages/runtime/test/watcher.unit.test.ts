import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError } from '../src/client/errors.ts';
import type { KubeObject } from '../src/client/resource.ts';
import { Informer } from '../src/cache/informer.ts';
import { MalformedWatchEventError, decodeEvents, type ListPage, type ListWatchSource, type WatchEvent } from '../src/watch/source.ts';
import type { WatcherClock, WatcherConfig } from '../src/watch/watcher.ts';

const obj = (name: string, rv: string, extra: Partial<KubeObject['metadata']> = {}): KubeObject => ({
  metadata: { name, namespace: 'ns', resourceVersion: rv, uid: `uid-${name}`, ...extra },
});

type WatchScript = Array<WatchEvent<KubeObject> | Error | string>;

/** A scripted list/watch source: lists and watches answer from queues, and every call is recorded. */
class ScriptedSource implements ListWatchSource<KubeObject> {
  readonly description = 'scripted';
  readonly lists: Array<{ continue?: string }> = [];
  readonly watches: string[] = [];
  constructor(
    private readonly listAnswers: Array<ListPage<KubeObject> | Error>,
    private readonly watchAnswers: Array<WatchScript | Error>,
    private readonly onExhausted: () => void,
  ) {}

  async list(options: { continue?: string }): Promise<ListPage<KubeObject>> {
    const answer = this.listAnswers.shift();
    if (!answer) throw this.exhausted();
    this.lists.push({ continue: options.continue });
    if (answer instanceof Error) throw answer;
    return answer;
  }

  async watch(options: { resourceVersion: string; signal: AbortSignal }): Promise<AsyncIterable<WatchEvent<KubeObject>>> {
    const answer = this.watchAnswers.shift();
    if (!answer) throw this.exhausted();
    this.watches.push(options.resourceVersion);
    if (answer instanceof Error) throw answer;
    const lines = (async function* () {
      for (const step of answer) {
        if (step instanceof Error) throw step;
        yield typeof step === 'string' ? step : JSON.stringify(step);
      }
    })();
    return decodeEvents<KubeObject>(lines);
  }

  private exhausted(): Error {
    this.onExhausted();
    return new Error('script exhausted');
  }
}

class FakeClock implements WatcherClock {
  time = 0;
  readonly sleeps: number[] = [];
  now = () => this.time;
  random = () => 0;
  sleep = async (ms: number) => {
    this.sleeps.push(ms);
    this.time += ms;
  };
}

interface Seen {
  adds: string[];
  updates: string[];
  deletes: string[];
  errors: unknown[];
}

async function runScript(listAnswers: Array<ListPage<KubeObject> | Error>, watchAnswers: Array<WatchScript | Error>, watcherConfig: Partial<WatcherConfig> = {}) {
  const stop = new AbortController();
  const source = new ScriptedSource(listAnswers, watchAnswers, () => stop.abort());
  const clock = new FakeClock();
  const seen: Seen = { adds: [], updates: [], deletes: [], errors: [] };
  const informer = new Informer(source, { clock, watcherConfig, onError: (err) => seen.errors.push(err) });
  informer.addHandler({
    onAdd: (o) => seen.adds.push(`${o.metadata.name}@${o.metadata.resourceVersion}`),
    onUpdate: (_, o) => seen.updates.push(`${o.metadata.name}@${o.metadata.resourceVersion}`),
    onDelete: (o) => seen.deletes.push(o.metadata.name!),
  });
  await informer.run(stop.signal);
  return { source, clock, seen, informer };
}

const ev = (type: WatchEvent<KubeObject>['type'], object: KubeObject): WatchEvent<KubeObject> => ({ type, object });
const gone = () => new ApiError(410, 'Gone', 'too old resource version');
/** What the API server answers for a resource it does not serve (a CRD not installed). */
const notServed = () => new ApiError(404, 'NotFound', 'the server could not find the requested resource');

describe('watcher state machine', () => {
  it('lists every page, then watches from the list resourceVersion, and marks the cache synced', async () => {
    const { source, seen, informer } = await runScript(
      [{ items: [obj('a', '1')], resourceVersion: '10', continue: 'page2' }, { items: [obj('b', '2')], resourceVersion: '10' }],
      [[ev('ADDED', obj('c', '11'))]],
    );
    assert.deepEqual(source.lists, [{ continue: undefined }, { continue: 'page2' }]);
    assert.equal(source.watches[0], '10');
    assert.deepEqual(seen.adds, ['a@1', 'b@2', 'c@11']);
    assert.equal(informer.isSynced, true);
    assert.equal(informer.store.size, 3);
  });

  it('bookmarks advance the resourceVersion without emitting anything', async () => {
    const { source, seen } = await runScript(
      [{ items: [], resourceVersion: '10' }],
      [[ev('BOOKMARK', { metadata: { resourceVersion: '42' } })], []],
    );
    assert.deepEqual(source.watches, ['10', '42'], 'the next watch resumes from the bookmark');
    assert.deepEqual(seen.adds, []);
  });

  it('a watch that ends normally is resumed at once from the last resourceVersion, without backoff', async () => {
    const { source, clock } = await runScript(
      [{ items: [], resourceVersion: '10' }],
      [[ev('ADDED', obj('a', '11')), ev('MODIFIED', obj('a', '12'))], [ev('ADDED', obj('b', '13'))]],
    );
    assert.deepEqual(source.watches, ['10', '12']);
    assert.deepEqual(clock.sleeps, []);
  });

  it('410 Gone leads to a relist that is swapped in atomically and emits deletes for vanished objects', async () => {
    const { source, seen, informer } = await runScript(
      [
        { items: [obj('a', '1'), obj('b', '2'), obj('c', '3')], resourceVersion: '10' },
        { items: [obj('a', '1'), obj('b', '5'), obj('d', '6')], resourceVersion: '20' },
      ],
      [[ev('MODIFIED', obj('a', '1')), gone()], []],
    );
    assert.equal(source.lists.length, 2, 'relisted after 410');
    assert.deepEqual(source.watches, ['10', '20']);
    assert.deepEqual(seen.deletes, ['c'], 'c vanished while the watch was down');
    assert.ok(seen.updates.includes('b@5'), 'b changed while the watch was down');
    assert.ok(seen.adds.includes('d@6'), 'd appeared while the watch was down');
    assert.deepEqual(informer.store.keys().sort(), ['ns/a', 'ns/b', 'ns/d']);
  });

  it('410 as an ERROR watch event also relists', async () => {
    const { source } = await runScript(
      [{ items: [], resourceVersion: '10' }, { items: [], resourceVersion: '30' }],
      [[JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' } })], []],
    );
    assert.equal(source.lists.length, 2);
    assert.deepEqual(source.watches, ['10', '30']);
  });

  it('a dropped connection resumes from the last resourceVersion after a growing backoff (800 ms, ×2, ≤ 30 s)', async () => {
    const reset = () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const { source, clock, seen } = await runScript(
      [{ items: [], resourceVersion: '10' }],
      [[ev('ADDED', obj('a', '11')), reset()], reset(), reset(), reset(), reset(), reset(), reset(), [ev('ADDED', obj('b', '12'))]],
    );
    assert.equal(source.lists.length, 1, 'no relist for a dropped connection');
    assert.deepEqual(source.watches, ['10', '11', '11', '11', '11', '11', '11', '11']);
    assert.deepEqual(clock.sleeps, [800, 1600, 3200, 6400, 12800, 25600, 30000]);
    assert.equal(seen.errors.length, 7);
  });

  it('the backoff resets after two minutes without failure', async () => {
    const reset = () => new Error('connection reset');
    const stop = new AbortController();
    let watchCalls = 0;
    const clock = new FakeClock();
    const source: ListWatchSource<KubeObject> = {
      description: 'scripted',
      list: async () => ({ items: [], resourceVersion: '1' }),
      watch: async () => {
        watchCalls++;
        if (watchCalls === 4) clock.time += 130_000; // a long healthy period before this failure
        if (watchCalls > 5) stop.abort();
        throw reset();
      },
    };
    await new Informer(source, { clock }).run(stop.signal);
    assert.deepEqual(clock.sleeps.slice(0, 5), [800, 1600, 3200, 800, 1600]);
  });

  it('a malformed event surfaces as an error and the watch resumes from the last good resourceVersion', async () => {
    const { source, seen } = await runScript(
      [{ items: [], resourceVersion: '10' }],
      [[ev('ADDED', obj('a', '11')), '{not json'], [JSON.stringify({ type: 'WHAT', object: obj('b', '12') })], []],
    );
    assert.ok(seen.errors[0] instanceof MalformedWatchEventError, `expected a MalformedWatchEventError, got ${String(seen.errors[0])}`);
    assert.ok(seen.errors[1] instanceof MalformedWatchEventError);
    assert.deepEqual(source.watches, ['10', '11', '11']);
  });

  it('a watch that closes at once without any event is an error, retried with a growing backoff', async () => {
    const { source, clock, seen } = await runScript([{ items: [], resourceVersion: '10' }], [[], [], [], [ev('ADDED', obj('a', '11'))]]);
    assert.deepEqual(source.watches, ['10', '10', '10', '10']);
    assert.deepEqual(clock.sleeps, [800, 1600, 3200], 'backoff between the empty watches, none after one with an event');
    assert.deepEqual(seen.errors.map((e) => (e as Error).name), ['ShortWatchError', 'ShortWatchError', 'ShortWatchError']);
  });

  it('410 on a list continue token falls back to one full, unpaginated list', async () => {
    const expired = new ApiError(410, 'Expired', 'The provided continue parameter is too old');
    const lists: Array<{ limit: number; continue?: string }> = [];
    const pages: Array<ListPage<KubeObject> | Error> = [
      { items: [obj('a', '1')], resourceVersion: '10', continue: 'page2' },
      expired,
      { items: [obj('a', '1'), obj('b', '2'), obj('c', '3')], resourceVersion: '12' },
    ];
    const stop = new AbortController();
    const source: ListWatchSource<KubeObject> = {
      description: 'scripted',
      list: async (options) => {
        lists.push(options);
        const answer = pages.shift()!;
        if (answer instanceof Error) throw answer;
        return answer;
      },
      watch: async () => {
        stop.abort();
        return decodeEvents<KubeObject>((async function* () {})());
      },
    };
    const informer = new Informer(source, { clock: new FakeClock() });
    await informer.run(stop.signal);
    assert.deepEqual(lists, [{ limit: 500, continue: undefined }, { limit: 500, continue: 'page2' }, { limit: 0, continue: undefined }]);
    assert.equal(informer.isSynced, true);
    assert.deepEqual(informer.store.keys().sort(), ['ns/a', 'ns/b', 'ns/c']);
  });

  it('a watch that delivers nothing for the idle timeout is closed and resumed from the last resourceVersion', async () => {
    const stop = new AbortController();
    const watches: string[] = [];
    const closed: string[] = [];
    const errors: unknown[] = [];
    const source: ListWatchSource<KubeObject> = {
      description: 'scripted',
      list: async () => ({ items: [], resourceVersion: '10' }),
      watch: async ({ resourceVersion, signal }) => {
        watches.push(resourceVersion);
        signal.addEventListener('abort', () => closed.push(resourceVersion), { once: true });
        if (watches.length === 3) stop.abort();
        // One bookmark, then silence on an open stream.
        const lines = (async function* () {
          yield JSON.stringify(ev('BOOKMARK', { metadata: { resourceVersion: String(Number(resourceVersion) + 1) } }));
          await new Promise(() => {});
        })();
        return decodeEvents<KubeObject>(lines);
      },
    };
    const informer = new Informer(source, { clock: new FakeClock(), watcherConfig: { watchIdleTimeoutMs: 30 }, onError: (err) => errors.push(err) });
    await informer.run(stop.signal);
    assert.deepEqual(watches, ['10', '11', '12']);
    assert.deepEqual(closed, ['10', '11', '12'], 'each stalled stream is closed');
    assert.deepEqual(errors.map((e) => (e as Error).name), ['WatchStalledError', 'WatchStalledError']);
  });

  it('an optional resource the API server does not serve is an empty, synced list, not an error; listed again every 30 s until it is served', async () => {
    const servedAtAdd: boolean[] = [];
    const { source, clock, seen, informer } = await runScript(
      [notServed(), notServed(), { items: [obj('a', '10')], resourceVersion: '10' }],
      [[ev('ADDED', obj('b', '11'))]],
      { optional: true },
    );
    informer.addHandler({ onAdd: () => servedAtAdd.push(informer.served) });
    assert.equal(source.lists.length, 3);
    assert.deepEqual(clock.sleeps, [30_000, 30_000], 'listed again after 30 s, twice');
    assert.deepEqual(seen.errors, [], 'a resource not served is no error');
    assert.deepEqual(seen.adds, ['a@10', 'b@11'], 'once served, listed and watched as any other');
    assert.deepEqual(servedAtAdd, [true, true]);
    assert.equal(informer.served, true);
  });

  it('while an optional resource is not served its informer is synced, empty and says so', async () => {
    const { seen, informer } = await runScript([notServed()], [], { optional: true });
    assert.equal(informer.isSynced, true, 'synced: the manager starts its controllers');
    assert.equal(informer.served, false);
    assert.equal(informer.store.size, 0);
    assert.deepEqual(seen.errors, []);
  });

  it('an optional resource that stops being served while watched (its CRD deleted) is relisted at once: what it held is deleted', async () => {
    const { source, clock, seen, informer } = await runScript([{ items: [obj('a', '1')], resourceVersion: '10' }, notServed()], [[ev('ADDED', obj('b', '11')), notServed()]], { optional: true });
    assert.equal(source.lists.length, 2);
    assert.deepEqual(seen.deletes.sort(), ['a', 'b']);
    assert.deepEqual(clock.sleeps, [30_000], 'no backoff before the relist; then the wait of a resource not served');
    assert.deepEqual(seen.errors, []);
    assert.equal(informer.served, false);
  });

  it('a 404 on the list of a resource not marked optional is an error, retried with backoff', async () => {
    const { clock, seen, informer } = await runScript([notServed(), { items: [obj('a', '1')], resourceVersion: '10' }], []);
    assert.equal(seen.errors.length, 1);
    assert.deepEqual(clock.sleeps, [800]);
    assert.deepEqual(seen.adds, ['a@1']);
    assert.equal(informer.served, true);
  });

  it('drops managedFields before caching', async () => {
    const { informer } = await runScript([{ items: [obj('a', '1', { managedFields: [{ manager: 'x' }] })], resourceVersion: '2' }], []);
    assert.equal(informer.store.get('ns/a')?.metadata.managedFields, undefined);
  });
});
