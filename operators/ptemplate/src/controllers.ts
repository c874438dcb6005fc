/**
 * Every controller of the ptemplate operator, and the client calls they make beyond what their
 * `for`, `owns` and `watches` imply. `operator-ts generate rbac` records what
 * `registerControllers` declares (called with the manager alone: the default settings) and
 * writes deploy/role.yml and role_binding.yml from it; `npm run generate` runs it, and its check
 * fails while the committed files differ.
 */
import type { ExtraPermission, Manager } from '@iot-operator/runtime';
import { registerPtemplateController, type PtemplateControllerOptions } from './controller.ts';
import { Module } from './resources/module.ts';

export const extraPermissions: ExtraPermission[] = [
  {
    type: Module,
    verbs: ['get', 'list', 'watch', 'create', 'patch'],
    reason: 'the KMM Module of each Ptemplate, applied and watched once its API exists (kmm.ts lists one to find out)',
  },
];

export function registerControllers(mgr: Manager, options: PtemplateControllerOptions = {}): void {
  registerPtemplateController(mgr, options);
}
