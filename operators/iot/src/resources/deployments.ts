/**
 * The stateless workloads: Deployments `gateway`, `core` and `processing`.
 *
 * Guarantees: one Deployment per component, named after it, in the instance namespace, with the
 * replicas of the spec, an immutable selector (instance + component), the shared hardened pod
 * template (pod.ts) and an explicit 600 s progress deadline (after which the Deployment reports
 * ProgressDeadlineExceeded and the instance goes Failed). processing rolls with no surge (maxSurge
 * 0, maxUnavailable 1): its replicas share the stream's one durable consumer and write to the one
 * database, and a rollout never adds a writer beyond `spec.processing.replicas` (what a pod had
 * not acknowledged when it stops is handed to the others at once). The gateway exposes exactly the ports of
 * its enabled protocols plus the health port, is told those protocols in IOT_GATEWAY_PROTOCOLS,
 * finds Secret gateway-tls (gateway-tls.ts) mounted read-only at IOT_GATEWAY_TLS_DIR when it
 * serves TLS, is told `spec.gateway.connections` in IOT_GATEWAY_MAX_CONNECTIONS when the spec sets
 * it (unset: the variable is absent and the gateway keeps its default, no cap), and
 * gets the device-check token to check devices against core — never core's api token, which only
 * core gets. Each component gets only its own credentials: its broker user's password (the
 * broker knows the components as users `gateway`, `core` and `processing`, each allowed only
 * what it needs) and, for core and processing, its database role's password (roles `iot_core`
 * and `iot_processing`, neither a superuser nor allowed DDL). The reference images fix those
 * names (iot-credentials holds only passwords).
 */

import type { V1Deployment } from '@kubernetes/client-node';
import { GATEWAY_PROTOCOLS } from '../api/iotservice.ts';
import type { Instance } from './instance.ts';
import { componentLabels, componentSelector } from './labels.ts';
import { desiredPodTemplate, httpProbe, type ContainerRuntime, type TemplateRolls } from './pod.ts';
import { GATEWAY_TLS_DIR, GATEWAY_TLS_SECRET, servesTls } from './gateway-tls.ts';
import { CORE_API_PORT, HEALTH_PORT, gatewayPorts, PORTS } from './ports.ts';

export type DeploymentComponent = 'gateway' | 'core' | 'processing';
export const DEPLOYMENT_COMPONENTS: readonly DeploymentComponent[] = ['gateway', 'core', 'processing'];
export const PROGRESS_DEADLINE_SECONDS = 600;
/** The gateway's enabled protocols, comma-separated in the order mqtt, mqtts, http, https, coap. */
export const GATEWAY_PROTOCOLS_ENV = 'IOT_GATEWAY_PROTOCOLS';
/** Where the gateway reads tls.crt, tls.key and client-ca.crt. */
export const GATEWAY_TLS_DIR_ENV = 'IOT_GATEWAY_TLS_DIR';
/** The most device connections a gateway pod accepts (`spec.gateway.connections`). */
export const GATEWAY_MAX_CONNECTIONS_ENV = 'IOT_GATEWAY_MAX_CONNECTIONS';

const healthProbes = {
  readinessProbe: httpProbe('/readyz', PORTS.health, 'readiness'),
  livenessProbe: httpProbe('/healthz', PORTS.health, 'liveness'),
};

/** The gateway checks devices against core with the device-check token, serves the protocols of IOT_GATEWAY_PROTOCOLS and caps its connections at IOT_GATEWAY_MAX_CONNECTIONS. */
export function gatewayRuntime(instance: Instance): ContainerRuntime {
  const { protocols: enabled, connections } = instance.spec.gateway;
  return {
    ports: [...gatewayPorts(enabled), HEALTH_PORT],
    ...healthProbes,
    credentials: ['deviceCheckToken', 'brokerGatewayPassword'],
    environment: [
      { name: GATEWAY_PROTOCOLS_ENV, value: GATEWAY_PROTOCOLS.filter((p) => enabled.includes(p)).join(',') },
      ...(servesTls(instance) ? [{ name: GATEWAY_TLS_DIR_ENV, value: GATEWAY_TLS_DIR }] : []),
      ...(connections !== undefined ? [{ name: GATEWAY_MAX_CONNECTIONS_ENV, value: String(connections) }] : []),
    ],
    ...(servesTls(instance) ? { secretDirectories: [{ secret: GATEWAY_TLS_SECRET, mountPath: GATEWAY_TLS_DIR }] } : {}),
  };
}

export const CORE_RUNTIME: ContainerRuntime = {
  ports: [CORE_API_PORT, HEALTH_PORT],
  ...healthProbes,
  credentials: ['apiToken', 'deviceCheckToken', 'brokerCorePassword', 'databaseCorePassword'],
};

export const PROCESSING_RUNTIME: ContainerRuntime = {
  ports: [HEALTH_PORT],
  ...healthProbes,
  credentials: ['brokerProcessingPassword', 'databaseProcessingPassword'],
};

/**
 * processing's rollout: an old pod goes before a new one starts, so no more than the spec's
 * writers run. (Not `Recreate`: a Deployment created with the default strategy keeps its
 * rollingUpdate parameters, and the API server refuses them beside type Recreate.)
 */
export const NO_SURGE_STRATEGY = { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } } as const;

function desiredDeployment(
  instance: Instance,
  component: DeploymentComponent,
  runtime: ContainerRuntime,
  rolls: TemplateRolls,
): V1Deployment {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: component, namespace: instance.namespace, labels: componentLabels(instance, component) },
    spec: {
      replicas: instance.spec[component].replicas,
      selector: { matchLabels: componentSelector(instance, component) },
      progressDeadlineSeconds: PROGRESS_DEADLINE_SECONDS,
      ...(component === 'processing' ? { strategy: { type: NO_SURGE_STRATEGY.type, rollingUpdate: { ...NO_SURGE_STRATEGY.rollingUpdate } } } : {}),
      template: desiredPodTemplate(instance, component, runtime, rolls),
    },
  };
}

/** `credentialsRotation`: secrets.ts `credentialsRotation`, when there is one. */
export function desiredGatewayDeployment(instance: Instance, configChecksum: string, credentialsRotation?: string): V1Deployment {
  return desiredDeployment(instance, 'gateway', gatewayRuntime(instance), { configChecksum, credentialsRotation });
}

export function desiredCoreDeployment(instance: Instance, configChecksum: string, credentialsRotation?: string): V1Deployment {
  return desiredDeployment(instance, 'core', CORE_RUNTIME, { configChecksum, credentialsRotation });
}

export function desiredProcessingDeployment(instance: Instance, configChecksum: string, credentialsRotation?: string): V1Deployment {
  return desiredDeployment(instance, 'processing', PROCESSING_RUNTIME, { configChecksum, credentialsRotation });
}
