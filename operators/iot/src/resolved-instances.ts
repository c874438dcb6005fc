/**
 * Per IoTService, its instance as last resolved (`resolveInstance`: the spec validated and
 * defaulted, the instance namespace, the tenant policy applied), or why it could not be.
 *
 * Guarantees: a resolution depends only on the IoTService's name, uid and spec and on the
 * operator's configuration, which is fixed for the life of a controller. The API server raises
 * `metadata.generation` on every change of a custom resource's spec, so an IoTService of the same
 * uid and generation resolves to the same result, and that result is returned without validating
 * the spec again (≈ 0.14 ms per reconcile otherwise; an instance is reconciled ≈ 25 times while
 * its pods start).
 * A new uid or generation resolves afresh; `forget` drops an instance (deleted or gone).
 */
import type { IoTService } from './api/iotservice.ts';
import { resolveInstance, type OperatorConfig, type ResolveResult } from './resources/instance.ts';

export class ResolvedInstances {
  private readonly byInstance = new Map<string, { key: string; result: ResolveResult }>();

  constructor(private readonly config: OperatorConfig) {}

  resolve(instanceKey: string, iotService: Pick<IoTService, 'metadata' | 'spec'>): ResolveResult {
    const { uid, generation } = iotService.metadata;
    // Without a uid or generation (not from the API server) nothing identifies the spec.
    if (uid === undefined || generation === undefined) return resolveInstance(iotService, this.config);
    const key = `${uid}/${generation}`;
    const last = this.byInstance.get(instanceKey);
    if (last?.key === key) return last.result;
    const result = resolveInstance(iotService, this.config);
    this.byInstance.set(instanceKey, { key, result });
    return result;
  }

  forget(instanceKey: string): void {
    this.byInstance.delete(instanceKey);
  }
}
