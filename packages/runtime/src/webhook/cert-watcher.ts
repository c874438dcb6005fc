/**
 * A serving certificate and key read from files and read again when they change, as
 * controller-runtime's certwatcher: a rotated certificate (cert-manager renewing a Secret, a
 * kubelet swapping the mounted files) is served to new connections without a restart.
 *
 * Guarantees:
 * - `start` reads both files; a missing or unusable pair (unreadable, not PEM, key not matching
 *   the certificate) fails it with an error naming the files.
 * - Afterwards the files' directories are watched (a Secret volume swaps a `..data` symlink, so
 *   the directory is what changes) and both files are also read every `intervalMs` (default
 *   10 s) in case a change was not signalled; when their content differs from what is served and
 *   forms a usable pair, `onChange` receives it. A pair caught half-written (a new certificate
 *   with the old key) is not used: the old one stays until a later read finds a usable pair.
 * - `stop` ends watching and reading; nothing keeps the process alive meanwhile.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';
import type { Logger } from 'pino';

export interface KeyPair {
  cert: Buffer;
  key: Buffer;
}

export interface CertWatcherOptions {
  certFile: string;
  keyFile: string;
  /** How often both files are read regardless of change notifications (default 10 s). */
  intervalMs?: number;
  logger?: Logger;
  /** Called with every new usable pair found after `start`. */
  onChange: (pair: KeyPair) => void;
}

export class CertWatcher {
  private current: KeyPair | undefined;
  private watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private reading: Promise<void> = Promise.resolve();

  constructor(private readonly options: CertWatcherOptions) {}

  /** Reads the pair (rejecting when it is unusable), then watches the files; resolves with the pair. */
  async start(): Promise<KeyPair> {
    const failed = (problem: string) => new Error(`webhook certificate ${this.options.certFile} with key ${this.options.keyFile}: ${problem}`);
    const pair = await this.read().catch((err: unknown) => {
      throw failed(err instanceof Error ? err.message : String(err));
    });
    const problem = unusable(pair);
    if (problem) throw failed(problem);
    this.current = pair;
    for (const dir of new Set([path.dirname(this.options.certFile), path.dirname(this.options.keyFile)])) {
      try {
        const watcher = watch(dir, { persistent: false }, () => this.soon());
        watcher.on('error', () => watcher.close());
        this.watchers.push(watcher);
      } catch (err) {
        this.options.logger?.debug({ dir, err: err instanceof Error ? err.message : String(err) }, 'cannot watch the certificate directory; reading it periodically only');
      }
    }
    this.timer = setInterval(() => this.soon(), this.options.intervalMs ?? 10_000);
    this.timer.unref();
    return pair;
  }

  stop(): void {
    for (const watcher of this.watchers) watcher.close();
    this.watchers = [];
    clearInterval(this.timer);
    clearTimeout(this.debounce);
  }

  /** Reads again shortly: a rotation writes several files, one reading after the burst is enough. */
  private soon(): void {
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => (this.reading = this.reading.then(() => this.reload())), 100);
    this.debounce.unref();
  }

  private async reload(): Promise<void> {
    let pair: KeyPair;
    try {
      pair = await this.read();
    } catch (err) {
      this.options.logger?.warn({ err: err instanceof Error ? err.message : String(err) }, 'cannot read the webhook certificate; serving the previous one');
      return;
    }
    if (this.current && pair.cert.equals(this.current.cert) && pair.key.equals(this.current.key)) return;
    const problem = unusable(pair);
    if (problem) {
      this.options.logger?.warn({ certFile: this.options.certFile, problem }, 'the webhook certificate files changed but are not usable yet; serving the previous one');
      return;
    }
    this.current = pair;
    this.options.logger?.info({ certFile: this.options.certFile }, 'serving the webhook certificate read anew');
    this.options.onChange(pair);
  }

  private async read(): Promise<KeyPair> {
    const [cert, key] = await Promise.all([readFile(this.options.certFile), readFile(this.options.keyFile)]);
    return { cert, key };
  }
}

/** Why the pair cannot be served, or undefined when it can. */
function unusable(pair: KeyPair): string | undefined {
  try {
    tls.createSecureContext(pair);
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
