// The Dockerfiles scripts/dockerfiles.ts generates from its one template (the operators' and the
// reference IoT service's; scripts/test/generate.unit.test.ts holds the committed ones to them):
// their bases are build arguments with public defaults, and the images differ only in what they carry.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DATABASE_ROLES_SCRIPT, DATABASE_SCHEMA_PATH, dockerfile, generatedDockerfiles, IOT_SERVICE_SCHEMA, iotServiceDockerfile, OPERATOR_IMAGES } from '../dockerfiles.ts';
import { repoRoot as root } from '../generator.ts';
import { IOT_SERVICE_COMPONENTS } from '../iot-service-images.ts';

/** The stages of a Dockerfile: its name (`AS`, or '' for an unnamed one) → its lines. */
function stages(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const stage of text.split(/^(?=FROM )/m).slice(1)) {
    const lines = stage.trim().split('\n');
    out.set(/ AS (\S+)$/.exec(lines[0]!)?.[1] ?? '', lines);
  }
  return out;
}

describe('Dockerfiles', () => {
  it('every FROM names a build argument with a public default, and the images differ only in what they carry', () => {
    for (const [name, text] of Object.entries(generatedDockerfiles())) {
      for (const from of text.matchAll(/^FROM (\S+)/gm)) assert.match(from[1]!, /^\$\{[A-Z_]+\}$/, `${name}: FROM ${from[1]}`);
      for (const arg of text.matchAll(/^ARG ([A-Z_]+_IMAGE)=(\S+)$/gm)) assert.match(arg[2]!, /^(node|golang|nats):/, `${name}: ${arg[1]} defaults to a public image`);
    }
    for (const operator of OPERATOR_IMAGES) assert.match(dockerfile(operator), /^USER 1000:1000$/m);
    const withoutName = (operator: string) => dockerfile(operator as 'iot').replaceAll('@iot-operator/', '@SCOPE/').replaceAll(operator, 'OPERATOR');
    assert.equal(withoutName('memcached'), withoutName('iot'));
    assert.equal(withoutName('ptemplate'), withoutName('iot'));
    assert.match(dockerfile('armada'), /^COPY --from=helm \/out\/helm \/usr\/local\/bin\/helm$/m);
  });

  it("the IoT service's build stage is the operators' one for its workspace and bundle", () => {
    const operatorBuild = stages(dockerfile('iot')).get('build')!.filter((line) => !line.includes('packages/runtime'));
    const serviceBuild = stages(iotServiceDockerfile()).get('build')!;
    const generic = (lines: string[], dir: string) => lines.map((line) => line.replaceAll(dir, 'DIR').replace(/bundle\.ts \S+$/, 'bundle.ts BUNDLE').replace(/@iot-operator\/\S+/, '@SCOPE/NAME'));
    assert.deepEqual(generic(serviceBuild, 'workloads/iot-service'), generic(operatorBuild, 'operators/iot'));
    assert.match(serviceBuild.at(-1)!, /^RUN node --import tsx images\/bundle\.ts iot-service$/);
  });

  it("the IoT service's Dockerfile has one target per component, each as the pod user 10001 reporting VERSION", () => {
    const byName = stages(iotServiceDockerfile());
    assert.deepEqual([...byName.keys()], ['build', 'nats-server', ...IOT_SERVICE_COMPONENTS]);
    for (const component of IOT_SERVICE_COMPONENTS) {
      const lines = byName.get(component)!;
      assert.equal(lines[0], `FROM \${NODE_IMAGE} AS ${component}`);
      assert.deepEqual(lines.slice(-4, -1), ['ARG VERSION', 'ENV IOT_SERVICE_VERSION=${VERSION}', 'USER 10001:10001'], component);
      const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/.exec(lines.at(-1)!)![1]!) as string[];
      if (component === 'broker' || component === 'database') {
        assert.deepEqual(entrypoint, [`/usr/local/bin/iot-${component}`]);
        assert.ok(lines.includes(`COPY workloads/iot-service/image/${component}.sh /usr/local/bin/iot-${component}`), component);
        assert.match(lines.join('\n'), /(RUN|&&) useradd --uid 10001 --user-group --no-create-home --home-dir \/var\/lib\/iot iot$/m, component);
      } else {
        assert.deepEqual(entrypoint, ['node', `${component}.mjs`]);
        assert.ok(lines.includes('ENV NODE_ENV=production') && lines.includes('COPY --from=build /src/workloads/iot-service/dist/ ./'), component);
      }
    }
  });

  it("the IoT service's database carries schema.sql where its roles script applies it from, and the roles script where its entry script and Patroni run it", () => {
    const database = stages(iotServiceDockerfile()).get('database')!;
    assert.ok(database.includes(`COPY ${IOT_SERVICE_SCHEMA} ${DATABASE_SCHEMA_PATH}`));
    assert.ok(database.includes(`COPY workloads/iot-service/image/database-roles.sh ${DATABASE_ROLES_SCRIPT}`));
    assert.match(readFileSync(path.join(root, 'workloads/iot-service/image/database-roles.sh'), 'utf8'), new RegExp(`^psql -d iot -f ${DATABASE_SCHEMA_PATH.replaceAll('.', '\\.')}$`, 'm'));
    const entry = readFileSync(path.join(root, 'workloads/iot-service/image/database.sh'), 'utf8');
    for (const run of [`^${DATABASE_ROLES_SCRIPT}$`, `^  post_bootstrap: ${DATABASE_ROLES_SCRIPT}$`, `^    on_start: ${DATABASE_ROLES_SCRIPT}$`, `^    on_role_change: ${DATABASE_ROLES_SCRIPT}$`]) {
      assert.match(entry, new RegExp(run, 'm'));
    }
    assert.ok(existsSync(path.join(root, IOT_SERVICE_SCHEMA)));
  });

  it("the IoT service's broker is NATS Server of the version the module cluster/engines/nats-server pins, from an image argument (no Go base)", () => {
    const text = iotServiceDockerfile();
    const byName = stages(text);
    assert.deepEqual(byName.get('nats-server'), ['FROM ${NATS_SERVER_IMAGE} AS nats-server']);
    assert.ok(byName.get('broker')!.includes('COPY --from=nats-server /nats-server /usr/local/bin/nats-server'));
    const pinned = /^\tgithub\.com\/nats-io\/nats-server\/v2 v(\d+\.\d+\.\d+)/m.exec(readFileSync(path.join(root, 'cluster/engines/nats-server/go.mod'), 'utf8'));
    assert.ok(pinned);
    assert.match(text, new RegExp(`^ARG NATS_SERVER_IMAGE=nats:${pinned[1]!.replace(/\./g, '\\.')}$`, 'm'));
    assert.doesNotMatch(text, /GO_IMAGE/);
  });

  it('images/bases.sh provides exactly the base image arguments the Dockerfiles declare', () => {
    const bases = readFileSync(path.join(root, 'images/bases.sh'), 'utf8');
    const body = /^build_args\(\) \{\n([\s\S]*?)\n\}/m.exec(bases);
    assert.ok(body, 'bases.sh prints its build arguments from build_args()');
    const provided = [...body[1]!.matchAll(/--build-arg "([A-Z_]+)=\$([A-Z_]+)"/g)].map((m) => m[1]!);
    const declared = new Set(Object.values(generatedDockerfiles()).flatMap((text) => [...text.matchAll(/^ARG ([A-Z_]+_IMAGE)=/gm)].map((m) => m[1]!)));
    declared.delete('NATS_SERVER_IMAGE'); // made by scripts/iot-service-images.ts from the engine build, not a base
    assert.deepEqual([...provided].sort(), [...declared].sort());
    for (const name of provided) assert.match(bases, new RegExp(`^${name}=localhost/iot-operator/\\S+$`, 'm'), `${name} names a local image`);
  });
});
