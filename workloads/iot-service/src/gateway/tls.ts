/**
 * The gateway's TLS certificate, read from a directory (a Kubernetes Secret volume) and followed
 * as it changes, and the device identity a client certificate carries.
 *
 * Guarantees: the directory (IOT_GATEWAY_TLS_DIR, default /etc/iot/tls) holds `tls.crt` (the
 * chain), `tls.key` and optionally `client-ca.crt`. `GatewayCertificate` reads them at once and
 * again every `pollMs` (default 5 s); a set that differs from the one in use and makes a valid
 * context is applied to every server it secures (`setSecureContext`: new connections get it,
 * connected devices stay). A missing, unreadable or invalid set is logged once per distinct
 * problem and never applied: before any set loaded, `ready()` throws that problem (the gateway is
 * unready, never crashing); after, the last valid set stays in use. With `client-ca.crt` the
 * servers ask each client for a certificate: a presented certificate that does not verify against
 * that CA, or whose subject CN is not a device id, closes the connection during its handshake
 * (`onRefused`); a verified one makes its CN the connection's device (`certificateDevice`).
 * Without it no certificate is asked for and `certificateDevice` is undefined.
 */

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createSecureContext, type TLSSocket, type Server as TlsServer } from 'node:tls';
import type { Logger } from '../shared/log.ts';
import { isDeviceId } from '../shared/telemetry.ts';

export const DEFAULT_TLS_DIR = '/etc/iot/tls';

interface TlsFiles {
  cert: Buffer;
  key: Buffer;
  clientCa?: Buffer;
}

function readOptional(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The files of `dir`, checked to make a TLS context; throws saying what is wrong. */
function readTlsFiles(dir: string): TlsFiles {
  const read = (name: string) => {
    try {
      return readFileSync(path.join(dir, name));
    } catch (error) {
      throw new Error(`cannot read ${path.join(dir, name)}: ${(error as Error).message}`);
    }
  };
  const files = { cert: read('tls.crt'), key: read('tls.key'), clientCa: readOptional(path.join(dir, 'client-ca.crt')) };
  try {
    createSecureContext({ cert: files.cert, key: files.key, ca: files.clientCa });
  } catch (error) {
    throw new Error(`the certificate in ${dir} is not usable: ${(error as Error).message}`);
  }
  return files;
}

const same = (a: TlsFiles, b: TlsFiles) => a.cert.equals(b.cert) && a.key.equals(b.key) && (a.clientCa?.equals(b.clientCa ?? Buffer.alloc(0)) ?? !b.clientCa);

/** The device a verified client certificate names (its subject CN), or undefined. */
export function certificateDevice(socket: unknown): string | undefined {
  const tlsSocket = socket as Partial<TLSSocket>;
  if (!tlsSocket.encrypted || !tlsSocket.authorized || !tlsSocket.getPeerCertificate) return undefined;
  const cn = tlsSocket.getPeerCertificate().subject?.CN;
  return typeof cn === 'string' && isDeviceId(cn) ? cn : undefined;
}

export interface GatewayCertificateOptions {
  dir: string;
  log: Logger;
  pollMs?: number;
  /** A connection closed in its handshake for its client certificate. */
  onRefused?: (reason: string) => void;
}

export class GatewayCertificate {
  private files: TlsFiles | undefined;
  private problem = 'not yet read';
  private readonly servers: TlsServer[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: GatewayCertificateOptions) {
    this.reload();
    this.timer = setInterval(() => this.reload(), options.pollMs ?? 5_000);
    this.timer.unref();
  }

  /** The readiness check: throws until a certificate loaded. */
  ready(): void {
    if (!this.files) throw new Error(this.problem);
  }

  /** Secures `server` with the certificate, now and after each change. */
  secure<S extends TlsServer>(server: S): S {
    this.servers.push(server);
    if (this.files) this.apply(server, this.files);
    server.on('secureConnection', (socket: TLSSocket) => {
      if (!(server as unknown as { requestCert: boolean }).requestCert || !socket.getPeerCertificate().subject) return; // no certificate asked for or given
      const reason = !socket.authorized
        ? `client certificate not verified: ${String(socket.authorizationError)}`
        : certificateDevice(socket) === undefined
          ? 'client certificate CN is not a device id'
          : undefined;
      if (!reason) return;
      this.options.log.warn('tls connection refused', { remote: socket.remoteAddress, reason });
      this.options.onRefused?.(reason);
      socket.destroy();
    });
    return server;
  }

  close(): void {
    clearInterval(this.timer);
  }

  private apply(server: TlsServer, files: TlsFiles): void {
    const mutual = server as unknown as { requestCert: boolean; rejectUnauthorized: boolean };
    mutual.requestCert = files.clientCa !== undefined;
    mutual.rejectUnauthorized = false; // a device without a certificate may still log in with its password
    server.setSecureContext({ cert: files.cert, key: files.key, ca: files.clientCa });
  }

  private reload(): void {
    let files: TlsFiles;
    try {
      files = readTlsFiles(this.options.dir);
    } catch (error) {
      const problem = (error as Error).message;
      if (problem !== this.problem) this.options.log.error('tls certificate not loaded', { dir: this.options.dir, reason: problem, serving: this.files ? 'the previous certificate' : 'no TLS connections' });
      this.problem = problem;
      return;
    }
    if (this.files && same(this.files, files)) return;
    for (const server of this.servers) this.apply(server, files);
    this.options.log.info('tls certificate loaded', { dir: this.options.dir, mutual: files.clientCa !== undefined });
    this.files = files;
    this.problem = '';
  }
}
