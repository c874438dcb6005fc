/**
 * The list and watch calls a watcher needs, as an interface, plus its implementation over the
 * real client. Unit tests drive the watcher through a scripted implementation of the same
 * interface.
 *
 * Guarantees: listed objects carry apiVersion and kind like watched ones do; a watch line that is not a well-formed watch event raises `MalformedWatchEventError`
 * naming what was wrong; an `ERROR` event carrying a 410 is raised as an `ApiError` with reason
 * `Gone`, other `ERROR` events as `ApiError`s of their own code.
 */
import type { KubeClient } from '../client/client.ts';
import { ApiError } from '../client/errors.ts';
import { apiVersionOf, type KubeObject, type ResourceType } from '../client/resource.ts';

export interface ListPage<T extends KubeObject> {
  items: T[];
  resourceVersion: string;
  continue?: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';

export interface WatchEvent<T extends KubeObject> {
  type: WatchEventType;
  object: T;
}

export interface ListWatchSource<T extends KubeObject> {
  /** A human-readable name for logs, e.g. "apps/v1/Deployment ns=foo". */
  readonly description: string;
  /** One page of at most `limit` objects; `limit` 0 lists everything in one response. */
  list(options: { limit: number; continue?: string }): Promise<ListPage<T>>;
  watch(options: { resourceVersion: string; timeoutSeconds: number; signal: AbortSignal }): Promise<AsyncIterable<WatchEvent<T>>>;
}

export class MalformedWatchEventError extends Error {
  override readonly name = 'MalformedWatchEventError';
}

export interface Selection {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/** A list/watch source for one resource type over the real client. */
export function clientSource<T extends KubeObject>(client: KubeClient, type: ResourceType, selection: Selection = {}): ListWatchSource<T> {
  const apiVersion = apiVersionOf(type);
  const scope = [selection.namespace && `ns=${selection.namespace}`, selection.labelSelector && `labels=${selection.labelSelector}`].filter(Boolean).join(' ');
  return {
    description: `${type.group || 'core'}/${type.version}/${type.kind}${scope ? ` ${scope}` : ''}`,
    async list({ limit, continue: continueToken }) {
      const page = await client.list<T>(type, { ...selection, limit: limit || undefined, continue: continueToken });
      // List items come without apiVersion and kind; watch events carry them. Fill them in so that
      // cached objects look the same however they arrived.
      const items = (page.items ?? []).map((item) => ({ ...item, apiVersion: item.apiVersion ?? apiVersion, kind: item.kind ?? type.kind }));
      return { items, resourceVersion: page.metadata?.resourceVersion ?? '', continue: page.metadata?.continue || undefined };
    },
    async watch({ resourceVersion, timeoutSeconds, signal }) {
      const stream = await client.watch(type, { ...selection, resourceVersion, timeoutSeconds, allowWatchBookmarks: true, signal });
      return decodeEvents<T>(stream.lines, () => stream.close());
    },
  };
}

/** Turns raw watch lines into typed events, raising errors for ERROR events and garbage. */
export async function* decodeEvents<T extends KubeObject>(lines: AsyncIterable<string>, close: () => void = () => {}): AsyncIterable<WatchEvent<T>> {
  try {
    for await (const line of lines) yield parseWatchLine<T>(line);
  } finally {
    close();
  }
}

export function parseWatchLine<T extends KubeObject>(line: string): WatchEvent<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    throw new MalformedWatchEventError(`watch event is not JSON: ${line.slice(0, 200)}`);
  }
  const event = parsed as { type?: unknown; object?: unknown };
  if (event.type === 'ERROR') {
    const status = event.object as { code?: number } | undefined;
    throw ApiError.fromResponse(status?.code ?? 500, event.object, 'WATCH', 'event');
  }
  if (event.type !== 'ADDED' && event.type !== 'MODIFIED' && event.type !== 'DELETED' && event.type !== 'BOOKMARK') {
    throw new MalformedWatchEventError(`watch event has unknown type ${JSON.stringify(event.type)}`);
  }
  const object = event.object as KubeObject | undefined;
  if (typeof object !== 'object' || object === null || typeof object.metadata !== 'object' || object.metadata === null) {
    throw new MalformedWatchEventError(`watch ${event.type} event has no object metadata`);
  }
  return { type: event.type, object: object as T };
}
