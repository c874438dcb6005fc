/**
 * Every controller of the memcached operator, and the client calls they make beyond what their
 * `for`, `owns` and `watches` imply (none). `operator-ts generate rbac` records what
 * `registerControllers` declares and writes deploy/role.yaml and role_binding.yaml from it;
 * `npm run generate` runs it, and its check fails while the committed files differ.
 */
import type { ExtraPermission, Manager } from '@iot-operator/runtime';
import { registerMemcachedController, type MemcachedControllerOptions } from './controller.ts';

export const extraPermissions: ExtraPermission[] = [];

/** `options` (how many Memcacheds are reconciled in parallel) changes no permission. */
export function registerControllers(mgr: Manager, options: MemcachedControllerOptions = {}): void {
  registerMemcachedController(mgr, options);
}
