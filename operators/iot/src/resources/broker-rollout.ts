/**
 * How the broker's pods start and roll: the StatefulSet's podManagementPolicy and the broker's
 * readiness, which together decide when the StatefulSet replaces the next broker.
 *
 * Guarantees: `brokerRollout` is a pure function of `spec.broker.replicas` and of whether the
 * broker StatefulSet exists already with OrderedReady (`madeOrderedReady`, as observed):
 * - one broker: OrderedReady (the field left to its default) and ready once JetStream is enabled
 *   (`/healthz?js-enabled-only=true`), as in earlier versions;
 * - three brokers, a new StatefulSet: Parallel, and ready only on nats-server's full `/healthz`
 *   (v2.15.3, as cluster/engines/nats-server pins it: server/monitor.go `healthz`: 503 until the server knows the JetStream meta leader and
 *   is current with it, and every stream and consumer it holds a replica of is no longer catching
 *   up and its Raft group current). Parallel starts the three pods at once, so quorum forms and
 *   they become ready; under OrderedReady broker-1 would wait for a broker-0 that waits for a
 *   quorum. The podManagementPolicy only concerns scaling: a RollingUpdate still deletes one pod
 *   at a time, highest ordinal first, and deletes the next only once every pod above it is
 *   Running and Ready (Kubernetes v1.33 pkg/controller/statefulset/stateful_set_control.go,
 *   `updateStatefulSet`: the same loop for both policies, with the alpha MaxUnavailableStatefulSet
 *   gate off as by default). So a broker is rolled only once the
 *   one replaced before it has caught up with the stream, and two of the three replicas are never
 *   behind because of the roll. Unlike OrderedReady, Parallel does not wait for a pod that was
 *   not replaced (a broker already down when the roll starts is not waited for).
 *   minReadySeconds is not set: v1.33's rolling update waits for Ready alone, not for
 *   availability, so it would not hold the roll.
 * - three brokers whose StatefulSet was made with OrderedReady (by earlier versions): the API server
 *   refuses any change to podManagementPolicy, so it keeps OrderedReady and the js-enabled-only
 *   readiness without which it would never start from nothing; such a roll may replace a broker
 *   before the previous one has caught up.
 */

import type { V1StatefulSet } from '@kubernetes/client-node';
import type { Instance } from './instance.ts';
import type { ProbePath } from './pod.ts';

/** The StatefulSet fields and the broker's readiness that decide how its pods start and roll. */
export interface BrokerRollout {
  /** Parallel, or undefined for the default OrderedReady. */
  podManagementPolicy?: 'Parallel';
  readinessPath: ProbePath;
}

/** A StatefulSet with OrderedReady, stated or by default, keeps it (the field is immutable). */
export function madeOrderedReady(statefulSet: V1StatefulSet): boolean {
  return (statefulSet.spec?.podManagementPolicy ?? 'OrderedReady') === 'OrderedReady';
}

/** `keptOrderedReady`: the broker StatefulSet exists with OrderedReady (`madeOrderedReady`). */
export function brokerRollout(instance: Instance, keptOrderedReady: boolean): BrokerRollout {
  if (instance.spec.broker.replicas === 1 || keptOrderedReady) return { readinessPath: '/healthz?js-enabled-only=true' };
  return { podManagementPolicy: 'Parallel', readinessPath: '/healthz' };
}
