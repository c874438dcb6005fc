import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { CHILD_KINDS, PATRONI_RULES } from '../src/resources/index.ts';

const read = (file: string) => readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };

function allowed(rules: Rule[], group: string, resource: string, verb: string): boolean {
  return rules.some((r) => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb));
}

describe('deploy artefacts', () => {
  const [role, landscapeRole] = parseAllDocuments(read('deploy/role.yml')).map((d) => d.toJSON() as { kind: string; metadata: { namespace?: string }; rules: Rule[] });
  if (!role || !landscapeRole) throw new Error('deploy/role.yml holds a ClusterRole and a Role');

  it('the ClusterRole lets the operator create and apply every child kind, and watch what it caches', () => {
    assert.equal(role.kind, 'ClusterRole');
    for (const child of CHILD_KINDS) {
      const group = child.apiVersion.includes('/') ? child.apiVersion.split('/')[0]! : '';
      for (const verb of ['get', 'list', 'watch', 'create', 'patch']) assert.ok(allowed(role.rules, group, child.plural, verb), `${verb} ${child.plural}`);
    }
    for (const verb of ['list', 'watch']) assert.ok(allowed(role.rules, '', 'pods', verb), `${verb} pods`);
    assert.ok(allowed(role.rules, '', 'namespaces', 'delete'));
    assert.ok(allowed(role.rules, '', 'events', 'create'));
  });

  it('what the operator needs only in its landscape is in a Role there, not in the ClusterRole', () => {
    assert.deepEqual([landscapeRole.kind, landscapeRole.metadata.namespace], ['Role', 'devawsk8s']);
    const landscapeOnly = [
      ['cp.iotservices.io', 'iotservices', 'patch'],
      ['cp.iotservices.io', 'iotservices/status', 'patch'],
      ['coordination.k8s.io', 'leases', 'update'],
      ['cert-manager.io', 'certificates', 'patch'],
      ['cert-manager.io', 'certificates', 'delete'],
      ['cert-manager.io', 'issuers', 'get'],
    ] as const;
    for (const [group, resource, verb] of landscapeOnly) {
      assert.ok(allowed(landscapeRole.rules, group, resource, verb), `${verb} ${resource} in the Role`);
      assert.ok(!role.rules.some((r) => r.apiGroups.includes(group) && r.resources.includes(resource)), `no ${resource} in the ClusterRole`);
    }
    assert.ok(allowed(landscapeRole.rules, '', 'secrets', 'delete'), 'delete secrets in the Role (those cert-manager issued into)');
    assert.ok(!allowed(role.rules, '', 'secrets', 'delete'), 'but nowhere else');
  });

  it('the admission policy confines the operator’s ServiceAccount and is bound with Deny', () => {
    const [policy, binding] = parseAllDocuments(read('deploy/admission_policy.yml')).map((d) => d.toJSON() as { kind: string; metadata: { name: string }; spec: Record<string, unknown> });
    assert.equal(policy?.kind, 'ValidatingAdmissionPolicy');
    assert.equal(binding?.kind, 'ValidatingAdmissionPolicyBinding');
    assert.equal(binding?.spec['policyName'], policy?.metadata.name);
    assert.deepEqual(binding?.spec['validationActions'], ['Deny']);
    assert.equal(policy?.spec['failurePolicy'], 'Fail');
  });

  it('the ClusterRole is least privilege: no wildcards, no deletes but of namespaces and of pods (restarting stuck ones), no pod creation; pod changes only as Patroni needs them', () => {
    for (const rule of role.rules) {
      assert.ok(!rule.verbs.includes('*') && !rule.resources.includes('*') && !rule.apiGroups.includes('*'), `wildcard in ${JSON.stringify(rule)}`);
      if (rule.verbs.includes('delete')) assert.ok(['namespaces', 'pods'].includes(rule.resources.join()), `delete only of namespaces or pods: ${JSON.stringify(rule)}`);
    }
    assert.ok(allowed(role.rules, '', 'pods', 'delete'), 'delete pods (pod-restarts.ts)');
    assert.ok(!allowed(role.rules, '', 'pods', 'create'), 'no create pods');
    for (const rule of PATRONI_RULES ?? []) {
      for (const verb of rule.verbs) assert.ok(allowed(role.rules, '', rule.resources![0]!, verb), `${verb} ${rule.resources}: the operator holds what it grants Patroni`);
    }
  });

  it('the Helm chart carries the same rules, admission policy checks and CRD as deploy/', () => {
    const rules = (text: string) => parse(text.slice(text.indexOf('rules:'), text.indexOf('---') > 0 ? text.indexOf('---') : undefined)) as { rules: Rule[] };
    assert.deepEqual(rules(read('chart/iot-operator/templates/clusterrole.yaml')).rules, role.rules);
    assert.deepEqual(rules(read('chart/iot-operator/templates/role.yaml')).rules, landscapeRole.rules);
    const checks = (text: string) => text.slice(text.indexOf('  variables:'), text.indexOf('---'));
    assert.equal(checks(read('chart/iot-operator/templates/admissionpolicy.yaml')), checks(read('deploy/admission_policy.yml')));
    assert.equal(read('chart/iot-operator/crds/iotservices.cp.iotservices.io.yaml'), read('deploy/crds/iotservices.cp.iotservices.io.yaml'));
  });

  it('operator.yml runs the operator as the seed describes: REPLACE_VERSION, OPERATOR_NAME from its namespace, hardened', () => {
    const operator = parseAllDocuments(read('deploy/operator.yml'))[0]!.toJSON() as {
      spec: { template: { spec: { serviceAccountName: string; securityContext: { runAsNonRoot: boolean }; containers: Array<{ image: string; env: Array<{ name: string; value?: string; valueFrom?: { fieldRef: { fieldPath: string } } }>; securityContext: Record<string, unknown> }> } } };
    };
    const pod = operator.spec.template.spec;
    const container = pod.containers[0]!;
    assert.match(container.image, /:REPLACE_VERSION$/);
    assert.equal(pod.serviceAccountName, 'iot-operator');
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(container.securityContext['readOnlyRootFilesystem'], true);
    assert.equal(container.env.find((e) => e.name === 'OPERATOR_NAME')?.valueFrom?.fieldRef.fieldPath, 'metadata.namespace');
    assert.equal(container.env.find((e) => e.name === 'WATCH_NAMESPACE')?.value, '');
  });

  it('operator.yml serves the webhooks through its Service, with a certificate the operator keeps in a Secret its admission policy lets it write', () => {
    const [operator, service] = parseAllDocuments(read('deploy/operator.yml')).map((d) => d.toJSON()) as [
      { kind: string; spec: { template: { metadata: { labels: Record<string, string> }; spec: { containers: Array<{ args: string[]; ports: Array<{ name: string; containerPort: number }> }> } } } },
      { kind: string; metadata: { name: string; namespace: string }; spec: { selector: Record<string, string>; ports: Array<{ targetPort: string }>; publishNotReadyAddresses?: boolean } },
    ];
    assert.deepEqual([operator.kind, service.kind], ['Deployment', 'Service']);
    const container = operator.spec.template.spec.containers[0]!;
    const flag = (name: string) => container.args.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
    assert.equal(flag('conversion-service'), `${service.metadata.namespace}/${service.metadata.name}`);
    assert.equal(service.metadata.namespace, 'devawsk8s');
    for (const [key, value] of Object.entries(service.spec.selector)) assert.equal(operator.spec.template.metadata.labels[key], value, `the Service selects the operator's pods (${key})`);
    assert.ok(container.ports.some((p) => p.name === service.spec.ports[0]!.targetPort), 'the Service targets the container’s webhook port');
    assert.equal(service.spec.publishNotReadyAddresses, undefined, 'a terminating pod leaves the endpoints at once, not when its process has exited');
    assert.match(flag('webhook-cert-dir') ?? '', /^\/tmp\//, 'the certificate is written under the writable /tmp');
    const secret = flag('webhook-cert-secret');
    assert.ok(secret, '--webhook-cert-secret');
    assert.ok(read('deploy/admission_policy.yml').includes(`request.resource.resource == 'secrets' && request.name == '${secret}'`), 'the admission policy lets the operator write that Secret, and no other, in its landscape');
  });

  it('namespace.yml provides the landscape namespace and its image-pull-secret; the image runs the bundled operator unprivileged', () => {
    const docs = parseAllDocuments(read('deploy/namespace.yml')).map((d) => d.toJSON() as { kind: string; metadata: { name: string } });
    assert.deepEqual(docs.map((d) => `${d.kind}/${d.metadata.name}`), ['Namespace/devawsk8s', 'Secret/image-pull-secret']);
    const dockerfile = read('Dockerfile');
    assert.match(dockerfile, /^USER 1000/m);
    assert.match(dockerfile, /RUN node --import tsx images\/bundle\.ts iot/);
  });
});
