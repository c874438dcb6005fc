/**
 * Runs one of the SDK's workers inside an operator project: `node --import tsx <worker> <args>`
 * started in the project directory, so the project's TypeScript and its own copy of
 * @iot-operator/runtime load exactly as when the operator runs.
 *
 * Guarantees: a project where tsx cannot be resolved (no node_modules of its own, nor of a
 * workspace it is part of) gets a clear error instead of a module-loading trace; a failing
 * worker's stderr becomes the error message; stdout is returned whole.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The file of the module at `relative` (no extension) from `importMetaUrl`: .ts in the sources, .js when compiled. */
export function moduleFile(importMetaUrl: string, relative: string): string {
  return fileURLToPath(new URL(`./${relative}${path.extname(fileURLToPath(importMetaUrl))}`, importMetaUrl));
}

function resolvesTsx(projectDir: string): boolean {
  try {
    createRequire(path.join(projectDir, 'package.json')).resolve('tsx');
    return true;
  } catch {
    return false;
  }
}

export async function runProjectWorker(projectDir: string, workerFile: string, args: readonly string[], failure: string): Promise<string> {
  if (!resolvesTsx(projectDir)) throw new Error(`${projectDir} cannot load tsx: run \`npm install\` first`);
  try {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', workerFile, ...args], { cwd: projectDir, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(`${failure}: ${stderr || (err as Error).message}`);
  }
}
