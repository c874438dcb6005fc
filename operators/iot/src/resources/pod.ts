/**
 * The pod template shared by every workload of an instance.
 *
 * Guarantees: every pod pulls with `image-pull-secret`, runs as a non-root user (10001) with a
 * read-only root filesystem, no privilege escalation, all capabilities dropped and the
 * RuntimeDefault seccomp profile (it passes the `restricted` Pod Security Standard); every
 * container has readiness (every 2 s, lost after 2 failures) and liveness probes; config.yml is mounted read-only at
 * the instance's config mount path (default /etc/sap/config.yml, subPath) and /tmp is a small writable emptyDir; a
 * component's Secret directory (the gateway's TLS files) is mounted read-only without subPath and
 * readable by the pod's group alone, and no hash of its content is on the template, so a changed
 * Secret reaches running pods without restarting them (a Secret read into environment variables,
 * the repository host's S3 credentials, is hashed onto the template: a change restarts its pods); the template of
 * a component that reads config.yml (gateway, core, processing) carries the config checksum
 * annotation, so a configuration change rolls its pods (a subPath mount never sees a ConfigMap
 * update); broker and database do not read it, so a configuration change leaves them running.
 * A runtime's second container (the database's pgBackRest server with spec.backup) runs the same
 * image under the same security context and mounts what the first one does; so does its init
 * container (the database's restore with spec.restore), but for the first one's Secret directory,
 * with a Secret of its own mounted (optional) for it alone. The backup repository
 * host's pods run the database's image where the database's may run (its placement).
 * No pod mounts a ServiceAccount token but those of a runtime that names its `serviceAccount`
 * (three database replicas, whose Patroni keeps its state in the API server).
 * Every component's template carries the credentials' rotation (CREDENTIALS_ROTATION_ANNOTATION)
 * when there is one, so a rotation rolls every pod, each then reading the new credentials at its
 * start (environment variables from iot-credentials are read only then). The component's placement
 * (nodeSelector, tolerations and affinity) reaches the pod spec as copies (never shared with the
 * IoTService's spec), omitted when absent or empty. Objects are written in the form the API
 * server returns them (explicit `protocol`, numeric ports, canonical quantities, no empty maps or
 * lists), so a matching child compares equal to its desired form.
 */

import type {
  V1Container,
  V1ContainerPort,
  V1EnvVar,
  V1PodTemplateSpec,
  V1Probe,
  V1ResourceRequirements,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { ComponentName, ResourceRequirements } from '../api/iotservice.ts';
import { CONFIG_CHECKSUM_ANNOTATION, CONFIG_FILE_KEY, CONFIG_MAP_NAME } from './configmap.ts';
import type { Instance } from './instance.ts';
import { componentLabels, type WorkloadName } from './labels.ts';
import type { NamedPort } from './ports.ts';
import { canonicalResourceList } from './quantity.ts';
import { CREDENTIAL_KEYS, CREDENTIALS_ROTATION_ANNOTATION, CREDENTIALS_SECRET_NAME, IMAGE_PULL_SECRET_NAME, type CredentialName } from './secrets.ts';

export const POD_USER_ID = 10001;
export const CONFIG_VOLUME = 'config';
export const TMP_VOLUME = 'tmp';
export const DATA_VOLUME = 'data';
export const TMP_SIZE_LIMIT = '64Mi';
/** On a pod template: the checksum of Secrets its containers read into their environment (TemplateRolls). */
export const SECRET_CHECKSUM_ANNOTATION = 'cp.iotservices.io/secret-checksum';

/** The environment variable each credential of iot-credentials reaches a component as. */
export const CREDENTIAL_ENV: Readonly<Record<CredentialName, string>> = {
  apiToken: 'IOT_API_TOKEN',
  deviceCheckToken: 'IOT_DEVICE_CHECK_TOKEN',
  brokerGatewayPassword: 'IOT_BROKER_GATEWAY_PASSWORD',
  brokerProcessingPassword: 'IOT_BROKER_PROCESSING_PASSWORD',
  brokerCorePassword: 'IOT_BROKER_CORE_PASSWORD',
  brokerRoutePassword: 'IOT_BROKER_ROUTE_PASSWORD',
  databasePassword: 'IOT_DATABASE_PASSWORD',
  databaseCorePassword: 'IOT_DATABASE_CORE_PASSWORD',
  databaseProcessingPassword: 'IOT_DATABASE_PROCESSING_PASSWORD',
  databaseReplicationPassword: 'IOT_DATABASE_REPLICATION_PASSWORD',
};

/** How one component's container runs. */
export interface ContainerRuntime {
  /** The program run instead of the image's entry point (the backup repository host's). */
  command?: readonly string[];
  ports: readonly NamedPort[];
  readinessProbe: V1Probe;
  livenessProbe: V1Probe;
  credentials: readonly CredentialName[];
  /** Further environment variables, after IOT_CONFIG_FILE and the credentials. */
  environment?: readonly V1EnvVar[];
  /** Writable data directory (StatefulSets), mounted from volume `data`. */
  dataPath?: string;
  /**
   * Secrets each mounted whole and read-only at its `mountPath` (a volume named after it, no
   * subPath, so the kubelet brings its updates into the running pods).
   */
  secretDirectories?: readonly SecretDirectory[];
  /**
   * The ServiceAccount the pod runs as, its token mounted: only for a component that talks to the
   * API server itself (three database replicas: Patroni). Absent: the namespace's default
   * account, no token mounted.
   */
  serviceAccount?: string;
  /**
   * A second container from the same image (the database's pgBackRest server, backup.ts): its
   * command, ports, probes and environment; it mounts what the first one mounts (/tmp, the data
   * volume, the Secret directory), under the same security context.
   */
  sidecar?: Sidecar;
  /**
   * An init container from the same image (the database's restore, restore.ts): it mounts what
   * the first container mounts but the Secret directory, and a Secret directory of its own (optional:
   * a missing Secret does not keep the pod from starting), under the same security context and
   * with the same resources.
   */
  init?: InitContainer;
}

export interface SecretDirectory {
  secret: string;
  mountPath: string;
}

export interface InitContainer {
  name: string;
  command: string[];
  environment: readonly V1EnvVar[];
  secretDirectory: SecretDirectory;
}

export interface Sidecar {
  name: string;
  command: string[];
  ports: readonly NamedPort[];
  readinessProbe: V1Probe;
  livenessProbe: V1Probe;
  environment: readonly V1EnvVar[];
}

/**
 * What a workload's pods take from the spec: a component's own image, resources and placement; the
 * backup repository host runs the database's image where the database may run (its placement),
 * with the namespace's default resources.
 */
function workloadSpec(instance: Instance, workload: WorkloadName): { image: string; resources?: ResourceRequirements; placement: Instance['spec']['database']['placement'] } {
  const component = workload === 'backup' ? 'database' : workload;
  const spec = instance.spec[component];
  return { image: componentImage(instance, component), ...(workload === 'backup' ? {} : { resources: spec.resources }), placement: spec.placement };
}

/** `spec.<component>.image`, else `<registry>/iot-<component>:<version>` (no registry: `iot-<component>:<version>`). */
export function componentImage(instance: Instance, component: ComponentName): string {
  const override = instance.spec[component].image;
  if (override) return override;
  const name = `iot-${component}:${instance.spec.version}`;
  return instance.registry ? `${instance.registry}/${name}` : name;
}

/**
 * The paths an HTTP probe may ask: the health endpoints of gateway, core and processing,
 * nats-server's (the broker's readiness, broker-rollout.ts: /healthz in full, or only until
 * JetStream is up), and
 * Patroni's (three database replicas): /readiness once PostgreSQL runs, /liveness while
 * Patroni's loop does (not PostgreSQL's port: a standby being copied or rewound has none open).
 */
export type ProbePath = '/healthz' | '/readyz' | '/healthz?js-enabled-only=true' | '/readiness' | '/liveness';

/** HTTP probe on `port`. */
export function httpProbe(path: ProbePath, port: number, kind: 'readiness' | 'liveness'): V1Probe {
  return {
    httpGet: { path, port, scheme: 'HTTP' },
    ...probeTiming(kind),
  };
}

export function tcpProbe(port: number, kind: 'readiness' | 'liveness'): V1Probe {
  return { tcpSocket: { port }, ...probeTiming(kind) };
}

/**
 * Readiness is asked every 2 s and lost after 2 failures: a component that cannot reach what it
 * needs (a database or broker pod that restarted, before the network policy admits its new
 * address) leaves its Service and shows in the instance's status within seconds, not after the
 * outage is over. Liveness is slower: a restart is the last resort.
 */
function probeTiming(kind: 'readiness' | 'liveness'): V1Probe {
  return kind === 'readiness'
    ? { periodSeconds: 2, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 2 }
    : { initialDelaySeconds: 15, periodSeconds: 10, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 };
}

/** core/v1 ResourceRequirements in canonical form; undefined when nothing is set. */
export function canonicalResources(resources: ResourceRequirements | undefined): V1ResourceRequirements | undefined {
  const out: V1ResourceRequirements = {};
  if (resources?.limits && Object.keys(resources.limits).length > 0) out.limits = canonicalResourceList(resources.limits);
  if (resources?.requests && Object.keys(resources.requests).length > 0) {
    out.requests = canonicalResourceList(resources.requests);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function sortedMap(map: Readonly<Record<string, string>> | undefined): Record<string, string> | undefined {
  if (!map || Object.keys(map).length === 0) return undefined;
  return Object.fromEntries(
    Object.keys(map)
      .sort()
      .map((k) => [k, map[k] ?? '']),
  );
}

function containerPorts(ports: readonly NamedPort[]): V1ContainerPort[] {
  return ports.map((p) => ({ name: p.name, containerPort: p.port, protocol: p.protocol }));
}

function environment(configMountPath: string, runtime: ContainerRuntime): V1EnvVar[] {
  return [
    { name: 'IOT_CONFIG_FILE', value: configMountPath },
    ...runtime.credentials.map((credential) => ({
      name: CREDENTIAL_ENV[credential],
      valueFrom: { secretKeyRef: { name: CREDENTIALS_SECRET_NAME, key: CREDENTIAL_KEYS[credential] } },
    })),
    ...(runtime.environment ?? []).map((variable) => ({ ...variable })),
  ];
}

/** What a pod template carries so that a change of it rolls the pods. */
export interface TemplateRolls {
  /** The checksum of config.yml: only for the components that read it. */
  configChecksum?: string;
  /** The rotation the credentials were last made for (secrets.ts `credentialsRotation`), if any. */
  credentialsRotation?: string;
  /** A checksum of Secrets read into environment variables (the backup repository host's S3 Secret), if any. */
  secretChecksum?: string;
}

/**
 * The pod template of `component`. `dataVolume`: for StatefulSets without storage, the emptyDir
 * `data` volume; with storage the volume comes from the claim template and is not listed here.
 * `rolls.configChecksum` (of config.yml) is given for the components that read config.yml and put
 * on their template, so a configuration change rolls their pods; undefined: no annotation, and a
 * configuration change leaves the pods running. `rolls.credentialsRotation` and
 * `rolls.secretChecksum` are put on it likewise.
 */
export function desiredPodTemplate(
  instance: Instance,
  component: WorkloadName,
  runtime: ContainerRuntime,
  rolls: TemplateRolls,
  options: { dataEmptyDir: boolean } = { dataEmptyDir: false },
): V1PodTemplateSpec {
  const spec = workloadSpec(instance, component);
  const volumeMounts: V1VolumeMount[] = [
    { name: CONFIG_VOLUME, mountPath: instance.configMountPath, subPath: CONFIG_FILE_KEY, readOnly: true },
    { name: TMP_VOLUME, mountPath: '/tmp' },
  ];
  if (runtime.dataPath) volumeMounts.push({ name: DATA_VOLUME, mountPath: runtime.dataPath });
  const secretDirectories = runtime.secretDirectories ?? [];
  for (const { secret, mountPath } of secretDirectories) volumeMounts.push({ name: secret, mountPath, readOnly: true });

  const volumes: V1Volume[] = [
    { name: CONFIG_VOLUME, configMap: { name: CONFIG_MAP_NAME, defaultMode: 0o444 } },
    { name: TMP_VOLUME, emptyDir: { sizeLimit: TMP_SIZE_LIMIT } },
  ];
  if (runtime.dataPath && options.dataEmptyDir) volumes.push({ name: DATA_VOLUME, emptyDir: {} });
  for (const { secret } of secretDirectories) volumes.push({ name: secret, secret: { secretName: secret, defaultMode: 0o440 } });

  const resources = canonicalResources(spec.resources);
  const securityContext = {
    runAsNonRoot: true,
    runAsUser: POD_USER_ID,
    runAsGroup: POD_USER_ID,
    readOnlyRootFilesystem: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  };
  const container: V1Container = {
    name: component,
    image: spec.image,
    imagePullPolicy: 'IfNotPresent',
    ...(runtime.command ? { command: [...runtime.command] } : {}),
    ...(runtime.ports.length > 0 ? { ports: containerPorts(runtime.ports) } : {}),
    env: environment(instance.configMountPath, runtime),
    ...(resources ? { resources } : {}),
    volumeMounts,
    readinessProbe: runtime.readinessProbe,
    livenessProbe: runtime.livenessProbe,
    securityContext,
  };
  const init = runtime.init;
  if (init) volumes.push({ name: init.secretDirectory.secret, secret: { secretName: init.secretDirectory.secret, defaultMode: 0o440, optional: true } });
  const initContainer: V1Container | undefined = init && {
    name: init.name,
    image: spec.image,
    imagePullPolicy: 'IfNotPresent',
    command: [...init.command],
    env: init.environment.map((variable) => ({ ...variable })),
    ...(resources ? { resources: structuredClone(resources) } : {}),
    volumeMounts: [
      ...volumeMounts.filter((mount) => !secretDirectories.some(({ secret }) => secret === mount.name)).map((mount) => ({ ...mount })),
      { name: init.secretDirectory.secret, mountPath: init.secretDirectory.mountPath, readOnly: true },
    ],
    securityContext: structuredClone(securityContext),
  };
  const sidecar = runtime.sidecar;
  const sidecarContainer: V1Container | undefined = sidecar && {
    name: sidecar.name,
    image: spec.image,
    imagePullPolicy: 'IfNotPresent',
    command: [...sidecar.command],
    ...(sidecar.ports.length > 0 ? { ports: containerPorts(sidecar.ports) } : {}),
    env: sidecar.environment.map((variable) => ({ ...variable })),
    volumeMounts: volumeMounts.map((mount) => ({ ...mount })),
    readinessProbe: sidecar.readinessProbe,
    livenessProbe: sidecar.livenessProbe,
    securityContext: structuredClone(securityContext),
  };

  const { nodeSelector: selector, tolerations, affinity } = spec.placement ?? {};
  const nodeSelector = sortedMap(selector);
  const annotations = {
    ...(rolls.configChecksum === undefined ? {} : { [CONFIG_CHECKSUM_ANNOTATION]: rolls.configChecksum }),
    ...(rolls.credentialsRotation === undefined ? {} : { [CREDENTIALS_ROTATION_ANNOTATION]: rolls.credentialsRotation }),
    ...(rolls.secretChecksum === undefined ? {} : { [SECRET_CHECKSUM_ANNOTATION]: rolls.secretChecksum }),
  };
  return {
    metadata: {
      labels: componentLabels(instance, component),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    spec: {
      ...(runtime.serviceAccount ? { serviceAccountName: runtime.serviceAccount, automountServiceAccountToken: true } : { automountServiceAccountToken: false }),
      enableServiceLinks: false,
      imagePullSecrets: [{ name: IMAGE_PULL_SECRET_NAME }],
      securityContext: {
        runAsNonRoot: true,
        runAsUser: POD_USER_ID,
        runAsGroup: POD_USER_ID,
        fsGroup: POD_USER_ID,
        // A volume's ownership and modes are changed only when its root does not match: a
        // PostgreSQL data directory keeps the 0700 it needs.
        ...(runtime.dataPath ? { fsGroupChangePolicy: 'OnRootMismatch' } : {}),
        seccompProfile: { type: 'RuntimeDefault' },
      },
      ...(nodeSelector ? { nodeSelector } : {}),
      ...(tolerations && tolerations.length > 0 ? { tolerations: tolerations.map((t) => ({ ...t })) } : {}),
      ...(affinity && Object.keys(affinity).length > 0 ? { affinity: structuredClone(affinity) } : {}),
      ...(initContainer ? { initContainers: [initContainer] } : {}),
      containers: sidecarContainer ? [container, sidecarContainer] : [container],
      volumes,
    },
  };
}
