/**
 * Per instance, its desired children as last rendered and which observed versions matched them.
 *
 * Guarantees (each is a shortcut whose results equal doing the work again):
 * - An instance's children are rendered, stamped with their desired hash and grouped into their
 *   write stages once per rendering key (the caller's: the IoTService's uid and generation and the
 *   version of the image-pull-secret they are built from); a reconcile with the same key reuses
 *   them.
 * - A child found to match its desired form is not compared again while its observed object
 *   keeps that resourceVersion, or changes only in its status: an object unchanged outside its
 *   status (its content fingerprint) against an unchanged desired form cannot differ, and no
 *   desired child has a status. So the status updates of a rolling workload cost no comparison.
 * - Once every child matches (`releaseIfAllMatched`; the generated credentials: found to lack no
 *   key), the desired objects are let go and only the children's names and fingerprints are
 *   kept: an instance at rest costs a few hundred bytes, not its rendered children. They are
 *   rendered again, identically for the same key (but for the fresh values of the generated
 *   credentials, which are only written for keys the Secret lacks), when a child has to be
 *   compared or written (`child`).
 * A new rendering key starts afresh; `forget` drops an instance (deleted or gone).
 */
import { createHash } from 'node:crypto';
import type { KubeObject } from '@iot-operator/runtime';
import { writeStages, type DesiredChild } from './resources/index.ts';

export interface PreparedChild {
  child: DesiredChild;
  /** The object to write: stamped with its desired hash unless generated. */
  desired: KubeObject;
}

/** What identifies a child without its desired form. */
export interface ChildId {
  kind: string;
  name: string;
  namespace: string | undefined;
  generated: boolean;
}

interface Match {
  resourceVersion: string;
  fingerprint: string;
}

export class Rendering {
  private readonly matched = new Map<number, Match>();
  private prepared: readonly PreparedChild[] | undefined;
  /** Indexes of the children by write stage, earliest first (`writeStages`). */
  readonly stages: readonly number[][];
  readonly ids: readonly ChildId[];

  constructor(
    readonly key: string,
    private readonly render: () => PreparedChild[],
  ) {
    const prepared = render();
    this.prepared = prepared;
    this.stages = writeStages(prepared.map((p) => p.child));
    this.ids = prepared.map(({ child, desired }) => ({ kind: desired.kind!, name: desired.metadata.name!, namespace: desired.metadata.namespace, generated: child.generated }));
  }

  /** Child `index` with its desired form, rendered again if it was let go. */
  child(index: number): PreparedChild {
    this.prepared ??= this.render();
    return this.prepared[index]!;
  }

  /** True when child `index`, as observed now, is known to match its desired form. */
  matches(index: number, observed: KubeObject): boolean {
    const match = this.matched.get(index);
    const resourceVersion = observed.metadata.resourceVersion;
    if (!match || resourceVersion === undefined) return false;
    if (match.resourceVersion === resourceVersion) return true;
    if (match.fingerprint !== contentFingerprint(observed)) return false;
    match.resourceVersion = resourceVersion;
    return true;
  }

  /** Records that child `index`, as `observed`, matches its desired form. */
  recordMatch(index: number, observed: KubeObject): void {
    const resourceVersion = observed.metadata.resourceVersion;
    if (resourceVersion === undefined) this.matched.delete(index);
    else this.matched.set(index, { resourceVersion, fingerprint: contentFingerprint(observed) });
  }

  /** Lets the desired objects go when every child has been found to match (the generated one: to lack nothing). */
  releaseIfAllMatched(): void {
    if (this.ids.every((_id, index) => this.matched.has(index))) this.prepared = undefined;
  }
}

/**
 * A hash of everything of an object but its status, resourceVersion and managedFields. The JSON
 * is not canonicalised: objects from the API server list their fields in one order (the API
 * types'), whichever response or event they came in, and one from elsewhere that hashes
 * differently is only compared again. (Canonical JSON costs ten times as much per object.)
 */
export function contentFingerprint(obj: KubeObject): string {
  const { status: _status, ...rest } = obj as KubeObject & { status?: unknown };
  const { resourceVersion: _rv, managedFields: _managed, ...metadata } = obj.metadata;
  return createHash('sha256').update(JSON.stringify({ ...rest, metadata })).digest('base64url').slice(0, 22);
}

export class RenderedChildren {
  private readonly byInstance = new Map<string, Rendering>();

  /** The instance's rendering for `key`, rendered now by `render` when the key changed. */
  get(instanceKey: string, key: string, render: () => PreparedChild[]): Rendering {
    const current = this.byInstance.get(instanceKey);
    if (current?.key === key) return current;
    const rendering = new Rendering(key, render);
    this.byInstance.set(instanceKey, rendering);
    return rendering;
  }

  forget(instanceKey: string): void {
    this.byInstance.delete(instanceKey);
  }
}
