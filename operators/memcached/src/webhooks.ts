/**
 * Every webhook of the operator. `operator-ts create webhook` adds its kind at the markers
 * below; `operator-ts generate webhook` writes deploy/webhook.yaml (the webhook configurations
 * and their Service) for the same kinds, from operator-ts.json.
 * The operator serves them when started with --webhook-cert-dir (options.ts).
 */
import type { Manager } from '@iot-operator/runtime';
import { registerMemcachedWebhooks } from './webhooks/memcached.ts';
// operator-ts:webhook-imports

/** The kinds whose webhooks registerWebhooks serves. */
export const webhookKinds: string[] = [
  'Memcached',
  // operator-ts:webhook-kinds
];

export function registerWebhooks(mgr: Manager): void {
  registerMemcachedWebhooks(mgr);
  // operator-ts:webhooks
}
