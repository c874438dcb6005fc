/**
 * Where the stateful components (broker, database) keep their data: on a volume claim or in an
 * emptyDir.
 *
 * Guarantees: `dataVolume` is a pure function of the component's `storage` and `storageClassName`
 * and of the components whose StatefulSet exists already with an emptyDir (`KeptEmptyDirs`, as
 * `hasEmptyDirData` tells): a claim of `storage`'s size in canonical form, DEFAULT_STORAGE when it
 * is empty (and `storageClassName` when set); an emptyDir with `storage: ephemeral`, or when the
 * StatefulSet was made with one — the API server refuses any change to a claim template, so what a
 * StatefulSet was made with stays. The StatefulSets (statefulsets.ts) and the broker's stream
 * limit in config.yml (configmap.ts) both follow it.
 */

import type { V1StatefulSet } from '@kubernetes/client-node';
import { DEFAULT_STORAGE, EPHEMERAL_STORAGE } from '../api/iotservice.ts';
import type { Instance } from './instance.ts';
import { canonicalQuantity } from './quantity.ts';

export type StatefulSetComponent = 'broker' | 'database';
export const STATEFULSET_COMPONENTS: readonly StatefulSetComponent[] = ['broker', 'database'];

/** Where a component's replicas keep their data. */
export type DataVolume =
  | { kind: 'claim'; size: string; storageClassName?: string }
  /** `requested`: `storage: ephemeral`; `kept`: the StatefulSet was made with an emptyDir. */
  | { kind: 'emptyDir'; why: 'requested' | 'kept' };

/** The components whose existing StatefulSet keeps an emptyDir, as observed. */
export type KeptEmptyDirs = ReadonlySet<StatefulSetComponent>;

/** A StatefulSet made without a claim template keeps its data in an emptyDir. */
export function hasEmptyDirData(statefulSet: V1StatefulSet): boolean {
  return (statefulSet.spec?.volumeClaimTemplates ?? []).length === 0;
}

export function dataVolume(instance: Instance, component: StatefulSetComponent, kept: KeptEmptyDirs): DataVolume {
  const { storage, storageClassName } = instance.spec[component];
  if (storage === EPHEMERAL_STORAGE) return { kind: 'emptyDir', why: 'requested' };
  if (kept.has(component)) return { kind: 'emptyDir', why: 'kept' };
  return { kind: 'claim', size: canonicalQuantity(storage || DEFAULT_STORAGE), ...(storageClassName ? { storageClassName } : {}) };
}
