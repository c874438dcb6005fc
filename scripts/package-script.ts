/**
 * A workspace's own `generate` package script as a generator of `npm run generate`: it runs as
 * `npm run -w <workspace> generate` always does, with scripts/capture-writes.mjs loaded, so its
 * files are returned instead of written. The script decides which files it writes; nothing here
 * names them.
 *
 * Guarantees: the generator is named `<directory name>:generate`; it fails, with the script's
 * output, when the script fails or writes outside the repository.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fromRoot, repoRoot, type Files, type Generator } from './generator.ts';

const run = promisify(execFile);
const capture = path.join(repoRoot, 'scripts/capture-writes.mjs');

/** The workspace in `dir` (from the repository root) has a `generate` script. */
export function hasGenerateScript(dir: string): boolean {
  const manifest = JSON.parse(readFileSync(path.join(repoRoot, dir, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
  return manifest.scripts?.['generate'] !== undefined;
}

export function packageScriptGenerator(dir: string): Generator {
  return {
    name: `${path.basename(dir)}:generate`,
    files: async (): Promise<Files> => {
      const scratch = mkdtempSync(path.join(os.tmpdir(), 'generate-'));
      const captureFile = path.join(scratch, 'written.json');
      try {
        await run('npm', ['run', '--silent', '--workspace', dir, 'generate'], {
          cwd: repoRoot,
          env: { ...process.env, npm_config_node_options: `--import ${capture}`, GENERATE_CAPTURE_FILE: captureFile },
        }).catch((error: { stdout?: string; stderr?: string; message: string }) => {
          throw new Error(`npm run -w ${dir} generate failed: ${error.stderr || error.stdout || error.message}`);
        });
        const written = JSON.parse(readFileSync(captureFile, 'utf8')) as Files;
        return Object.fromEntries(
          Object.entries(written).map(([file, text]) => {
            const relative = fromRoot(file);
            if (relative.startsWith('..') || path.isAbsolute(relative)) throw new Error(`npm run -w ${dir} generate writes ${file}, outside the repository`);
            return [relative, text];
          }),
        );
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }
    },
  };
}
