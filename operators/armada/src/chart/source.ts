/**
 * Chart sources: where Helm gets an ArmadaChart's chart from.
 *
 * Guarantees:
 * - `local`: `location` (+ `subpath`) is a directory on the operator's filesystem holding a
 *   Chart.yaml; Helm reads it as is.
 * - `tar`: `location` is an http(s) URL of a gzipped tar archive, as Armada reads it: downloaded
 *   (at most 20 MiB, 120 s), extracted safely (tar-archive.ts: nothing outside the tree, at most
 *   100 MiB of content) into a directory named by the content's digest, then `subpath` selects
 *   the chart directory inside it — a `helm package` archive holds its chart under the chart's
 *   name, so Armada users write `subpath: <chart>`; without a subpath the archive's root, or its
 *   single top folder, must be the chart. Nothing is handed to Helm from a half-read archive.
 * - `git`: `location` is cloned once per operator process (git CLI) into a private work
 *   directory and fetched again at every resolution; `reference` (branch, tag or commit; default
 *   the remote's default branch) is resolved to a commit, checked out into a directory of its own
 *   (never changed afterwards), and `subpath` must hold a Chart.yaml there. Resolutions of one
 *   repository are serialised.
 * - Every problem is a `SourceError` whose message names the field and says what to fix (unknown
 *   type, missing directory, not a chart, clone failure, unknown reference); nothing else is
 *   touched. It is `transient` when trying again may succeed without a spec change (a download
 *   or clone that fails on the network, an HTTP 5xx, 408 or 429), else the spec must change.
 * - `identity` is what makes two resolutions the same chart: the directory, for git the resolved
 *   commit (so a moved branch counts as a change), for tar the archive's content digest (new
 *   content at the same URL is a change, the same content is not).
 */

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { SOURCE_TYPES, type ChartSource } from '../api/armada.ts';
import { ArchiveError, defaultExtractLimits, extractTarGz } from './tar-archive.ts';

const run = promisify(execFile);

export class SourceError extends Error {
  override name = 'SourceError';
  constructor(
    message: string,
    /** True when trying again later may succeed (network, a server error); false when the spec must change. */
    readonly transient = false,
  ) {
    super(message);
  }
}

export interface ResolvedSource {
  /** What Helm is given: a chart directory or a .tgz URL. */
  chart: string;
  /** Stable description of the chart's origin, part of the release's input digest. */
  identity: Record<string, string>;
}

export interface SourceResolverOptions {
  /** Private directory for git clones and checkouts. */
  workDir: string;
  /** Seconds a git command may take (default 120). */
  gitTimeoutSeconds?: number;
}

export class SourceResolver {
  private readonly repoLocks = new Map<string, Promise<unknown>>();

  constructor(private readonly options: SourceResolverOptions) {}

  async resolve(source: ChartSource): Promise<ResolvedSource> {
    switch (source.type) {
      case 'local':
        return resolveLocal(source);
      case 'tar':
        return this.serialised(source.location, () => this.resolveTar(source));
      case 'git':
        return this.serialised(source.location, () => this.resolveGit(source));
      default:
        throw new SourceError(`source.type "${source.type}" is unknown: use one of ${SOURCE_TYPES.join(', ')}`);
    }
  }

  private async resolveGit(source: ChartSource): Promise<ResolvedSource> {
    const url = source.location;
    const repoDir = path.join(this.options.workDir, 'git', digestOf(url).slice(0, 16));
    const bare = path.join(repoDir, 'repo.git');
    if (!existsSync(path.join(bare, 'HEAD'))) {
      await rm(repoDir, { recursive: true, force: true });
      await mkdir(repoDir, { recursive: true });
      await this.git(['clone', '--quiet', '--mirror', url, bare], `source.location: cannot clone ${url} (check the URL and that the operator can reach it)`);
    } else {
      await this.git(['--git-dir', bare, 'fetch', '--quiet', '--prune', '--force', 'origin'], `source.location: cannot fetch ${url}`);
    }
    const reference = source.reference || 'HEAD';
    const commit = await this.commitOf(bare, reference);
    if (!commit) throw new SourceError(`source.reference: git reference "${reference}" not found in ${url}: name an existing branch, tag or commit`);
    const checkout = path.join(repoDir, 'checkouts', commit);
    if (!existsSync(checkout)) {
      const partial = `${checkout}.partial`;
      await rm(partial, { recursive: true, force: true });
      await mkdir(partial, { recursive: true });
      await this.git(['--git-dir', bare, '--work-tree', partial, 'checkout', '--quiet', '--force', commit, '--', '.'], `cannot check out ${commit} of ${url}`);
      await rm(checkout, { recursive: true, force: true });
      await run('mv', ['-T', partial, checkout]);
    }
    const chart = path.join(checkout, source.subpath || '.');
    requireChartDirectory(chart, `source.subpath "${source.subpath ?? ''}" of ${url} at ${reference}`);
    return { chart, identity: { type: 'git', url, subpath: normalSubpath(source.subpath), commit } };
  }

  private async resolveTar(source: ChartSource): Promise<ResolvedSource> {
    let url: URL;
    try {
      url = new URL(source.location);
    } catch {
      throw new SourceError(`source.location "${source.location}" is not a URL: a tar source is the http(s) URL of a chart archive (.tgz)`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new SourceError(`source.location ${source.location} must be an http(s) URL of a chart archive (.tgz)`);
    const archive = await download(url);
    const digest = createHash('sha256').update(archive).digest('hex');
    const dir = path.join(this.options.workDir, 'tar', digest.slice(0, 32));
    if (!existsSync(dir)) {
      await mkdir(path.dirname(dir), { recursive: true });
      try {
        await extractTarGz(archive, dir);
      } catch (err) {
        if (err instanceof ArchiveError) throw new SourceError(`source.location ${url}: the archive was refused: ${err.message}`);
        throw err;
      }
    }
    const chart = await chartInArchive(dir, source.subpath, url.toString());
    return { chart, identity: { type: 'tar', url: url.toString(), subpath: normalSubpath(source.subpath), digest } };
  }

  private async commitOf(bare: string, reference: string): Promise<string | undefined> {
    for (const candidate of [`refs/heads/${reference}`, `refs/tags/${reference}`, reference]) {
      try {
        const { stdout } = await run('git', ['--git-dir', bare, 'rev-parse', '--verify', '--quiet', `${candidate}^{commit}`], { timeout: 30_000 });
        const commit = stdout.trim();
        if (/^[0-9a-f]{40,64}$/.test(commit)) return commit;
      } catch {
        // not this kind of reference
      }
    }
    return undefined;
  }

  private async git(args: string[], what: string): Promise<void> {
    try {
      await run('git', args, { timeout: (this.options.gitTimeoutSeconds ?? 120) * 1000, env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr?.trim();
      const message = stderr ? stderr.split('\n').filter(Boolean).at(-1) : err instanceof Error ? err.message : String(err);
      // Clones and fetches cross the network: retried, never taken as a verdict on the spec.
      throw new SourceError(`${what}: ${message}`, true);
    }
  }

  private serialised<T>(key: string, work: () => Promise<T>): Promise<T> {
    const previous = this.repoLocks.get(key) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    this.repoLocks.set(key, next);
    void next.finally(() => {
      if (this.repoLocks.get(key) === next) this.repoLocks.delete(key);
    }).catch(() => undefined);
    return next;
  }
}

function resolveLocal(source: ChartSource): ResolvedSource {
  if (!existsSync(source.location)) throw new SourceError(`source.location ${source.location} does not exist on the operator's filesystem: name a chart directory there`);
  const chart = path.resolve(source.location, source.subpath || '.');
  requireChartDirectory(chart, chart);
  return { chart, identity: { type: 'local', path: chart } };
}

/** The archive at `url`, read whole (at most the archive limit) before anything uses it. */
async function download(url: URL): Promise<Buffer> {
  const limit = defaultExtractLimits.maxArchiveBytes;
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(120_000), redirect: 'follow' });
  } catch (err) {
    throw new SourceError(`source.location ${url}: cannot download it: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}`, true);
  }
  if (response.status >= 500 || response.status === 429 || response.status === 408) {
    throw new SourceError(`source.location ${url}: the server answered HTTP ${response.status}; trying again later`, true);
  }
  if (!response.ok || !response.body) throw new SourceError(`source.location ${url}: the server answered HTTP ${response.status}; check the URL`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += chunk.length;
    if (size > limit) throw new SourceError(`source.location ${url}: the archive is larger than ${limit} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

/** The chart directory of an extracted archive: `subpath` inside it, else its root or single top folder. */
async function chartInArchive(dir: string, subpath: string | undefined, url: string): Promise<string> {
  if (normalSubpath(subpath) !== '.') {
    const chart = path.resolve(dir, subpath!);
    if (!chart.startsWith(dir + path.sep)) throw new SourceError(`source.subpath "${subpath}" points outside the archive of ${url}`);
    requireChartDirectory(chart, `source.subpath "${subpath}" of the archive ${url}`);
    return chart;
  }
  if (existsSync(path.join(dir, 'Chart.yaml'))) return dir;
  const top = (await readdir(dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  if (top.length === 1 && existsSync(path.join(dir, top[0]!, 'Chart.yaml'))) return path.join(dir, top[0]!);
  throw new SourceError(`the archive ${url} has no Chart.yaml at its root${top.length > 0 ? `: set source.subpath to the chart's folder (${top.join(', ')})` : ''}`);
}

function requireChartDirectory(dir: string, described: string): void {
  if (!existsSync(path.join(dir, 'Chart.yaml'))) throw new SourceError(`${described} is not a Helm chart: no Chart.yaml in ${dir}`);
}

function normalSubpath(subpath: string | undefined): string {
  const normal = path.posix.normalize(subpath || '.').replace(/\/$/, '');
  return normal === '' ? '.' : normal;
}

export function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
