/**
 * operator-ts: the command line of the SDK — init, create api|webhook, generate
 * crd|rbac|webhook|bundle, webhook local, cluster up|down|status|exec, run, install, uninstall,
 * deploy and undeploy. Each command's help says
 * what it writes or applies; every failure is one line `operator-ts: <reason>` on stderr and
 * exit code 1 (a command run by `cluster exec` or `run` passes its own exit code through).
 */
import path from 'node:path';
import { Command } from 'commander';
import { clusterDown, clusterExec, clusterStatus, clusterUp, runOperator } from './cluster.ts';
import { checkBundles, DEFAULT_CHANNEL, generateBundle, packageVersion } from './generate/bundle.ts';
import { generatedCrds, generatedRbac, generatedWebhooks, writeOrCheck } from './generate/generate.ts';
import { moduleFile, runProjectWorker } from './project-process.ts';
import { readProject } from './project.ts';
import { createApi, createWebhook, init, SDK_VERSION } from './scaffold.ts';
import { localWebhookCertDir } from './webhook/local.ts';
import { WEBHOOK_PORT } from './webhook/manifests.ts';

function action<A extends unknown[]>(fn: (...args: A) => Promise<number | void> | number | void) {
  return async (...args: A) => {
    try {
      const code = await fn(...args);
      if (typeof code === 'number') process.exitCode = code;
    } catch (err) {
      process.stderr.write(`operator-ts: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    }
  };
}

const program = new Command().enablePositionalOptions().name('operator-ts').description(`TypeScript operators on @iot-operator/runtime (sdk ${SDK_VERSION})`);

program
  .command('init')
  .description('write a new operator project into <dir>: package.json, tsconfig, src/, test/, deploy/, Dockerfile, README')
  .argument('<dir>', 'new or empty directory')
  .option('--name <name>', "the operator's name (default: the directory's name)")
  .option('--domain <domain>', 'API domain appended to a short --group of create api', 'example.com')
  .option('--runtime-version <spec>', 'npm specifier of @iot-operator/runtime to depend on (default: ^<this sdk version>)')
  .option('--sdk-version <spec>', 'npm specifier of @iot-operator/sdk to depend on (default: ^<this sdk version>)')
  .action(
    action((dir: string, options: { name?: string; domain: string; runtimeVersion?: string; sdkVersion?: string }) => {
      const project = init(dir, options);
      console.log(`created operator project ${project.name} in ${dir}\nnext: cd ${dir} && npm install && npm test`);
    }),
  );

const create = program.command('create').description('add to the project');
create
  .command('api')
  .description('a new API: TypeBox schema (src/api/), controller (src/controllers/), sample (deploy/crds/), unit and e2e tests')
  .option('--group <group>', 'API group; a short one gets the project domain appended')
  .option('--version <version>', 'API version, e.g. v1alpha1')
  .option('--api-version <group/version>', "group and version in one, as operator-sdk's add api takes them")
  .requiredOption('--kind <kind>', 'kind, UpperCamelCase')
  .option('--plural <plural>', 'resource name (default: the lower-case plural of the kind)')
  .option('--namespaced [bool]', 'namespaced (true, the default) or cluster-scoped (false)', 'true')
  .action(
    action((options: { group?: string; version?: string; apiVersion?: string; kind: string; plural?: string; namespaced: string | boolean }) => {
      const namespaced = options.namespaced === true || options.namespaced === 'true';
      if (!namespaced && options.namespaced !== 'false') throw new Error(`--namespaced takes true or false, got ${String(options.namespaced)}`);
      const [group, version] = options.apiVersion ? options.apiVersion.split('/', 2) : [options.group, options.version];
      if (!group || !version) throw new Error('name the API with --group and --version, or with --api-version <group>/<version>');
      const api = createApi(process.cwd(), { group, version, kind: options.kind, plural: options.plural, namespaced });
      console.log(`created API ${api.group}/${api.version} ${api.kind}\nnext: npx operator-ts generate crd && npx operator-ts generate rbac`);
    }),
  );

create
  .command('webhook')
  .description("a kind's webhooks: handlers in src/webhooks/<kind>.ts (registered in src/webhooks.ts), a unit test; then `generate webhook` and `generate crd`")
  .requiredOption('--kind <kind>', 'the kind, of an API of the project (or one named by --api-version)')
  .option('--defaulting', 'a defaulting (mutating admission) webhook', false)
  .option('--validating', 'a validating admission webhook', false)
  .option('--conversion', "a conversion webhook (the CRD's spec.conversion)", false)
  .option('--api-version <group/version>', 'for a kind `create api` did not make: its group and version')
  .option('--plural <plural>', 'for such a kind: its resource name (default: the lower-case plural of the kind)')
  .action(
    action((options: { kind: string; defaulting: boolean; validating: boolean; conversion: boolean; apiVersion?: string; plural?: string }) => {
      const webhook = createWebhook(process.cwd(), options);
      const kinds = [webhook.defaulting && 'defaulting', webhook.validating && 'validating', webhook.conversion && 'conversion'].filter(Boolean).join(', ');
      console.log(`created ${kinds} webhooks of ${webhook.kind} in src/webhooks/${webhook.kind.toLowerCase()}.ts\nnext: npm run generate (deploy/webhook.yaml${webhook.conversion ? ", the CRD's conversion" : ''})`);
    }),
  );

const generate = program.command('generate').description('write files derived from the code');

/**
 * `generate <name>`: the files `derive` makes of the project in the working directory, written
 * where they differ, or with --check only compared (a difference fails the command, naming it);
 * prints what it wrote, else `outcome.unchanged` (or with --check `outcome.upToDate`).
 */
function generateCommand(
  name: string,
  description: string,
  checkHelp: string,
  derive: (projectDir: string) => Record<string, string> | Promise<Record<string, string>>,
  outcome: { unchanged: string; upToDate: string },
): void {
  generate
    .command(name)
    .description(description)
    .option('--check', checkHelp)
    .action(
      action(async (options: { check?: boolean }) => {
        const report = writeOrCheck(process.cwd(), await derive(process.cwd()), !!options.check, `operator-ts generate ${name}`);
        console.log(report.length > 0 ? report.join('\n') : options.check ? outcome.upToDate : outcome.unchanged);
      }),
    );
}

generateCommand('crd', 'deploy/crds/<group>_<version>_<kind>_crd.yaml from each API\'s TypeBox schema', 'write nothing; fail when a committed CRD differs', generatedCrds, {
  unchanged: 'CRDs unchanged',
  upToDate: 'CRDs are up to date',
});
generateCommand(
  'rbac',
  'deploy/role.yaml and role_binding.yaml from what src/controllers.ts declares (for, owns, watches, extraPermissions)',
  'write nothing; fail when the committed RBAC differs',
  generatedRbac,
  { unchanged: 'RBAC unchanged', upToDate: 'RBAC is up to date' },
);
generateCommand(
  'webhook',
  'deploy/webhook.yaml: the Mutating- and ValidatingWebhookConfiguration and the webhook Service, from operator-ts.json',
  'write nothing; fail when the committed file differs',
  generatedWebhooks,
  { unchanged: 'webhooks unchanged', upToDate: 'webhooks are up to date' },
);

generate
  .command('bundle')
  .description('an OLM bundle, bundle/<version>/ (ClusterServiceVersion, CRDs, metadata, bundle.Dockerfile), and the file-based catalog catalog/<package>/ from deploy/ (CSV base: deploy/olm/csv-base.yaml, else package.json)')
  .option('--version <semver>', "the bundle's version (default: package.json's)")
  .option('--replaces <semver>', 'the committed bundle this one upgrades')
  .option('--channel <name>', 'the channel of the bundle', DEFAULT_CHANNEL)
  .option('--image <ref>', 'the operator image (default: registry.example.com/<deployment>:v<version>)')
  .option('--check', 'write nothing; fail when a committed bundle or the catalog differs from what deploy/ makes today')
  .action(
    action((options: { version?: string; replaces?: string; channel: string; image?: string; check?: boolean }) => {
      const projectDir = process.cwd();
      if (options.check) {
        const versions = checkBundles(projectDir);
        console.log(versions.length > 0 ? `bundles ${versions.join(', ')} and the catalog are up to date` : 'no bundles to check');
        return;
      }
      const { check: _check, ...bundle } = options;
      for (const file of generateBundle(projectDir, { ...bundle, version: options.version ?? packageVersion(projectDir) })) console.log(`wrote ${file}`);
    }),
  );

const cluster = program.command('cluster').enablePositionalOptions().description('the local control plane (binaries cached in ~/.cache/iot-operator)');
cluster
  .command('up')
  .description('start or reuse the local cluster; prints KUBECONFIG=<path> last')
  .action(action(async () => void console.log(`KUBECONFIG=${await clusterUp()}`)));
cluster.command('down').description('stop the local cluster and delete its state').action(action(() => clusterDown()));
cluster.command('status').description('state of the local cluster (exit 0 running, 1 unhealthy, 3 absent)').action(action(() => clusterStatus()));
cluster
  .command('exec')
  .description('run <command> with KUBECONFIG of the local cluster (started when needed) and IOT_TEST_USE_KUBECONFIG=1')
  .argument('<command>')
  .argument('[args...]')
  .passThroughOptions()
  .action(action((command: string, args: string[]) => clusterExec(command, args)));

const deployWorker = moduleFile(import.meta.url, 'deploy/deploy-worker');

/** install, uninstall, deploy and undeploy against the cluster of the kubeconfig, as the seed's make targets. */
function clusterAction(name: 'install' | 'uninstall' | 'deploy' | 'undeploy', description: string) {
  const command = program
    .command(name)
    .description(description)
    .option('--kubeconfig <path>', 'kubeconfig of the target cluster (default: $KUBECONFIG, else ~/.kube/config)');
  if (name === 'deploy' || name === 'undeploy') command.option('--namespace <namespace>', "the operator's namespace (default: <name>-system)");
  if (name === 'deploy') command.option('--image <image>', "the operator's image, replacing REPLACE_IMAGE in deploy/operator.yaml");
  command.action(
    action(async (options: { kubeconfig?: string; namespace?: string; image?: string }) => {
      const projectDir = process.cwd();
      const namespace = options.namespace ?? `${readProject(projectDir).name}-system`;
      const output = await runProjectWorker(projectDir, deployWorker, [name, JSON.stringify({ ...options, namespace })], `${name} failed`);
      process.stdout.write(output);
    }),
  );
}
clusterAction('install', 'apply deploy/crds/*_crd.yaml to the cluster and wait until each is Established');
clusterAction('uninstall', 'delete the CRDs of deploy/crds from the cluster');
clusterAction('deploy', 'install, then the namespace, ServiceAccount, Role, RoleBinding and Deployment of deploy/');
clusterAction('undeploy', 'delete what deploy applied (not the namespace), then uninstall');

program
  .command('webhook')
  .description('the webhooks of an operator run out of cluster')
  .command('local')
  .description('a CA and a certificate for 127.0.0.1 in --cert-dir, and the webhook configurations (and CRD conversions) on the cluster calling https://127.0.0.1:<port>; --delete removes the configurations')
  .option('--port <port>', "the webhook server's port on 127.0.0.1", String(WEBHOOK_PORT))
  .option('--cert-dir <dir>', 'where ca.crt, tls.crt and tls.key go (kept while usable)')
  .option('--kubeconfig <path>', 'kubeconfig of the target cluster (default: $KUBECONFIG, else ~/.kube/config)')
  .option('--delete', 'delete the webhook configurations instead', false)
  .action(
    action(async (options: { port: string; certDir?: string; kubeconfig?: string; delete: boolean }) => {
      const projectDir = process.cwd();
      const project = readProject(projectDir);
      const port = Number(options.port);
      if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`--port must be a port number, got ${options.port}`);
      const certDir = path.resolve(options.certDir ?? localWebhookCertDir(project.name));
      const worker = options.delete ? 'webhook-local-delete' : 'webhook-local';
      const args = { kubeconfig: options.kubeconfig, namespace: 'default', port, certDir };
      process.stdout.write(await runProjectWorker(projectDir, deployWorker, [worker, JSON.stringify(args)], `webhook local failed`));
      if (!options.delete) console.log(`run the operator with: --webhook-bind-address 127.0.0.1:${port} --webhook-cert-dir ${certDir}`);
    }),
  );

program
  .command('run')
  .description('run the project\'s operator on the local cluster, its CRDs installed first; arguments go to the operator')
  .argument('[args...]')
  .passThroughOptions()
  .allowUnknownOption()
  .action(action((args: string[]) => runOperator(path.resolve('.'), args)));

await program.parseAsync();
