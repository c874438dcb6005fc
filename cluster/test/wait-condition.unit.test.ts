// wait_condition (cluster/lib.sh) waits for a condition until its deadline, also where
// kubectl wait gives up at once: on an object whose .status.conditions is still null (a CRD just
// applied), kubectl 1.33 exits with ".status.conditions accessor error" instead of waiting, which
// failed OLM's install right after its CRDs were applied. A stand-in kubectl (pure shell logic;
// the real one is exercised by every cluster up run) answers as the real one did.
//
//   node --import tsx --test cluster/test/wait-condition.unit.test.ts
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const common = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "lib.sh");
const ACCESSOR_ERROR = "error: .status.conditions accessor error: <nil> is of the type <nil>, expected []interface{}";

/** Runs wait_condition with a kubectl that fails its first `failures` calls with `answer`, then succeeds. */
function waitCondition(failures: number, timeoutS: number, answer = ACCESSOR_ERROR) {
  const dir = mkdtempSync(path.join(tmpdir(), "wait-condition-"));
  try {
    const calls = path.join(dir, "calls");
    writeFileSync(calls, "");
    writeFileSync(
      path.join(dir, "kubectl"),
      `#!/bin/bash\necho "$*" >> "${calls}"\nif (( $(wc -l < "${calls}") <= ${failures} )); then echo '${answer}' >&2; exit 1; fi\necho "condition met"\n`,
    );
    chmodSync(path.join(dir, "kubectl"), 0o755);
    const run = spawnSync("bash", ["-c", `source "${common}"; BIN_DIR="${dir}"; wait_condition Established ${timeoutS} crd/a.example.com crd/b.example.com`], {
      encoding: "utf8",
    });
    return { status: run.status, stderr: run.stderr, calls: readFileSync(calls, "utf8").trim().split("\n").filter(Boolean) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("wait_condition", () => {
  test("asks again after kubectl gives up on conditions that are still null, and succeeds once they are met", () => {
    const r = waitCondition(2, 30);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.calls.length, 3);
    assert.match(r.calls[0]!, /^--kubeconfig \S+ wait --for=condition=Established --timeout=5s crd\/a\.example\.com crd\/b\.example\.com$/);
  });

  test("fails after its deadline and logs kubectl's last answer", () => {
    const r = waitCondition(1000, 2, "error: timed out waiting for the condition on customresourcedefinitions/a.example.com");
    assert.equal(r.status, 1);
    assert.ok(r.calls.length >= 2, `asked ${r.calls.length} times`);
    assert.match(r.stderr, /kubectl wait --for=condition=Established, last answer: error: timed out waiting for the condition/);
  });
});
