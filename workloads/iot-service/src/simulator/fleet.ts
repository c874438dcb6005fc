/**
 * A fleet of MQTT devices in one process, each kept connected the way a device in the field keeps
 * itself connected: for fleet tests and benchmarks (how many get in, how fast, after what).
 *
 * Guarantees:
 * - Every device connects as the gateway requires: client id = user name = its device id, its
 *   password, MQTT 3.1.1, clean session, keep-alive 60 s; over TLS for an mqtts:// URL, trusting
 *   what `tls` names (`mqttTlsOptions`), from `localAddress` when given (TLS only: a plaintext
 *   URL with one is refused at once, as mqtt.js would dial it from any address).
 * - One attempt (`connectOnce`, also on its own) ends with a CONNACK accepting it, or fails as
 *   `connack-<code>`, a network error's code (ECONNREFUSED …), `closed` (the connection ended
 *   before a CONNACK) or `timeout` (no CONNACK within `connectTimeoutMs`, default 30 s), the kind
 *   `failureKind` names. After every failure but CONNACK 4 and 5
 *   (bad credentials, not authorised: no retry changes them, and the device's run ends
 *   unconnected) the device tries again after `retryDelayMs` — the service's backoff (0.2 s
 *   doubling up to 5 s) times a random factor in [0.5, 1), so devices refused together do not all
 *   come back in the same instant. MQTT 3.1.1 gives no Retry-After: CONNACK 3 is all a device has.
 * - With `keep` (the default), a connected device whose connection closes (its gateway pod gone)
 *   starts a new run from that moment and connects again the same way, until `close`.
 * - `runs()` gives each device's runs in order (the first is the initial connection);
 *   `connected()` counts the devices connected now and `client(i)` is device i's connection now
 *   (undefined while it has none); `settled()` resolves once every device's first run has ended
 *   (connected, refused for good, or the fleet closed); `close()` ends every connection and retry
 *   and resolves once all are closed.
 */

import { setTimeout as sleep } from 'node:timers/promises';
import mqtt, { type MqttClient } from 'mqtt';
import { backoff } from '../shared/retry.ts';
import { isMqttTlsUrl, mqttTlsOptions } from './transport.ts';
import type { DeviceCredentials, GatewayTls } from './types.ts';

/** One device's way to a connection: from its first attempt to the CONNACK that accepted it. */
export interface ConnectRun {
  /** When its first attempt began (ms since the epoch). */
  startedAt: number;
  /** When the accepting CONNACK came; absent while none has (or none ever will: a refusal no retry changes). */
  connectedAt?: number;
  attempts: number;
  /** Failed attempts by kind: `connack-<code>`, a network error's code, `closed`, `timeout`. */
  failures: Record<string, number>;
}

export interface FleetOptions {
  tls?: GatewayTls;
  /** Connect again after a connection closes (default true). */
  keep?: boolean;
  connectTimeoutMs?: number;
  /** The local address connections come from (mqtts:// URLs only). */
  localAddress?: string;
}

export interface Fleet {
  runs(): ConnectRun[][];
  connected(): number;
  client(index: number): MqttClient | undefined;
  settled(): Promise<void>;
  close(): Promise<void>;
}

/** CONNACK codes of MQTT 3.1.1 that no retry changes: bad user name or password, not authorised. */
const PERMANENT = new Set(['connack-4', 'connack-5']);

export function retryDelayMs(failures: number, random: () => number = Math.random): number {
  return backoff(failures) * (0.5 + random() / 2);
}

class AttemptFailure extends Error {
  constructor(readonly kind: string) {
    super(kind);
  }
}

export function failureKind(error: unknown): string {
  if (error instanceof AttemptFailure) return error.kind;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'number') return `connack-${code}`;
  return typeof code === 'string' ? code : 'error';
}

/** One connection attempt: the connected client, or a rejection whose kind `failureKind` names. */
export function connectOnce(url: string, device: DeviceCredentials, options: FleetOptions = {}): Promise<MqttClient> {
  if (options.localAddress !== undefined && !isMqttTlsUrl(url)) return Promise.reject(new Error(`localAddress needs a TLS URL, not ${url}`));
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(url, {
      clientId: device.id,
      username: device.id,
      password: device.password,
      protocolVersion: 4,
      clean: true,
      keepalive: 60,
      reconnectPeriod: 0,
      connectTimeout: options.connectTimeoutMs ?? 30_000,
      ...mqttTlsOptions(url, options.tls),
      ...(options.localAddress !== undefined ? { localAddress: options.localAddress } : {}),
    });
    let failure: unknown;
    const timer = setTimeout(() => {
      failure = new AttemptFailure('timeout');
      client.end(true);
    }, options.connectTimeoutMs ?? 30_000);
    client.once('connect', () => {
      clearTimeout(timer);
      client.removeAllListeners('error');
      client.on('error', () => undefined); // a later error ends in 'close', which the fleet watches
      resolve(client);
    });
    client.on('error', (error) => (failure ??= error));
    client.once('close', () => {
      clearTimeout(timer);
      if (!client.connected) reject(failure ?? new AttemptFailure('closed'));
    });
  });
}

export function connectFleet(url: string, devices: readonly DeviceCredentials[], options: FleetOptions = {}): Fleet {
  const runs: ConnectRun[][] = devices.map(() => []);
  const clients: (MqttClient | undefined)[] = devices.map(() => undefined);
  const stopping = new AbortController();
  let connected = 0;

  /** Connects device `index` once, retrying; true once connected, false when refused for good or closing. */
  async function connectRun(device: DeviceCredentials, index: number): Promise<boolean> {
    const run: ConnectRun = { startedAt: Date.now(), attempts: 0, failures: {} };
    runs[index]!.push(run);
    let client: MqttClient | undefined;
    for (let failures = 1; !client; failures++) {
      if (stopping.signal.aborted) return false;
      run.attempts++;
      try {
        client = await connectOnce(url, device, options);
      } catch (error) {
        const kind = failureKind(error);
        run.failures[kind] = (run.failures[kind] ?? 0) + 1;
        if (PERMANENT.has(kind)) return false;
        await sleep(retryDelayMs(failures), undefined, { signal: stopping.signal }).catch(() => undefined);
      }
    }
    run.connectedAt = Date.now();
    if (stopping.signal.aborted) {
      await client.endAsync(true).catch(() => undefined); // connected while the fleet was closing
      return false;
    }
    clients[index] = client;
    connected++;
    return true;
  }

  /** Keeps device `index` connected (see `keep`), from `firstRun`, its first run under way. */
  async function keepConnected(device: DeviceCredentials, index: number, firstRun: Promise<boolean>): Promise<void> {
    for (let run = firstRun; await run; run = connectRun(device, index)) {
      await new Promise<void>((resolve) => clients[index]!.once('close', () => resolve()));
      connected--;
      clients[index] = undefined;
      if (!(options.keep ?? true) || stopping.signal.aborted) return;
    }
  }

  const firstRuns = devices.map((device, index) => connectRun(device, index));
  const running = Promise.all(devices.map((device, index) => keepConnected(device, index, firstRuns[index]!)));
  const settled = Promise.all(firstRuns).then(() => undefined);
  return {
    runs: () => runs.map((list) => list.map((run) => ({ ...run, failures: { ...run.failures } }))),
    connected: () => connected,
    client: (index) => clients[index],
    settled: () => settled,
    async close() {
      stopping.abort();
      await Promise.all(clients.map((client) => client?.endAsync(true).catch(() => undefined)));
      await running;
    },
  };
}
