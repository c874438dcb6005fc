/**
 * The Event recorder: core/v1 Events about objects, as `kubectl describe` shows them.
 *
 * Guarantees:
 * - An event is attached to its object (involvedObject with uid and resourceVersion) in the
 *   object's namespace (`default` for cluster-scoped objects).
 * - Repeats of the same (object, type, reason, message) are aggregated: the existing Event's
 *   `count` is raised and `lastTimestamp` moved, instead of creating a new Event.
 * - Recording never throws and never blocks a reconcile on the API server: failures are
 *   logged; the write happens in the background.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeClient } from '../client/client.ts';
import { isNotFound } from '../client/errors.ts';
import { Kinds, type KubeObject } from '../client/resource.ts';
import { kubeTimestamp } from '../client/timestamp.ts';

export type EventType = 'Normal' | 'Warning';

export interface EventRecorder {
  event(obj: KubeObject, type: EventType, reason: string, message: string): void;
  /** Resolves when every event recorded so far has been written (or failed). */
  flush(): Promise<void>;
}

interface Recorded {
  name: string;
  namespace: string;
  count: number;
}

const maxRemembered = 4096;

export class ApiEventRecorder implements EventRecorder {
  private readonly recorded = new Map<string, Recorded>();
  private pending: Promise<void> = Promise.resolve();

  constructor(
    private readonly client: KubeClient,
    private readonly component: string,
    private readonly log: Logger,
  ) {}

  event(obj: KubeObject, type: EventType, reason: string, message: string): void {
    this.pending = this.pending.then(() => this.write(obj, type, reason, message)).catch((err: unknown) => {
      this.log.warn({ err: err instanceof Error ? err.message : String(err), reason }, 'could not record event');
    });
  }

  flush(): Promise<void> {
    return this.pending;
  }

  private async write(obj: KubeObject, type: EventType, reason: string, message: string): Promise<void> {
    const namespace = obj.metadata.namespace ?? 'default';
    const aggregationKey = [obj.metadata.uid, type, reason, message].join('\u0000');
    const now = kubeTimestamp(new Date());
    const previous = this.recorded.get(aggregationKey);
    if (previous) {
      try {
        await this.client.patch(Kinds.Event, previous.name, previous.namespace, { count: previous.count + 1, lastTimestamp: now }, 'merge');
        previous.count++;
        return;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        this.recorded.delete(aggregationKey);
      }
    }
    const name = `${obj.metadata.name}.${randomBytes(8).toString('hex')}`;
    await this.client.create(Kinds.Event, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: obj.metadata.name,
        namespace: obj.metadata.namespace,
        uid: obj.metadata.uid,
        resourceVersion: obj.metadata.resourceVersion,
      },
      reason,
      message,
      type,
      count: 1,
      firstTimestamp: now,
      lastTimestamp: now,
      source: { component: this.component },
      reportingComponent: this.component,
    });
    if (this.recorded.size >= maxRemembered) this.recorded.delete(this.recorded.keys().next().value!);
    this.recorded.set(aggregationKey, { name, namespace, count: 1 });
  }
}
