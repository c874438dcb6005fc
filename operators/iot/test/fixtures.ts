/**
 * Test fixtures: a resolved instance built the way the controller builds it, and credentials
 * with a recognisable value per key.
 */

import type { IoTService } from '../src/api/iotservice.ts';
import { resolveInstance, type Instance, type OperatorConfig } from '../src/resources/instance.ts';
import { defaultTenantPolicy } from '../src/resources/tenant-policy.ts';
import { GATEWAY_CERTIFICATE_PROFILE, gatewayCertificateNames, instanceCaMaterial, type GatewayTlsMaterial } from '../src/resources/gateway-tls.ts';
import { BACKUP_CERTIFICATE_PROFILE, backupCertificateNames } from '../src/resources/backup.ts';
import { keepOrIssue, type CaCertificates } from '../src/resources/instance-ca.ts';
import { CREDENTIAL_KEYS, type CredentialName, type IoTCredentials } from '../src/resources/secrets.ts';

export const TEST_CONFIG: OperatorConfig = { operatorName: 'devawsk8s', defaultRegistry: 'registry.example.com/iot' };

/**
 * An operator that lets IoTService authors ask for any registry below `mirror.local:5000` or
 * `custom`, any Service type, any toleration and any node label.
 */
export const PERMISSIVE_CONFIG: OperatorConfig = {
  ...TEST_CONFIG,
  tenancy: {
    ...defaultTenantPolicy(TEST_CONFIG.defaultRegistry),
    allowedRegistries: [TEST_CONFIG.defaultRegistry, 'mirror.local:5000', 'custom'],
    allowedServiceTypes: ['ClusterIP', 'NodePort', 'LoadBalancer'],
    allowedTolerationKeys: ['*'],
    allowedNodeLabelKeys: ['*'],
  },
};

/** Credentials whose value names their credential: `<name>-value`. */
export const TEST_CREDENTIALS: IoTCredentials = Object.fromEntries((Object.keys(CREDENTIAL_KEYS) as CredentialName[]).map((name) => [name, `${name}-value`])) as IoTCredentials;

export function iotService(name: string, spec: Record<string, unknown>, generation = 1): IoTService {
  return {
    apiVersion: 'cp.iotservices.io/v1beta1',
    kind: 'IoTService',
    metadata: { name, namespace: TEST_CONFIG.operatorName, generation, uid: `uid-of-${name}` },
    spec: spec as IoTService['spec'],
  };
}

/** A resolved instance `tenant-a` with the given spec (version 2.4.1 unless given). */
export function testInstance(spec: Record<string, unknown> = {}, config: OperatorConfig = TEST_CONFIG): Instance {
  const resolved = resolveInstance(iotService('tenant-a', { version: '2.4.1', ...spec }), config);
  if (!resolved.ok) throw new Error(`fixture does not resolve: ${resolved.failure.message}`);
  return resolved.instance;
}

let gatewayCertificates: CaCertificates | undefined;
/** The gateway's CA and server certificate of `testInstance()`, made once per test process. */
export function testGatewayCertificates(): CaCertificates {
  gatewayCertificates ??= keepOrIssue({}, gatewayCertificateNames(testInstance()), new Date(), GATEWAY_CERTIFICATE_PROFILE).certificates;
  return gatewayCertificates;
}

/** A spec.backup with a volume claim target of `size`. */
export const TEST_BACKUP = { target: { volumeClaim: { size: '10Gi' } } };

let backupCertificates: CaCertificates | undefined;
/** The backups' CA and certificate of `testInstance({ backup: TEST_BACKUP })`, made once per test process. */
export function testBackupCertificates(): CaCertificates {
  backupCertificates ??= keepOrIssue({}, backupCertificateNames(testInstance({ backup: TEST_BACKUP })), new Date(), BACKUP_CERTIFICATE_PROFILE).certificates;
  return backupCertificates;
}

/** The same, as the gateway's TLS material: the server certificate signed by the instance CA. */
export function testGatewayTls(): GatewayTlsMaterial {
  return instanceCaMaterial(testGatewayCertificates());
}
