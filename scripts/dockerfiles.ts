/**
 * The repository's Dockerfiles, from one template: the generator `dockerfiles` of `npm run
 * generate` writes operators/<name>/Dockerfile for every operator and
 * workloads/iot-service/image/Dockerfile (the reference IoT service, one target per component);
 * `npm run generate -- --check` fails when a committed one differs, so a fix to the images' shape
 * lands once, here. Every Dockerfile is made of the same
 * pieces: the header saying how to build it, the base-image arguments, the build stage and
 * runtime stages (a Node.js program's, or a Debian-package stage's).
 *
 * Guarantees of every generated Dockerfile:
 * - Every `FROM` is a build argument whose default is the public image users pull
 *   (node:20-bookworm-slim, golang:1.24-bookworm); images/bases.sh makes Debian 13 ones where no
 *   registry is reachable, and `npm run image:build` / `npm run image:iot-service` pass them. The
 *   steps are the same on both (Debian with apt), so what is built here is what users build.
 * - A build stage installs the one workspace it bundles (`npm ci --workspace`) and bundles it with
 *   images/bundle.ts; a Node.js image holds Node.js and the bundle (no node_modules, no TypeScript
 *   loader) with NODE_ENV=production, and every image runs as a non-root user and writes nothing
 *   outside /tmp (and, for the IoT service's broker and database, their data volume), so it runs
 *   on a read-only root file system.
 * - An operator's image runs as uid/gid 1000 with the operators' V8 flags (OPERATOR_NODE_FLAGS).
 *   Armada's image also carries the pinned Helm CLI (built in a Go stage from the Helm module,
 *   HELM_VERSION as cluster/engines/build.sh helm pins it), git (for `git` chart sources) and the example
 *   charts at /opt/armada/helm-charts.
 * - The IoT service's Dockerfile has exactly the targets scripts/iot-service-images.ts builds
 *   (IOT_SERVICE_COMPONENTS), each running as the operator's pod user 10001:10001 and reporting
 *   the build argument VERSION as IOT_SERVICE_VERSION; the broker is NATS Server of the version
 *   the module cluster/engines/nats-server pins (NATS' image, or locally the binary built from that
 *   module), the database Debian's postgresql and patroni with the schema (IOT_SERVICE_SCHEMA, at
 *   DATABASE_SCHEMA_PATH) and the script applying it and the roles (DATABASE_ROLES_SCRIPT), each
 *   with user `iot` (10001) and its entry script beside the Dockerfile. It needs no Go base image.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BUNDLES, OPERATOR_NODE_FLAGS } from '../images/bundle.ts';
import { notice, repoRoot as root, type Files, type Generator } from './generator.ts';
import { IOT_SERVICE_COMPONENTS, IOT_SERVICE_DOCKERFILE } from './iot-service-images.ts';
export const OPERATOR_IMAGES = ['iot', 'memcached', 'ptemplate', 'armada'] as const;
export type OperatorImage = (typeof OPERATOR_IMAGES)[number];
type IoTServiceComponent = (typeof IOT_SERVICE_COMPONENTS)[number];

/** The Helm version cluster/engines/build.sh helm pins (one source). */
export function pinnedHelmVersion(): string {
  const match = /^HELM_VERSION=(\S+)$/m.exec(readFileSync(path.join(root, 'cluster/engines/build.sh'), 'utf8'));
  if (!match) throw new Error('cluster/engines/build.sh pins no HELM_VERSION');
  return match[1]!;
}

// ---- The template's pieces -------------------------------------------------------------------

interface Header {
  /** What the Dockerfile builds, e.g. "The iot operator image". */
  title: string;
  /** The `docker build` command line(s) that build it from the repository root. */
  dockerBuild: string[];
  /** The npm script that builds it here from the local bases, and its full command. */
  npmScript: string;
  npmCommand: string;
  /** What the image guarantees. */
  about: string[];
}

/** The header: generated from where, how to build, which bases, then what the image guarantees. */
function header({ title, dockerBuild, npmScript, npmCommand, about }: Header): string[] {
  return [
    `# ${notice(DOCKERFILES.name, 'scripts/dockerfiles.ts')}`,
    `# ${title}. Build from the repository root:`,
    ...dockerBuild.map((line) => `#   ${line}`),
    `# or: ${npmCommand}`,
    '# Every base image is a build argument; the defaults are the public images. Without a registry,',
    `# images/bases.sh makes Debian 13 ones and \`${npmScript}\` passes them. The defaults are`,
    '# Debian (bookworm) rather than Alpine so that one set of steps (apt) works on both.',
    ...about.map((line) => `# ${line}`),
  ];
}

/** The base images as build arguments with the public defaults (images/bases.sh provides each). */
function baseArgs(extra: string[] = []): string[] {
  return ['ARG NODE_BUILD_IMAGE=node:20-bookworm-slim', 'ARG NODE_IMAGE=node:20-bookworm-slim', ...extra];
}

/**
 * The build stage: `npm ci` of the bundle's workspace (with the workspaces it depends on,
 * `dependencies`, and the root's tools: tsx, esbuild), then images/bundle.ts writes the bundle
 * into /src/<its package>/dist/.
 */
function buildStage(bundle: string, dependencies: string[] = []): string[] {
  const dir = BUNDLES[bundle]!.dir;
  const workspace = (JSON.parse(readFileSync(path.join(root, dir, 'package.json'), 'utf8')) as { name: string }).name;
  const dirs = [...dependencies, dir];
  return [
    'FROM ${NODE_BUILD_IMAGE} AS build',
    'WORKDIR /src',
    'COPY package.json package-lock.json ./',
    ...dirs.map((d) => `COPY ${d}/package.json ${d}/`),
    `RUN npm ci --workspace ${workspace} --include-workspace-root --no-audit --no-fund`,
    'COPY images/bundle.ts images/',
    ...dirs.map((d) => `COPY ${d}/src ${d}/src`),
    `RUN node --import tsx images/bundle.ts ${bundle}`,
  ];
}

/** A user the image creates with its packages (the Node.js bases already have `node`, 1000). */
interface DebianUser {
  name: string;
  uid: number;
  home: string;
}

/** A runtime stage, FROM the Node.js base; its lines come in this order. */
interface RuntimeStage {
  /** The stage's name, the `--target` that builds it; an operator's image is one unnamed stage. */
  target?: string;
  /** Debian packages installed first, in one step that leaves no apt lists, and the user made with them. */
  packages?: { names: string[]; user?: DebianUser };
  env?: string[];
  /** What the image carries besides its program, before WORKDIR (Armada's Helm CLI). */
  carries?: string[];
  workdir?: string;
  /** The program: what is copied into the image to run. */
  program: string[];
  /**
   * `ARG VERSION`, reported as IOT_SERVICE_VERSION; after the program, so that the layers before
   * it are the same for every version.
   */
  version?: boolean;
  user: string;
  expose?: number[];
  entrypoint: string[];
}

const useradd = (user: DebianUser) => `useradd --uid ${user.uid} --user-group --no-create-home --home-dir ${user.home} ${user.name}`;

function runtimeStage(stage: RuntimeStage): string[] {
  const { packages } = stage;
  const user = packages?.user;
  const env = stage.env ?? [];
  return [
    `FROM \${NODE_IMAGE}${stage.target ? ` AS ${stage.target}` : ''}`,
    ...(packages && packages.names.length > 0
      ? [
          `RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${packages.names.join(' ')} \\`,
          `    && rm -rf /var/lib/apt/lists/*${user ? ' \\' : ''}`,
          ...(user ? [`    && ${useradd(user)}`] : []),
        ]
      : user
        ? [`RUN ${useradd(user)}`]
        : []),
    ...env.map((pair, i) => `${i === 0 ? 'ENV ' : '    '}${pair}${i < env.length - 1 ? ' \\' : ''}`),
    ...(stage.carries ?? []),
    ...(stage.workdir ? [`WORKDIR ${stage.workdir}`] : []),
    ...stage.program,
    ...(stage.version ? ['ARG VERSION', 'ENV IOT_SERVICE_VERSION=${VERSION}'] : []),
    `USER ${stage.user}`,
    ...(stage.expose ?? []).map((port) => `EXPOSE ${port}`),
    `ENTRYPOINT ${JSON.stringify(stage.entrypoint).replaceAll(',', ', ')}`,
  ];
}

/**
 * The runtime stage of a Node.js program: production mode, the whole bundle directory (entry
 * files and chunks) in WORKDIR, started by `entry` with the bundle's V8 flags.
 */
function nodeProgram(bundle: string, entry: string, stage: Omit<RuntimeStage, 'program' | 'entrypoint'> & { program?: string[] }): RuntimeStage {
  const { dir, nodeFlags } = BUNDLES[bundle]!;
  return {
    ...stage,
    env: ['NODE_ENV=production', ...(stage.env ?? [])],
    workdir: stage.workdir ?? '/app',
    program: [...(stage.program ?? []), `COPY --from=build /src/${dir}/dist/ ./`],
    entrypoint: ['node', ...nodeFlags, `${entry}.mjs`],
  };
}

function render(sections: string[][]): string {
  return `${sections.map((lines) => lines.join('\n')).join('\n\n')}\n`;
}

// ---- The operators' images -------------------------------------------------------------------

export function dockerfile(operator: OperatorImage): string {
  const armada = operator === 'armada';
  const head = header({
    title: `The ${operator} operator image`,
    dockerBuild: [`docker build -f operators/${operator}/Dockerfile -t <registry>/${operator}-operator:<version> .`],
    npmScript: 'npm run image:build',
    npmCommand: `npm run image:build -- ${operator}`,
    about: [
      'The image runs the operator bundled into JavaScript (no node_modules, no TypeScript loader) as',
      'uid 1000 and writes nothing outside /tmp: it runs on a read-only root file system.',
      ...(armada
        ? [
            'It also carries the Helm CLI (pinned as in cluster/engines/build.sh helm), git (for `git` chart sources)',
            "and the example charts; the operator keeps Helm's cache, config and fetched charts under /tmp.",
          ]
        : []),
    ],
  });
  const helm = [
    'FROM ${GO_IMAGE} AS helm',
    'ARG HELM_VERSION',
    'RUN CGO_ENABLED=0 GOBIN=/out GOFLAGS=-buildvcs=false go install -trimpath \\',
    '      -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \\',
    '      "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" && /out/helm version --short',
  ];
  const image = nodeProgram(operator, `${operator}-operator`, {
    user: '1000:1000',
    expose: [8080],
    ...(armada
      ? {
          packages: { names: ['git'] },
          env: ['HELM_BINARY=/usr/local/bin/helm'],
          carries: [
            'COPY --from=helm /out/helm /usr/local/bin/helm',
            "# Relative `local` chart locations resolve from here (docs/armada.md): the examples'",
            '# helm-charts/testchart is /opt/armada/helm-charts/testchart.',
          ],
          workdir: '/opt/armada',
          program: ['COPY operators/armada/helm-charts helm-charts'],
        }
      : {}),
  });
  return render([
    [...head, ...baseArgs(armada ? ['ARG GO_IMAGE=golang:1.24-bookworm', `ARG HELM_VERSION=${pinnedHelmVersion()}`] : [])],
    buildStage(operator, ['packages/runtime']),
    ...(armada ? [helm] : []),
    runtimeStage(image),
  ]);
}

// ---- The reference IoT service's images ------------------------------------------------------

/** The IoT operator's pod user (operators/iot/src/resources/pod.ts POD_USER_ID). */
const IOT_USER = { name: 'iot', uid: 10001, home: '/var/lib/iot' } satisfies DebianUser;
const IOT_USER_IDS = `${IOT_USER.uid}:${IOT_USER.uid}`;

/** A component of the IoT service as a Node.js program: its entry file of the `iot-service` bundle. */
const nodeComponent = (component: IoTServiceComponent): RuntimeStage =>
  nodeProgram('iot-service', component, { target: component, version: true, user: IOT_USER_IDS });

/** The database's schema (the one definition of its tables), and where the database image has it for its entry script. */
export const IOT_SERVICE_SCHEMA = 'workloads/iot-service/schema.sql';
export const DATABASE_SCHEMA_PATH = '/usr/local/share/iot/schema.sql';
/** The database image's script that applies the schema and the roles (image/database-roles.sh), run by its entry script or by Patroni. */
export const DATABASE_ROLES_SCRIPT = '/usr/local/bin/iot-database-roles';
/** The database image's pgBackRest entry point (image/pgbackrest.mjs): the database pods' pgBackRest server, and the backup repository host. */
export const PGBACKREST_SCRIPT = '/usr/local/bin/iot-pgbackrest';
/** The database image's restore (image/database-restore.sh): the database pods' init container with spec.restore. */
export const RESTORE_SCRIPT = '/usr/local/bin/iot-database-restore';

/**
 * A component from Debian packages: the packages and user `iot` (10001, home the data volume at
 * /var/lib/iot) in one step, the files it needs (`COPY` lines), and the component's entry script
 * (image/<component>.sh) as /usr/local/bin/iot-<component>.
 */
const debianPackageComponent = (component: IoTServiceComponent, debianPackages: string[], files: string[] = []): RuntimeStage => ({
  target: component,
  packages: { names: debianPackages, user: IOT_USER },
  program: [...files, `COPY ${path.dirname(IOT_SERVICE_DOCKERFILE)}/${component}.sh /usr/local/bin/iot-${component}`],
  version: true,
  user: IOT_USER_IDS,
  entrypoint: [`/usr/local/bin/iot-${component}`],
});

/** The wrapper module that pins NATS Server (one source for the image and the tests' build). */
export const NATS_SERVER_MODULE = 'cluster/engines/nats-server';

/** The NATS Server version the wrapper module pins, e.g. `2.15.3`. */
export function pinnedNatsServerVersion(): string {
  const match = /^\tgithub\.com\/nats-io\/nats-server\/v2 v(\d+\.\d+\.\d+)\b/m.exec(readFileSync(path.join(root, NATS_SERVER_MODULE, 'go.mod'), 'utf8'));
  if (!match) throw new Error(`${NATS_SERVER_MODULE}/go.mod pins no github.com/nats-io/nats-server/v2`);
  return match[1]!;
}

/**
 * NATS Server's program, from an image that holds it at /nats-server: by default NATS' own image
 * of the pinned version; `npm run image:iot-service` passes one holding the binary the cluster's
 * engine build made from the wrapper module (the one the tests run), so no Go toolchain is needed.
 */
const natsServerStage = ['FROM ${NATS_SERVER_IMAGE} AS nats-server'];

/** The broker: NATS Server from its image, user `iot` (10001) and its entry script. */
const natsBroker: RuntimeStage = {
  target: 'broker',
  packages: { names: [], user: IOT_USER },
  carries: ['COPY --from=nats-server /nats-server /usr/local/bin/nats-server'],
  program: [`COPY ${path.dirname(IOT_SERVICE_DOCKERFILE)}/broker.sh /usr/local/bin/iot-broker`],
  version: true,
  user: IOT_USER_IDS,
  entrypoint: ['/usr/local/bin/iot-broker'],
};

const IOT_SERVICE_STAGES: Record<IoTServiceComponent, RuntimeStage> = {
  core: nodeComponent('core'),
  gateway: nodeComponent('gateway'),
  processing: nodeComponent('processing'),
  broker: natsBroker,
  database: debianPackageComponent(
    'database',
    ['postgresql', 'patroni', 'pgbackrest'],
    [
      `COPY ${IOT_SERVICE_SCHEMA} ${DATABASE_SCHEMA_PATH}`,
      `COPY ${path.dirname(IOT_SERVICE_DOCKERFILE)}/database-roles.sh ${DATABASE_ROLES_SCRIPT}`,
      `COPY ${path.dirname(IOT_SERVICE_DOCKERFILE)}/pgbackrest.mjs ${PGBACKREST_SCRIPT}`,
      `COPY ${path.dirname(IOT_SERVICE_DOCKERFILE)}/database-restore.sh ${RESTORE_SCRIPT}`,
      // Every pgBackRest option comes from the environment; Debian's sample configuration (readable
      // by user postgres alone) would stop every pgbackrest command of user iot.
      'RUN rm /etc/pgbackrest.conf',
    ],
  ),
};

export function iotServiceDockerfile(): string {
  const head = header({
    title: "The reference IoT service's images",
    dockerBuild: [
      `docker build -f ${IOT_SERVICE_DOCKERFILE} --target <component> --build-arg VERSION=<version> \\`,
      '  -t <registry>/iot-<component>:<version> .',
    ],
    npmScript: 'npm run image:iot-service',
    npmCommand: 'npm run image:iot-service -- --version <version>',
    about: [
      'One target per component, each run by the IoT operator as <registry>/iot-<component>:<version>:',
      '  core, gateway, processing  Node.js 20 and the bundle `images/bundle.ts iot-service` (no',
      "                             node_modules), each started with its component's entry file",
      `  broker                     NATS Server ${pinnedNatsServerVersion()} with JetStream (NATS_SERVER_IMAGE; locally the binary`,
      `                             built from ${NATS_SERVER_MODULE}):`,
      '                             clients on 4222 as users gateway, processing and core, each allowed only',
      '                             what it needs (broker.sh), monitoring 8222',
      "  database                   Debian's postgresql and patroni: database `iot`, initdb into the volume; one",
      '                             replica runs PostgreSQL alone, three run it under Patroni (database.sh); on',
      '                             the primary schema.sql and the roles applied at every start (database-roles.sh)',
      "                             With Debian's pgbackrest: each database pod's second container serves",
      '                             its data directory to the repository host (pgbackrest server, TLS), which',
      '                             is this image too (pgbackrest.mjs: backups on a schedule, /info); with a',
      "                             restore, the database pods' init container (database-restore.sh)",
      'VERSION is what every component reports (/healthz, start log line; the broker and the database',
      'log it at start); `npm run image:iot-service` also sets it on each built image (buildah keys no',
      "cached ENV step on an argument's value). Everything runs as the operator's pod user (10001) on",
      'a read-only root file system: the only writable places are /tmp and the data volume at /var/lib/iot.',
    ],
  });
  return render([
    [...head, ...baseArgs([`ARG NATS_SERVER_IMAGE=nats:${pinnedNatsServerVersion()}`])],
    buildStage('iot-service'),
    natsServerStage,
    ...IOT_SERVICE_COMPONENTS.map((c) => runtimeStage(IOT_SERVICE_STAGES[c])),
  ]);
}

/** Every generated Dockerfile, by path from the repository root. */
export function generatedDockerfiles(): Files {
  return Object.fromEntries([
    ...OPERATOR_IMAGES.map((operator) => [`operators/${operator}/Dockerfile`, dockerfile(operator)]),
    [IOT_SERVICE_DOCKERFILE, iotServiceDockerfile()],
  ]);
}

export const DOCKERFILES: Generator = { name: 'dockerfiles', files: generatedDockerfiles };
