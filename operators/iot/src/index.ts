/**
 * @iot-operator/iot — what the IoT Service Operator offers those who build on it (benchmarks,
 * tools, tests of their own), as opposed to its internals: the operator itself, its API type,
 * and the pure functions that say what an instance consists of.
 *
 * Guarantees: everything exported here is what the operator itself uses — `desiredChildren` of a
 * `resolveInstance`d IoTService is exactly what the operator applies for it, `CHILD_TYPES` the
 * resource type of each kind of child it applies, `landscapeSelector` and `INSTANCE_LABEL` the
 * labels it selects and marks its children by — so a user's benchmark measures against the
 * operator's own rules rather than a copy of them. Its test kit (`@iot-operator/iot/testing`) installs
 * the IoTService CRD with its conversion served by the calling process.
 */
export { createIoTOperator } from './operator.ts';
export type { OperatorOptions } from './options.ts';
export { CHILD_TYPES, IoTServiceType } from './iotservice-types.ts';
export type { IoTService, IoTServiceSpec, IoTServiceStatus } from './api/iotservice.ts';
export { desiredChildren, type DesiredChild, type DesiredChildren } from './resources/index.ts';
export { resolveInstance, type Instance } from './resources/instance.ts';
export { generateCredentials } from './resources/secrets.ts';
export { GATEWAY_CERTIFICATE_PROFILE, gatewayCertificateNames } from './resources/gateway-tls.ts';
export { keepOrIssue } from './resources/instance-ca.ts';
export { INSTANCE_LABEL, landscapeSelector } from './resources/labels.ts';
