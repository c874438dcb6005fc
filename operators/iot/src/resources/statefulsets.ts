/**
 * The stateful workloads: StatefulSets `broker` and `database`.
 *
 * Guarantees: one StatefulSet per component, named after it and governed by the headless Service
 * of the same name, with the replicas of the spec, an immutable selector and the shared hardened
 * pod template (pod.ts). Data lives at /var/lib/iot (data-volume.ts `dataVolume`): on a
 * ReadWriteOnce volume claim template `data` of `storage`'s size, DEFAULT_STORAGE when it is empty
 * (and `storageClassName` when set); in an emptyDir only with `storage: ephemeral`, or when the
 * StatefulSet exists already with an emptyDir (made before volumes were the default) — the API
 * server refuses any change to a claim template, so what a StatefulSet was made with stays.
 * The claim template is a pure function of `storage` and `storageClassName` only, for the same
 * reason. Neither reads config.yml, so their pod templates carry no config checksum: a
 * `spec.config` change never restarts the broker or the database; they carry the credentials'
 * rotation like every template (pod.ts), so a rotation restarts them with the new passwords.
 *
 * The database is PostgreSQL: one replica alone, ready and alive while it accepts connections on
 * 5432; three under Patroni (the image's database.sh), which elects the primary and labels it
 * `role: master` (database-client selects it), with the probes on Patroni's REST API (8008), and
 * `updateStrategy: OnDelete`: the operator replaces those pods itself, the primary last and only
 * after a switchover (database-roll.ts). With `spec.backup` its pods archive WAL to the repository
 * host and serve pgBackRest (backup.ts); with `spec.restore` an init container restores the first
 * pod's empty data directory from the source's backups (restore.ts).
 *
 * The broker is nats-server with JetStream: ready on the monitor port's health endpoint and started
 * and rolled as broker-rollout.ts `brokerRollout` says (three brokers: in parallel, each ready once
 * its streams are current), and alive while it accepts clients (4222).
 * It is told the password of each component's broker user and of its routes, its pod's name and
 * namespace (downward API) and the number of replicas (IOT_BROKER_REPLICAS): with 3 it routes to
 * its peers at `nats://broker-<i>.broker.<POD_NAMESPACE>.svc:6222` through the headless Service,
 * as user `route`.
 */

import type { V1EnvVar, V1PersistentVolumeClaim, V1StatefulSet, V1StatefulSetSpec } from '@kubernetes/client-node';
import { BACKUP_TLS_DIR, BACKUP_TLS_SECRET, databaseArchiveEnvironment, databaseBackupSidecar } from './backup.ts';
import { brokerRollout } from './broker-rollout.ts';
import { RESTORE_CONTAINER, RESTORE_SCRIPT, RESTORE_TLS_DIR, RESTORE_TLS_SECRET, restoreEnvironment, restores } from './restore.ts';
import { dataVolume, type DataVolume, type KeptEmptyDirs, type StatefulSetComponent } from './data-volume.ts';
import { DATABASE_SERVICE_ACCOUNT, runsPatroni } from './patroni.ts';
import type { Instance } from './instance.ts';
import { componentLabels, componentSelector, instanceLabels } from './labels.ts';
import { DATA_VOLUME, desiredPodTemplate, httpProbe, tcpProbe, type ContainerRuntime, type ProbePath } from './pod.ts';
import { BROKER_PORTS, DATABASE_PORT, PATRONI_PORT, PORTS } from './ports.ts';

export const DATA_PATH = '/var/lib/iot';
/** How many broker replicas run (`spec.broker.replicas`): 1, or 3 routed to each other. */
export const BROKER_REPLICAS_ENV = 'IOT_BROKER_REPLICAS';

/** The pod's own `field` (downward API) as environment variable `name`. */
const podField = (name: string, field: string): V1EnvVar => ({ name, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: field } } });
const POD_IDENTITY: readonly V1EnvVar[] = [podField('POD_NAME', 'metadata.name'), podField('POD_NAMESPACE', 'metadata.namespace')];

/** The broker's container: its ports, probes (readiness on `readinessPath`), its users' and routes' passwords, pod identity and replica count. */
function brokerRuntime(instance: Instance, readinessPath: ProbePath): ContainerRuntime {
  return {
    ports: BROKER_PORTS,
    readinessProbe: httpProbe(readinessPath, PORTS.brokerMonitor, 'readiness'),
    livenessProbe: tcpProbe(PORTS.brokerClient, 'liveness'),
    credentials: ['brokerGatewayPassword', 'brokerProcessingPassword', 'brokerCorePassword', 'brokerRoutePassword'],
    environment: [...POD_IDENTITY, { name: BROKER_REPLICAS_ENV, value: String(instance.spec.broker.replicas) }],
    dataPath: DATA_PATH,
  };
}

/** The database is told its superuser's password and those of the components' roles, which it makes and keeps at every start. */
export const DATABASE_RUNTIME: ContainerRuntime = {
  ports: [DATABASE_PORT],
  readinessProbe: tcpProbe(PORTS.database, 'readiness'),
  livenessProbe: tcpProbe(PORTS.database, 'liveness'),
  credentials: ['databasePassword', 'databaseCorePassword', 'databaseProcessingPassword'],
  dataPath: DATA_PATH,
};

/** How many database replicas run (`spec.database.replicas`): 1 alone, or 3 under Patroni. */
export const DATABASE_REPLICAS_ENV = 'IOT_DATABASE_REPLICAS';
/** The labels (JSON) that select the database's pods: Patroni's members. */
export const DATABASE_MEMBER_LABELS_ENV = 'IOT_DATABASE_MEMBER_LABELS';

/**
 * The database's container: DATABASE_RUNTIME for one replica (exactly as before replicas could be
 * 3, so its pods never change); for three, Patroni's besides: its REST API's port and probes, the
 * replication password, the pod's name, namespace and address, the member labels, and the
 * ServiceAccount its Patroni keeps the cluster's state with (patroni.ts). With `spec.backup`,
 * WAL archiving's environment, Secret backup-tls and pgBackRest's server beside it (backup.ts).
 */
export function databaseRuntime(instance: Instance): ContainerRuntime {
  const base = runsPatroni(instance) ? patroniRuntime(instance) : DATABASE_RUNTIME;
  const runtime: ContainerRuntime = restores(instance)
    ? { ...base, init: { name: RESTORE_CONTAINER, command: [RESTORE_SCRIPT], environment: restoreEnvironment(instance), secretDirectory: { secret: RESTORE_TLS_SECRET, mountPath: RESTORE_TLS_DIR } } }
    : base;
  const sidecar = databaseBackupSidecar(instance);
  if (!sidecar) return runtime;
  return {
    ...runtime,
    environment: [...(runtime.environment ?? []), ...databaseArchiveEnvironment(instance)],
    secretDirectories: [{ secret: BACKUP_TLS_SECRET, mountPath: BACKUP_TLS_DIR }],
    sidecar,
  };
}

function patroniRuntime(instance: Instance): ContainerRuntime {
  return {
    ...DATABASE_RUNTIME,
    ports: [DATABASE_PORT, PATRONI_PORT],
    readinessProbe: httpProbe('/readiness', PORTS.patroni, 'readiness'),
    livenessProbe: httpProbe('/liveness', PORTS.patroni, 'liveness'),
    credentials: [...DATABASE_RUNTIME.credentials, 'databaseReplicationPassword'],
    environment: [
      ...POD_IDENTITY,
      podField('POD_IP', 'status.podIP'),
      { name: DATABASE_REPLICAS_ENV, value: String(instance.spec.database.replicas) },
      { name: DATABASE_MEMBER_LABELS_ENV, value: JSON.stringify(componentSelector(instance, 'database')) },
    ],
    serviceAccount: DATABASE_SERVICE_ACCOUNT,
  };
}

/** The claim template for `component`, or undefined when its data lives in an emptyDir. */
export function dataClaimTemplate(instance: Instance, volume: DataVolume): V1PersistentVolumeClaim | undefined {
  if (volume.kind === 'emptyDir') return undefined;
  return {
    metadata: { name: DATA_VOLUME, labels: instanceLabels(instance) },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: volume.size } },
      ...(volume.storageClassName ? { storageClassName: volume.storageClassName } : {}),
    },
  };
}

function desiredStatefulSet(
  instance: Instance,
  component: StatefulSetComponent,
  runtime: ContainerRuntime,
  kept: KeptEmptyDirs,
  credentialsRotation: string | undefined,
  /** How its pods start and are replaced, when not the StatefulSet's defaults. */
  { podManagementPolicy, updateStrategy }: Pick<V1StatefulSetSpec, 'podManagementPolicy' | 'updateStrategy'> = {},
): V1StatefulSet {
  const claim = dataClaimTemplate(instance, dataVolume(instance, component, kept));
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: component, namespace: instance.namespace, labels: componentLabels(instance, component) },
    spec: {
      replicas: instance.spec[component].replicas,
      serviceName: component,
      ...(podManagementPolicy ? { podManagementPolicy } : {}),
      selector: { matchLabels: componentSelector(instance, component) },
      template: desiredPodTemplate(instance, component, runtime, { credentialsRotation }, { dataEmptyDir: !claim }),
      ...(claim ? { volumeClaimTemplates: [claim] } : {}),
      ...(updateStrategy ? { updateStrategy } : {}),
    },
  };
}

/**
 * `credentialsRotation`: secrets.ts `credentialsRotation`, when there is one; `keptOrderedReady`:
 * the broker StatefulSet exists with OrderedReady (broker-rollout.ts `madeOrderedReady`).
 */
export function desiredBrokerStatefulSet(instance: Instance, kept: KeptEmptyDirs = new Set(), credentialsRotation?: string, keptOrderedReady = false): V1StatefulSet {
  const { podManagementPolicy, readinessPath } = brokerRollout(instance, keptOrderedReady);
  return desiredStatefulSet(instance, 'broker', brokerRuntime(instance, readinessPath), kept, credentialsRotation, podManagementPolicy ? { podManagementPolicy } : {});
}

export function desiredDatabaseStatefulSet(instance: Instance, kept: KeptEmptyDirs = new Set(), credentialsRotation?: string): V1StatefulSet {
  return desiredStatefulSet(instance, 'database', databaseRuntime(instance), kept, credentialsRotation, runsPatroni(instance) ? { updateStrategy: { type: 'OnDelete' } } : {});
}
