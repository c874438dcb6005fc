// Checks the project's own kwok Stages (cluster/parts/control-plane/kwok-stages/*.yaml) before any cluster loads them.
// kwok v0.7.0 accepts a Stage with a selector it cannot evaluate and then fails on every pod event
// ("stage match: operator ... is not supported"): no pod of the cluster gets past Pending while
// cluster up reports the cluster healthy. So each file must be one Stage whose selector kwok
// can evaluate, with a name of its own (kwok's default Stages keep theirs).
//
//   node --import tsx --test cluster/test/kwok-stages.unit.test.ts
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const stagesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "parts", "control-plane", "kwok-stages");
// kwok's default node and pod Stages, which kwokctl writes into every cluster's kwok.yaml.
const KWOK_DEFAULT_STAGES = ["node-initialize", "node-heartbeat-with-lease", "node-heartbeat", "pod-ready", "pod-complete", "pod-delete"];
// The operators kwok's selector understands (sigs.k8s.io/kwok/pkg/utils/expression/selector.go).
const WITH_VALUES = ["In", "NotIn"];
const WITHOUT_VALUES = ["Exists", "DoesNotExist"];

interface Stage {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
  spec?: {
    resourceRef?: { apiGroup?: string; kind?: string };
    selector?: { matchExpressions?: { key?: string; operator?: string; values?: unknown[] }[] };
    next?: { statusTemplate?: string; delete?: boolean };
  };
}

const files = readdirSync(stagesDir).filter((f) => f.endsWith(".yaml")).sort();

describe("cluster/kwok-stages", () => {
  test("there is at least the helm test Stage", () => {
    assert.ok(files.includes("helm-test-pod.yaml"), `files: ${files.join(", ")}`);
  });

  const names = new Map<string, string>();
  for (const file of files) {
    test(`${file} is one Stage that kwok can evaluate`, () => {
      const docs = parseAllDocuments(readFileSync(path.join(stagesDir, file), "utf8"));
      assert.deepEqual(docs.flatMap((d) => d.errors.map((e) => e.message)), [], "valid YAML");
      const objects = docs.map((d) => d.toJSON() as Stage | null).filter((o) => o !== null);
      assert.equal(objects.length, 1, "exactly one object per file");
      const stage = objects[0]!;
      assert.equal(stage.apiVersion, "kwok.x-k8s.io/v1alpha1");
      assert.equal(stage.kind, "Stage");
      const name = stage.metadata?.name ?? "";
      assert.match(name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "metadata.name is a DNS label");
      assert.ok(!KWOK_DEFAULT_STAGES.includes(name), `${name} is the name of one of kwok's default Stages`);
      assert.equal(names.get(name), undefined, `${name} is also the name of the Stage in ${names.get(name)}`);
      names.set(name, file);
      assert.ok(stage.spec?.resourceRef?.kind, "spec.resourceRef.kind");
      assert.ok(stage.spec?.next?.statusTemplate || stage.spec?.next?.delete, "spec.next changes something");
      const expressions = stage.spec?.selector?.matchExpressions ?? [];
      assert.ok(expressions.length > 0, "a selector: a Stage without one would act on every object of its kind");
      for (const e of expressions) {
        assert.ok(e.key, "every expression has a key (a jq query)");
        if (WITH_VALUES.includes(e.operator ?? "")) assert.ok((e.values ?? []).length > 0, `${e.key}: ${e.operator} needs values`);
        else if (WITHOUT_VALUES.includes(e.operator ?? "")) assert.equal((e.values ?? []).length, 0, `${e.key}: ${e.operator} takes no values`);
        else assert.fail(`${e.key}: operator "${e.operator}" is not one kwok supports (${[...WITH_VALUES, ...WITHOUT_VALUES].join(", ")})`);
      }
    });
  }
});
