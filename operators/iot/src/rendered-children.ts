/**
 * Per instance, its desired children as last rendered and which observed versions matched them.
 *
 * Guarantees (both are shortcuts whose results equal doing the work again):
 * - An instance's children are rendered, stamped with their desired hash and grouped into their
 *   write stages once per rendering key (the caller's: the IoTService's uid and generation and the
 *   version of the image-pull-secret they are built from); a reconcile with the same key reuses
 *   them.
 * - A child whose observed object still has the resourceVersion that was found to match the same
 *   rendering is not compared again: an unchanged object against an unchanged desired form
 *   cannot differ.
 * A new rendering key starts afresh; `forget` drops an instance (deleted or gone).
 */
import type { KubeObject } from '@iot-operator/runtime';
import { writeStages, type DesiredChild } from './resources/index.ts';

export interface PreparedChild {
  child: DesiredChild;
  /** The object to write: stamped with its desired hash unless create-only. */
  desired: KubeObject;
}

export class Rendering {
  private readonly matched = new Map<number, string>();
  /** Indexes of `children` by write stage, earliest first (`writeStages`). */
  readonly stages: readonly number[][];

  constructor(
    readonly key: string,
    readonly children: readonly PreparedChild[],
  ) {
    this.stages = writeStages(children.map((prepared) => prepared.child));
  }

  /** True when child `index` was found to match its desired form at this resourceVersion. */
  matches(index: number, resourceVersion: string | undefined): boolean {
    return resourceVersion !== undefined && this.matched.get(index) === resourceVersion;
  }

  /** Records that child `index` at `resourceVersion` matches its desired form. */
  recordMatch(index: number, resourceVersion: string | undefined): void {
    if (resourceVersion === undefined) this.matched.delete(index);
    else this.matched.set(index, resourceVersion);
  }
}

export class RenderedChildren {
  private readonly byInstance = new Map<string, Rendering>();

  /** The instance's rendering for `key`, rendered now by `render` when the key changed. */
  get(instanceKey: string, key: string, render: () => PreparedChild[]): Rendering {
    const current = this.byInstance.get(instanceKey);
    if (current?.key === key) return current;
    const rendering = new Rendering(key, render());
    this.byInstance.set(instanceKey, rendering);
    return rendering;
  }

  forget(instanceKey: string): void {
    this.byInstance.delete(instanceKey);
  }
}
