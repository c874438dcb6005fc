/**
 * The desired KMM Module of a Ptemplate: a pure function of the object.
 *
 * Guarantees: `desiredModule(pt)` is a `kmm.sigs.x-k8s.io/v1beta1` Module named after the
 * Ptemplate, in its namespace, with a controller ownerReference to it, that
 * - loads kernel module `pt` with modprobe parameters `max_dev=<maxdev>` and, when set,
 *   `default_msg=<defaultmsg>`, from `moduleImage` for every kernel (`regexp: ^.+$`);
 * - runs the pt device plugin (`devicePluginImage`), which advertises the devices as the
 *   extended resource `example.com/ptemplate`;
 * - pulls images with `imageRepoSecret` when given, on the nodes matching `selector`.
 * It carries the desired-hash stamp (`withDesiredHash`), so a field dropped from it (a selector
 * key, the pull secret, a modprobe parameter) is a difference for `childDifference`.
 */

import { customResource, withDesiredHash, type KubeObject } from '@iot-operator/runtime';
import type { PtemplateObject } from '../api/ptemplate.ts';
import { ownerReferenceTo, ptemplateLabels } from './owner.ts';

export const KMM_GROUP = 'kmm.sigs.x-k8s.io';
export const KMM_VERSION = 'v1beta1';
/** The runtime's resource type for KMM Modules (namespaced). */
export const Module = customResource(KMM_GROUP, KMM_VERSION, 'Module', 'modules');
export const MODULE_CRD_NAME = `modules.${KMM_GROUP}`;
export const KERNEL_MODULE_NAME = 'pt';
/** Matches every kernel: the module image is built per kernel version (${KERNEL_FULL_VERSION}). */
export const ANY_KERNEL = '^.+$';

export interface ModuleSpec {
  moduleLoader: {
    container: {
      modprobe: { moduleName: string; parameters: string[] };
      kernelMappings: Array<{ regexp: string; containerImage: string }>;
    };
  };
  devicePlugin: { container: { image: string } };
  imageRepoSecret?: { name: string };
  selector: Record<string, string>;
}

export interface ModuleObject extends KubeObject {
  spec?: ModuleSpec;
  status?: unknown;
}

export function moduleParameters(pt: PtemplateObject): string[] {
  const parameters = [`max_dev=${pt.spec.maxdev}`];
  if (pt.spec.defaultmsg) parameters.push(`default_msg=${pt.spec.defaultmsg}`);
  return parameters;
}

export function desiredModule(pt: PtemplateObject): ModuleObject {
  const name = pt.metadata.name ?? '';
  return withDesiredHash<ModuleObject>({
    apiVersion: `${KMM_GROUP}/${KMM_VERSION}`,
    kind: 'Module',
    metadata: { name, namespace: pt.metadata.namespace, labels: ptemplateLabels(name), ownerReferences: [ownerReferenceTo(pt)] },
    spec: {
      moduleLoader: {
        container: {
          modprobe: { moduleName: KERNEL_MODULE_NAME, parameters: moduleParameters(pt) },
          kernelMappings: [{ regexp: ANY_KERNEL, containerImage: pt.spec.moduleImage }],
        },
      },
      devicePlugin: { container: { image: pt.spec.devicePluginImage } },
      ...(pt.spec.imageRepoSecret ? { imageRepoSecret: { name: pt.spec.imageRepoSecret.name } } : {}),
      selector: { ...pt.spec.selector },
    },
  });
}
