/**
 * Readiness judgements the benchmarks wait on, as pure functions of observed objects.
 *
 * Guarantees: `workloadReady` holds for a Deployment exactly when `kubectl rollout status` would
 * report it complete (current generation observed, every replica updated, no old replica left,
 * all available and ready) and for a StatefulSet when its current generation is observed and
 * exactly `spec.replicas` replicas exist, all updated and ready, on one revision — the same
 * rules the IoT operator applies before it reports an instance Available, so the operator-free
 * floor waits for the same end state. `podReady` is the pod's Ready condition. `iotAvailable`
 * is an IoTService whose status says Available for its current generation.
 */

interface Meta {
  metadata?: { generation?: number; deletionTimestamp?: string };
}

export interface WorkloadLike extends Meta {
  kind?: string;
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    readyReplicas?: number;
    availableReplicas?: number;
    currentRevision?: string;
    updateRevision?: string;
  };
}

export function workloadReady(w: WorkloadLike): boolean {
  const desired = w.spec?.replicas ?? 1;
  const s = w.status ?? {};
  const generation = w.metadata?.generation;
  const observed = generation === undefined || (s.observedGeneration ?? 0) >= generation;
  const updated = s.updatedReplicas ?? 0;
  const ready = s.readyReplicas ?? 0;
  if (w.kind === 'StatefulSet') {
    const oneRevision = !s.currentRevision || !s.updateRevision || s.currentRevision === s.updateRevision;
    return observed && (s.replicas ?? 0) === desired && updated >= desired && ready >= desired && oneRevision;
  }
  return observed && updated >= desired && (s.replicas ?? 0) <= updated && (s.availableReplicas ?? 0) >= desired && ready >= desired;
}

export interface PodLike extends Meta {
  status?: { phase?: string; conditions?: Array<{ type: string; status: string }> };
}

export function podReady(p: PodLike): boolean {
  if (p.metadata?.deletionTimestamp) return false;
  return p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

export interface IoTLike extends Meta {
  status?: { phase?: string; observedGeneration?: number };
}

export function iotAvailable(o: IoTLike, atLeastGeneration = o.metadata?.generation ?? 0): boolean {
  return o.status?.phase === 'Available' && (o.status.observedGeneration ?? -1) >= atLeastGeneration && (o.status.observedGeneration ?? -1) >= (o.metadata?.generation ?? 0);
}
