/**
 * Every controller of the IoT operator — the IoTService controller, the ingestion monitor that
 * reads each instance's broker for it (ingestion.ts), and the clean-up of orphaned instance
 * namespaces — and the client calls they make beyond what their `for` and `watches`
 * imply.
 *
 * The operator's RBAC is not generated from these: it is split on purpose (deploy/role.yml: a
 * ClusterRole for instance namespaces and their children, whose writes the admission policy
 * confines to this landscape, and a Role in the landscape; docs/iotservice.md), a shape no
 * generated Role has. test/rbac-declarations.unit.test.ts checks instead that it grants every
 * rule operator-ts's generator computes from what is declared here, so a call added to the code
 * and declared here cannot be missing from the RBAC.
 */
import { Kinds, type ExtraPermission, type Manager } from '@iot-operator/runtime';
import { registerIoTController } from './controller.ts';
import { registerIngestionMonitor, type IngestionMonitor } from './ingestion.ts';
import { CHILD_TYPES, CertificateType, ClusterIssuerType, IoTServiceType, IssuerType, StorageClassType, type IoTControllerConfig } from './iotservice-types.ts';
import { registerOrphanedNamespaceCleanup } from './orphaned-namespaces.ts';

export const extraPermissions: ExtraPermission[] = [
  { type: IoTServiceType, verbs: ['patch'], reason: 'the cleanup finalizer, added and removed with JSON patches' },
  {
    type: Kinds.Namespace,
    verbs: ['create', 'update', 'patch', 'delete'],
    reason: 'instance namespaces: created (never applied, so a foreign one is not adopted), kept as declared, deleted with their IoTService or when orphaned',
  },
  ...Object.values(CHILD_TYPES)
    .filter((type) => type !== Kinds.Namespace)
    .map((type) => ({
      type,
      verbs: ['create', 'update', 'patch'],
      reason: 'children in instance namespaces: server-side applied, replaced when apply cannot converge; the credentials Secret created, then only completed with keys it lacks',
    })),
  {
    type: Kinds.Pod,
    verbs: ['delete'],
    reason: 'pods that cannot come up by themselves although the cause was fixed (pod-restarts.ts): waiting for their image once the image-pull-secret changed, or stuck on an earlier StatefulSet revision',
  },
  {
    type: Kinds.Pod,
    verbs: ['update', 'patch'],
    reason: "never called: granted to three database replicas' Patroni by their Role (patroni.ts), which the operator may give only when it holds them",
  },
  {
    type: Kinds.Pod,
    verbs: ['get'],
    reason: "pod database-0 of an instance being restored (spec.restore): its init container's termination message, which the pod cache does not keep",
  },
  {
    type: StorageClassType,
    verbs: ['get'],
    reason: "the StorageClass a pod's unbound claim names, looked up to report one that does not exist",
  },
  {
    type: Kinds.CustomResourceDefinition,
    verbs: ['get', 'patch'],
    reason: "the IoTService CRD's conversion, kept pointed at the operator's webhook Service (crd-conversion.ts; the RBAC names iotservices.cp.iotservices.io only)",
  },
  { type: Kinds.Service, verbs: ['get'], reason: "the Service the IoTService CRD's conversion names, in any landscape: does it exist" },
  {
    type: CertificateType,
    verbs: ['patch', 'delete'],
    reason: "the gateway's cert-manager Certificate in the landscape (spec.gateway.tls.issuerRef): server-side applied; deleted when no longer used",
  },
  { type: IssuerType, verbs: ['get'], reason: 'the Issuer spec.gateway.tls.issuerRef names, in the landscape: looked up while its Certificate is not ready' },
  { type: ClusterIssuerType, verbs: ['get'], reason: 'the ClusterIssuer spec.gateway.tls.issuerRef names: looked up while its Certificate is not ready' },
  { type: Kinds.Secret, verbs: ['delete'], reason: 'the Secret cert-manager issued into, in the landscape: deleted with its Certificate' },
  { type: Kinds.Secret, verbs: ['get'], reason: 'the Secret spec.backup.target.s3.credentialsSecret names, in the landscape: read each reconcile, copied into Secret backup-s3' },
  { type: Kinds.EndpointSlice, verbs: ['list'], reason: "that Service's EndpointSlices: has it a ready endpoint (another landscape's operator serving the conversion)" },
];

/**
 * Registers every controller; returns the ingestion monitor, whose readings the instance metrics
 * export. A shard of a ControllerRing runs none: it caches no pods, so it could read no broker,
 * and a second controller of IoTServices would keep working on objects the shard handed back.
 */
export function registerControllers(mgr: Manager, config: IoTControllerConfig, syncPeriodMs?: number): IngestionMonitor | undefined {
  // A changed ingestion state changes the status: the IoTService is looked at again.
  const ingestion = config.shard ? undefined : registerIngestionMonitor(mgr, config, (instance) => iot.enqueue(instance));
  const iot = registerIoTController(mgr, config, syncPeriodMs, ingestion);
  registerOrphanedNamespaceCleanup(mgr, config);
  return ingestion;
}
