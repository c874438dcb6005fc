/**
 * Records what controllers declare: a registration function (an operator's `registerControllers`)
 * runs against a manager that records instead of running, while the runtime's ControllerBuilder
 * notes every `for`, `owns`, `watches` and `watchesSelected` call and which builder made it.
 *
 * Guarantees: nothing connects to a cluster and no controller starts (the manager's cache hands
 * out inert informers, `addController` keeps nothing); the builder's methods are restored when
 * the registration returns or throws, so recording can run inside a test process; each
 * declaration carries the type's group, kind, plural and scope only, and the number of the
 * controller (builder) that made it, in the order the controllers first declared something.
 */
import type { ControllerDeclaration, DeclaredType } from './rbac.ts';

/** The part of @iot-operator/runtime the recorder uses, as the project's own copy exports it. */
export interface RecordableRuntime {
  ControllerBuilder: { prototype: object };
  RuntimeMetrics: new () => unknown;
}

export function declaredType(type: DeclaredType): DeclaredType {
  return { group: type.group, kind: type.kind, plural: type.plural, namespaced: type.namespaced };
}

const ROLES: Record<string, ControllerDeclaration['role']> = { for: 'for', owns: 'owns', watches: 'watches', watchesSelected: 'watches' };

export function recordControllers(runtime: RecordableRuntime, register: (mgr: unknown) => void): ControllerDeclaration[] {
  const builder = runtime.ControllerBuilder.prototype as Record<string, (...args: unknown[]) => unknown>;
  const originals = Object.fromEntries(Object.keys(ROLES).map((method) => [method, builder[method]!]));
  const controllers = new Map<unknown, number>();
  const declarations: ControllerDeclaration[] = [];
  for (const [method, role] of Object.entries(ROLES)) {
    const original = originals[method]!;
    builder[method] = function (this: unknown, ...args: unknown[]) {
      if (!controllers.has(this)) controllers.set(this, controllers.size);
      declarations.push({ controller: controllers.get(this)!, role, type: declaredType(args[0] as DeclaredType) });
      return original.apply(this, args);
    };
  }
  const informer = { store: { keys: () => [] }, addHandler: () => undefined, isSynced: false };
  const logger = { child: () => logger, info: () => undefined, debug: () => undefined, warn: () => undefined, error: () => undefined };
  const recordingManager = {
    cache: { informer: () => informer },
    client: {},
    metrics: new runtime.RuntimeMetrics(),
    logger,
    recorder: {},
    addController: () => undefined,
  };
  try {
    register(recordingManager);
  } finally {
    Object.assign(builder, originals);
  }
  return declarations;
}
