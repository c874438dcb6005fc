/**
 * The files of a new operator project (`operator-ts init`).
 *
 * Guarantees: `initFiles(options)` returns every file of a project that installs, type-checks
 * and passes its own unit and end-to-end tests as generated: an operator with no controllers
 * yet that runs as its ServiceAccount, elects a leader and serves /healthz, /readyz and
 * /metrics. deploy/role.yaml and role_binding.yaml come from the RBAC generator, not from here.
 * dashboards/operator-runtime.json is the runtime's Grafana dashboard as the runtime defines it
 * (the SDK ships a copy, held to packages/runtime/dashboards by a unit test).
 * Paths are relative to the project directory; contents depend only on the options.
 */
import { readFileSync } from 'node:fs';
import { webhooksRegistry } from './webhook.ts';

/** The runtime's Grafana dashboard, from the SDK package's dashboards/ (two levels above src/templates/ and dist/templates/). */
const runtimeDashboard = readFileSync(new URL('../../dashboards/operator-runtime.json', import.meta.url), 'utf8');

export interface InitOptions {
  name: string;
  /** npm specifiers of the two packages the project depends on. */
  runtimeSpec: string;
  sdkSpec: string;
}

export function initFiles(o: InitOptions): Record<string, string> {
  return {
    'package.json': packageJson(o),
    'tsconfig.json': tsconfig,
    '.gitignore': 'node_modules/\n*.log\n',
    '.dockerignore': 'node_modules\ntest\n*.log\n',
    'README.md': readme(o),
    Dockerfile: dockerfile,
    'src/main.ts': main(o),
    'src/operator.ts': operator(o),
    'src/controllers.ts': controllers,
    'src/webhooks.ts': webhooksRegistry,
    'deploy/service_account.yaml': serviceAccount(o),
    'deploy/operator.yaml': deployment(o),
    'deploy/crds/.gitkeep': '',
    'dashboards/operator-runtime.json': runtimeDashboard,
    'test/generated.unit.test.ts': generatedTest,
    'test/operator.e2e.test.ts': operatorE2eTest,
    'test/crds.ts': crdsHelper,
  };
}

function packageJson(o: InitOptions): string {
  const manifest = {
    name: o.name,
    version: '0.1.0',
    private: true,
    type: 'module',
    engines: { node: '>=20' },
    scripts: {
      start: 'operator-ts run',
      test: 'npm run typecheck && npm run test:unit && npm run test:e2e',
      'test:unit': 'node --import tsx --test test/*.unit.test.ts',
      'test:e2e': 'operator-ts cluster exec -- node --import tsx --test --test-concurrency=1 test/*.e2e.test.ts',
      typecheck: 'tsc --noEmit',
      generate: 'operator-ts generate crd && operator-ts generate rbac && operator-ts generate webhook',
      'cluster:up': 'operator-ts cluster up',
      'cluster:down': 'operator-ts cluster down',
      'cluster:status': 'operator-ts cluster status',
    },
    dependencies: {
      '@iot-operator/runtime': o.runtimeSpec,
      '@sinclair/typebox': '~0.34.52',
      tsx: '^4.20.0',
    },
    devDependencies: {
      '@iot-operator/sdk': o.sdkSpec,
      '@types/node': '^20.19.0',
      typescript: '~5.9.3',
    },
  };
  return `${JSON.stringify(manifest, null, 2)}\n`;
}

const tsconfig = `${JSON.stringify(
  {
    compilerOptions: {
      target: 'ES2022',
      module: 'NodeNext',
      moduleResolution: 'NodeNext',
      strict: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      isolatedModules: true,
      verbatimModuleSyntax: true,
      allowImportingTsExtensions: true,
      noEmit: true,
      types: ['node'],
    },
    include: ['src', 'test'],
  },
  null,
  2,
)}\n`;

function readme(o: InitOptions): string {
  return `# ${o.name}

A Kubernetes operator in TypeScript on \`@iot-operator/runtime\`, scaffolded by \`operator-ts\`.

\`\`\`sh
npm start      # run the operator on the embedded local cluster (CRDs installed first)
npm test       # type-check, unit tests, then end-to-end tests on the embedded local cluster
\`\`\`

Both need Node >= 20, npm and Go: the first run builds a pinned Kubernetes control plane
(etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes) from Go modules,
about 10 minutes on 2 cores, then reuses it from \`~/.cache/iot-operator/\`.

| command | what it does |
| --- | --- |
| \`npx operator-ts create api --group <group> --version <version> --kind <Kind>\` | a new API: TypeBox schema, controller, sample, tests |
| \`npx operator-ts create webhook --kind <Kind> [--defaulting] [--validating] [--conversion]\` | the kind's webhooks: handlers in src/webhooks/, registered in src/webhooks.ts; \`npm start\` serves them on 127.0.0.1:9443 and points the cluster's webhook configurations there while it runs |
| \`npm run generate\` | deploy/crds/*_crd.yaml from the TypeBox schemas, deploy/role.yaml from what the controllers declare, deploy/webhook.yaml from the webhooks |
| \`npx operator-ts generate bundle [--version <v>] [--replaces <v>]\` | an OLM bundle, bundle/<version>/ (default: package.json's version), and the catalog catalog/${o.name}/ from deploy/; deploy/olm/csv-base.yaml may add what no manifest says (display name, icon, install modes) |
| \`npm run cluster:up\` / \`cluster:down\` / \`cluster:status\` | the embedded local cluster (\`cluster:up\` prints its KUBECONFIG) |
| \`docker build -t <registry>/${o.name}:<version> .\` | the operator image; deploy it with deploy/*.yaml |
| \`npx operator-ts install\` / \`uninstall\` | the CRDs on / off the cluster of \`KUBECONFIG\` (or \`--kubeconfig\`) |
| \`npx operator-ts deploy --image <image>\` / \`undeploy\` | CRDs, namespace ${o.name}-system (\`--namespace\`), ServiceAccount, Role, RoleBinding and Deployment on / off that cluster |

The operator serves Prometheus metrics on /metrics (reconciles, work queue, API client, leader,
memory). \`dashboards/operator-runtime.json\` is a Grafana dashboard of them: import it in
Grafana (Dashboards > New > Import), or put it in a ConfigMap labelled \`grafana_dashboard: "1"\`
for the Grafana sidecar of kube-prometheus-stack.

Layout: \`src/api/\` (one TypeBox schema per kind), \`src/controllers/\` (one controller per kind),
\`src/controllers.ts\` (every controller, and the client calls they make beyond \`for\`/\`owns\`/\`watches\`),
\`deploy/\` (CRDs, samples, ServiceAccount, generated Role, RoleBinding, Deployment), \`test/\`.
The unit test \`test/generated.unit.test.ts\` fails while a committed CRD or deploy/role.yaml
differs from what \`npm run generate\` would write, or a committed bundle from what deploy/ makes.

With kubectl instead of \`deploy\`: \`kubectl apply -f deploy/crds/<file>_crd.yaml\`, then
\`kubectl apply -n <namespace> -f deploy/service_account.yaml -f deploy/role.yaml -f deploy/role_binding.yaml -f deploy/operator.yaml\`
(replace REPLACE_IMAGE in deploy/operator.yaml with your image first).
`;
}

const dockerfile = `# The operator image: Node runs the TypeScript sources through tsx.
FROM node:20-alpine
WORKDIR /operator
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
# deploy/operator.yaml mounts the root filesystem read-only: tsx compiles in memory only.
ENV TSX_DISABLE_CACHE=1
USER 1000
ENTRYPOINT ["node", "--import", "tsx", "src/main.ts"]
`;

function main(o: InitOptions): string {
  return `/**
 * The ${o.name} process: flags and environment -> a running manager.
 *
 * The kubeconfig comes from --kubeconfig, else $KUBECONFIG, else ~/.kube/config or the in-cluster
 * service account; the watched namespace from --namespace, else $WATCH_NAMESPACE (empty = all);
 * /healthz, /readyz and /metrics listen on --metrics-bind-address (default 127.0.0.1:8080).
 * With --leader-elect only the holder of the Lease ${o.name}-leader reconciles.
 * When src/webhooks.ts has webhooks, their HTTPS server listens on --webhook-bind-address
 * (default 0.0.0.0:9443) with tls.crt and tls.key of --webhook-cert-dir (default
 * /tmp/k8s-webhook-server/serving-certs, where deploy/operator.yaml mounts the certificate).
 * SIGTERM/SIGINT stop gracefully; SIGHUP forces a resync.
 */
import path from 'node:path';
import { exposeOperatorMetrics, parseOperatorCommandLine } from '@iot-operator/runtime';
import { createOperator, OPERATOR_NAME } from './operator.ts';
import { webhookKinds } from './webhooks.ts';

const options = parseOperatorCommandLine({
  name: OPERATOR_NAME,
  description: 'Runs the ${o.name} controllers.',
  extraOptions: (program) =>
    program
      .option('--webhook-bind-address <host:port>', 'address of the webhook server (HTTPS), when the operator has webhooks', '0.0.0.0:9443')
      .option('--webhook-cert-dir <dir>', 'directory with tls.crt and tls.key of the webhook server', '/tmp/k8s-webhook-server/serving-certs'),
});
const { webhookBindAddress, webhookCertDir } = options.flags as { webhookBindAddress: string; webhookCertDir: string };
const webhook = webhookKinds.length > 0 ? { address: webhookBindAddress, certFile: path.join(webhookCertDir, 'tls.crt'), keyFile: path.join(webhookCertDir, 'tls.key') } : undefined;
const mgr = await createOperator({ ...options, webhook });
mgr.logger.info({ namespace: options.watchNamespace || '<all>', metrics: options.metricsBindAddress }, 'starting ${o.name}');
void exposeOperatorMetrics(mgr, options.httpAddress);
await mgr.runUntilSignal();
`;
}

function operator(o: InitOptions): string {
  return `/**
 * Assembles the operator: a manager with every controller of src/controllers.ts registered and,
 * given \`webhook\` server options, every webhook of src/webhooks.ts (without them, none: tests of
 * the controllers alone). Nothing starts until the caller calls start() (or runUntilSignal()).
 */
import { Manager, operatorManagerOptions, type OperatorProcessOptions, type WebhookServerOptions } from '@iot-operator/runtime';
import { registerControllers } from './controllers.ts';
import { registerWebhooks } from './webhooks.ts';

export const OPERATOR_NAME = '${o.name}';

export interface OperatorOptions extends OperatorProcessOptions {
  webhook?: WebhookServerOptions;
}

export async function createOperator(options: OperatorOptions = {}): Promise<Manager> {
  const mgr = await Manager.create({ ...operatorManagerOptions(OPERATOR_NAME, options), webhook: options.webhook });
  registerControllers(mgr);
  if (options.webhook) registerWebhooks(mgr);
  return mgr;
}
`;
}

const controllers = `/**
 * Every controller of the operator. \`operator-ts generate rbac\` runs registerControllers against
 * a recording manager and writes deploy/role.yaml from the types each controller declares
 * (for, owns, watches) plus extraPermissions: declare there every other client call your
 * reconcilers make. \`operator-ts create api\` adds its controller at the markers below.
 */
import type { ExtraPermission, Manager } from '@iot-operator/runtime';
// operator-ts:imports

/** Client calls beyond what for/owns/watches imply, e.g. { type: Kinds.Secret, verbs: ['get'], reason: 'reads the credentials a Widget names' }. */
export const extraPermissions: ExtraPermission[] = [];

export function registerControllers(mgr: Manager): void {
  // operator-ts:controllers
}
`;

function serviceAccount(o: InitOptions): string {
  return `apiVersion: v1
kind: ServiceAccount
metadata:
  name: ${o.name}
`;
}

function deployment(o: InitOptions): string {
  return `# The operator, watching the namespace it runs in (apply with -n <namespace>).
# Replace REPLACE_IMAGE with the image you built and pushed.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${o.name}
  labels:
    app.kubernetes.io/name: ${o.name}
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: ${o.name}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: ${o.name}
    spec:
      serviceAccountName: ${o.name}
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: ${o.name}
          image: REPLACE_IMAGE
          args:
            - --leader-elect
            - --metrics-bind-address=0.0.0.0:8080
          env:
            - name: WATCH_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
          ports:
            - name: http
              containerPort: 8080
            - name: webhook
              containerPort: 9443
          volumeMounts:
            # The webhook server's certificate (operator-ts deploy makes the Secret when the operator has webhooks).
            - name: webhook-cert
              mountPath: /tmp/k8s-webhook-server/serving-certs
              readOnly: true
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [ALL]
      volumes:
        - name: webhook-cert
          secret:
            secretName: ${o.name}-webhook-cert
            optional: true
`;
}

const generatedTest = `/**
 * The committed generated files match their sources: every deploy/crds/*_crd.yaml its TypeBox
 * schema, deploy/role.yaml what the controllers declare, deploy/webhook.yaml the webhooks of
 * operator-ts.json, every OLM bundle under bundle/ (if any)
 * what deploy/ makes. Fix a failure with \`npm run generate\`, then regenerate stale bundles
 * (\`npx operator-ts generate bundle --version <v> [--replaces <v>]\`).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const projectDir = fileURLToPath(new URL('..', import.meta.url));

function check(what: 'crd' | 'rbac' | 'webhook' | 'bundle') {
  const cli = path.join(projectDir, 'node_modules/.bin/operator-ts');
  const result = spawnSync(cli, ['generate', what, '--check'], { cwd: projectDir, encoding: 'utf8' });
  return { status: result.status, output: \`\${result.stdout}\${result.stderr}\` };
}

test('the committed CRDs are those of the TypeBox schemas', () => {
  const { status, output } = check('crd');
  assert.equal(status, 0, output);
});

test('deploy/role.yaml grants what the controllers declare, no more and no less', () => {
  const { status, output } = check('rbac');
  assert.equal(status, 0, output);
});

test('deploy/webhook.yaml holds the webhooks operator-ts.json lists', () => {
  const { status, output } = check('webhook');
  assert.equal(status, 0, output);
});

test('the committed OLM bundles and catalog are what deploy/ makes', () => {
  const { status, output } = check('bundle');
  assert.equal(status, 0, output);
});
`;

const operatorE2eTest = `/**
 * The operator on the local cluster, with every CRD of deploy/crds installed, as its
 * ServiceAccount with only the deploy/ RBAC: it syncs its caches, wins leader election and
 * answers /readyz and /metrics.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Manager } from '@iot-operator/runtime';
import { serviceAccountKubeconfig, testEnv, type ServiceAccountKubeconfig, type TestEnv } from '@iot-operator/runtime/testing';
import { createOperator } from '../src/operator.ts';
import { installProjectCrds } from './crds.ts';

const deployDir = fileURLToPath(new URL('../deploy/', import.meta.url));
let env: TestEnv;
let account: ServiceAccountKubeconfig;
let mgr: Manager;
let ns: string;

before(async () => {
  env = await testEnv();
  await installProjectCrds(env);
  ns = await env.namespace('operator');
  account = await serviceAccountKubeconfig(env, ns, ['service_account.yaml', 'role.yaml', 'role_binding.yaml'].map((f) => path.join(deployDir, f)));
  mgr = await createOperator({ ...env.operatorOptions(ns), kubeconfigPath: account.file, leaderElection: { namespace: ns } });
  await mgr.start();
});

after(async () => {
  await mgr?.stop();
  await account?.cleanup();
  await env?.cleanup();
});

test('as its ServiceAccount, the operator becomes leader and reports ready', async () => {
  await env.waitFor('the operator to hold its Lease', async () => ({ done: mgr.isLeader, value: true }));
  const ready = await fetch(\`http://127.0.0.1:\${mgr.httpPort}/readyz\`);
  assert.equal(ready.status, 200);
  const metrics = await (await fetch(\`http://127.0.0.1:\${mgr.httpPort}/metrics\`)).text();
  assert.match(metrics, /leader_election_master_status\\{name="[a-z0-9-]+-leader"\\} 1/);
});
`;

const crdsHelper = `/**
 * Installs every CRD of deploy/crds and waits until each is Established: the operator's
 * controllers cover every API of the project, and its caches sync only once all exist.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestEnv } from '@iot-operator/runtime/testing';

const crdDir = fileURLToPath(new URL('../deploy/crds/', import.meta.url));

export async function installProjectCrds(env: TestEnv): Promise<void> {
  for (const file of readdirSync(crdDir).filter((f) => f.endsWith('_crd.yaml'))) await env.installCrd(path.join(crdDir, file));
}
`;
