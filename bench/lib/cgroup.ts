/**
 * A memory cgroup for the operator under test, so it runs under the memory limit its Deployment
 * gives it in a cluster (the container runtime puts a container's processes in such a cgroup;
 * Node.js then sizes its heap for the limit instead of for the host's whole memory).
 *
 * Guarantees: `createMemoryCgroup` makes a fresh cgroup with the given limit on the unified
 * hierarchy (cgroup v2, `memory.max`) when it has the memory controller, otherwise on the v1
 * memory hierarchy (`memory.limit_in_bytes`), or fails with an error saying what is missing;
 * `enterCommand` prefixes a shell command so that the shell moves itself into the cgroup before it
 * execs the command; `remove` deletes the cgroup once its processes are gone.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export interface MemoryCgroup {
  dir: string;
  remove(): void;
}

const ROOT = '/sys/fs/cgroup';

/** Where a memory cgroup can be made: the v2 root when it offers the memory controller, else the v1 memory hierarchy. */
export function memoryHierarchy(root = ROOT): { dir: string; limitFile: string } | undefined {
  const controllers = path.join(root, 'cgroup.controllers');
  if (existsSync(controllers) && readFileSync(controllers, 'utf8').split(/\s+/).includes('memory')) return { dir: root, limitFile: 'memory.max' };
  const v1 = path.join(root, 'memory');
  if (existsSync(path.join(v1, 'memory.limit_in_bytes'))) return { dir: v1, limitFile: 'memory.limit_in_bytes' };
  return undefined;
}

export function createMemoryCgroup(name: string, limitMiB: number, root = ROOT): MemoryCgroup {
  const hierarchy = memoryHierarchy(root);
  if (!hierarchy) throw new Error(`--memory-limit needs a memory cgroup hierarchy under ${root} (cgroup v2 with the memory controller, or v1 memory); none found`);
  const dir = path.join(hierarchy.dir, name);
  try {
    mkdirSync(dir);
    writeFileSync(path.join(dir, hierarchy.limitFile), String(Math.round(limitMiB * 1024 * 1024)));
  } catch (err) {
    throw new Error(`--memory-limit: could not create the memory cgroup ${dir} (it needs root): ${(err as Error).message}`);
  }
  return {
    dir,
    remove: () => {
      try {
        rmdirSync(dir);
      } catch {
        // still has a process, or already gone: nothing more to do
      }
    },
  };
}

/** `command` run by a shell that first moves itself into `cgroup` (its exec keeps the membership). */
export function enterCommand(cgroup: MemoryCgroup, command: string): string {
  return `echo $$ > ${path.join(cgroup.dir, 'cgroup.procs')} && exec ${command}`;
}
