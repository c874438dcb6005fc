/**
 * A fleet of simulated MQTT devices in one process, driven by the `fleet` scenario
 * (scenarios/fleet.ts) over the IPC channel of `fork` — so that the devices' work does not share
 * an event loop with the gateway, nor with the runner.
 *
 * Guarantees:
 * - Every device connects as the gateway requires — client id = username = its device id, its
 *   password, MQTT 3.1.1, clean session, keep-alive 60 s — and over TLS for an mqtts:// URL,
 *   trusting only the CA it is given (the simulator's `mqttTlsOptions`). One attempt ends with a
 *   CONNACK accepting it, or fails as `connack-<code>`, a network error's code (ECONNREFUSED …),
 *   `closed` (the connection ended before a CONNACK), `timeout` (no CONNACK within 30 s) or
 *   `error: <message>` (an error without a code).
 * - Where a device retries (`connect`, `logins`, `paced`), it does so after `retryDelayMs` (the
 *   project's backoff with jitter) on every failure but CONNACK 4 and 5 (wrong credentials, not
 *   authorised), which end its run unconnected: the reasons MQTT 3.1.1 gives are all it has to go
 *   by (no Retry-After).
 * - `connect` starts every device of a set at once and answers when each one is connected;
 *   with `keep`, a device whose connection closes (the gateway killed) records a new run from
 *   that moment and connects again in the same way, until `disconnect`. `runs` answers every
 *   device's runs, in order. `publish` has each connected device of a set publish QoS 1 messages
 *   one after the other, each as soon as the previous one's PUBACK came, until `endAt`, and
 *   answers the PUBACKs counted per second from `startAt`. `disconnect` ends a set's connections
 *   and stops its retries.
 * - `logins` goes through a list of logins with `concurrency` of them at once, each a connection
 *   up to its CONNACK, then a DISCONNECT; `paced` starts device i's login at `startAt` +
 *   i × `intervalMs`. Both answer each login's run.
 * - `flood` logs in as one device id with a fresh random password per attempt, `concurrency`
 *   attempts at once, each the moment the previous one ended, from `localAddress`, until `endAt`,
 *   and answers the attempts by outcome.
 * - Every second while any set is connecting or kept connected, it reports each set's connected
 *   devices and when it counted them (`progress`). It exits when the runner's channel closes.
 */
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { mqttTlsOptions } from '../../workloads/iot-service/src/simulator/transport.ts';
import type { DeviceCredentials, GatewayTls } from '../../workloads/iot-service/src/simulator/types.ts';
import { retryDelayMs, type ConnectRun } from '../lib/fleet.ts';

const CONNECT_TIMEOUT_MS = 30_000;
/** CONNACK codes of MQTT 3.1.1 that no retry changes: bad user name or password, not authorised. */
const PERMANENT = new Set(['connack-4', 'connack-5']);

interface Target {
  url: string;
  tls?: GatewayTls;
}

export type DeviceRequest =
  | ({ op: 'connect'; set: string; devices: DeviceCredentials[]; keep: boolean } & Target)
  | { op: 'runs'; set: string }
  | { op: 'publish'; set: string; startAt: number; endAt: number }
  | { op: 'disconnect'; set: string }
  | ({ op: 'logins'; logins: DeviceCredentials[]; concurrency: number } & Target)
  | ({ op: 'paced'; devices: DeviceCredentials[]; startAt: number; intervalMs: number } & Target)
  | ({ op: 'flood'; deviceId: string; concurrency: number; localAddress: string; endAt: number } & Target);

export interface PublishResult {
  perSecond: number[];
  /** Devices whose connection failed during the window. */
  failedDevices: number;
}

export interface FloodResult {
  attempts: number;
  outcomes: Record<string, number>;
}

export type DeviceReply = { id: number; result: unknown } | { id: number; error: string } | { event: 'progress'; at: number; connected: Record<string, number> };

const at = (): number => performance.timeOrigin + performance.now();

class AttemptFailure extends Error {
  constructor(readonly kind: string) {
    super(kind);
  }
}

function failureKind(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'number') return `connack-${code}`;
  return typeof code === 'string' ? code : `error: ${(error instanceof Error ? error.message : String(error)).slice(0, 60)}`;
}

/** One connection attempt: the connected client, or an AttemptFailure saying how it failed. */
function connectOnce(target: Target, device: DeviceCredentials, localAddress?: string): Promise<MqttClient> {
  const options: IClientOptions & { localAddress?: string } = {
    clientId: device.id,
    username: device.id,
    password: device.password,
    protocolVersion: 4,
    clean: true,
    keepalive: 60,
    reconnectPeriod: 0,
    connectTimeout: CONNECT_TIMEOUT_MS + 5_000, // ours below decides
    ...mqttTlsOptions(target.url, target.tls),
    ...(localAddress ? { localAddress } : {}),
  };
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(target.url, options);
    const timer = setTimeout(() => fail('timeout'), CONNECT_TIMEOUT_MS);
    const settle = () => {
      clearTimeout(timer);
      client.off('connect', onConnect);
      client.off('error', onError);
      client.off('close', onClose);
    };
    function fail(kind: string): void {
      settle();
      client.on('error', () => undefined);
      client.end(true);
      reject(new AttemptFailure(kind));
    }
    function onConnect(): void {
      settle();
      client.on('error', () => undefined); // a later error also closes the connection, which its owner sees
      resolve(client);
    }
    const onError = (error: unknown) => fail(failureKind(error));
    const onClose = () => fail('closed');
    client.on('connect', onConnect);
    client.on('error', onError);
    client.on('close', onClose);
  });
}

/** Attempts until connected (retrying as the module comment says), recording the run; undefined when refused for good or stopped. */
async function connectWithRetry(target: Target, device: DeviceCredentials, run: ConnectRun, signal?: AbortSignal): Promise<MqttClient | undefined> {
  for (;;) {
    if (signal?.aborted) return undefined;
    run.attempts++;
    try {
      const client = await connectOnce(target, device);
      run.connectedAt = at();
      if (signal?.aborted) client.end(true);
      return signal?.aborted ? undefined : client;
    } catch (error) {
      const kind = error instanceof AttemptFailure ? error.kind : failureKind(error);
      run.failures[kind] = (run.failures[kind] ?? 0) + 1;
      if (PERMANENT.has(kind)) return undefined;
      await sleep(retryDelayMs(Object.values(run.failures).reduce((s, n) => s + n, 0)), undefined, { signal }).catch(() => undefined);
    }
  }
}

const newRun = (): ConnectRun => ({ startedAt: at(), attempts: 0, failures: {} });

interface FleetSet {
  target: Target;
  devices: DeviceCredentials[];
  clients: (MqttClient | undefined)[];
  runs: ConnectRun[][];
  stop: AbortController;
}

const sets = new Map<string, FleetSet>();

function setOf(name: string): FleetSet {
  const set = sets.get(name);
  if (!set) throw new Error(`no set ${name}`);
  return set;
}

async function connectSet(name: string, target: Target, devices: DeviceCredentials[], keep: boolean): Promise<number> {
  const set: FleetSet = { target, devices, clients: devices.map(() => undefined), runs: devices.map(() => []), stop: new AbortController() };
  setMaxListeners(0, set.stop.signal); // every device waiting to retry listens to it
  sets.set(name, set);
  const connectDevice = async (i: number): Promise<void> => {
    const run = newRun();
    set.runs[i]!.push(run);
    const client = await connectWithRetry(target, devices[i]!, run, set.stop.signal);
    set.clients[i] = client;
    if (!client || !keep) return;
    client.once('close', () => {
      set.clients[i] = undefined;
      if (!set.stop.signal.aborted) void connectDevice(i);
    });
  };
  await Promise.all(devices.map((_, i) => connectDevice(i)));
  return set.clients.filter((c) => c !== undefined).length;
}

async function publishSet(name: string, startAt: number, endAt: number): Promise<PublishResult> {
  const set = setOf(name);
  const perSecond = new Array<number>(Math.ceil((endAt - startAt) / 1000)).fill(0);
  let failedDevices = 0;
  await Promise.all(
    set.clients.map(async (client, i) => {
      if (!client?.connected) return void failedDevices++;
      const topic = `telemetry/${set.devices[i]!.id}`;
      const closed = new Promise<never>((_, reject) => client.once('close', () => reject(new Error('closed'))));
      closed.catch(() => undefined);
      try {
        for (let seq = 0; at() < endAt; seq++) {
          await Promise.race([client.publishAsync(topic, `{"seq":${seq},"t":${Date.now()}}`, { qos: 1 }), closed]);
          const t = at();
          if (t >= startAt && t < endAt) perSecond[Math.floor((t - startAt) / 1000)]!++;
        }
      } catch {
        failedDevices++;
      }
    }),
  );
  return { perSecond, failedDevices };
}

async function disconnectSet(name: string): Promise<void> {
  const set = setOf(name);
  set.stop.abort();
  await Promise.all(set.clients.map((client) => client?.endAsync().catch(() => undefined)));
  set.clients.fill(undefined);
}

/** One login: connected (retrying), then a DISCONNECT; its run. */
async function login(target: Target, device: DeviceCredentials): Promise<ConnectRun> {
  const run = newRun();
  const client = await connectWithRetry(target, device, run);
  await client?.endAsync().catch(() => undefined);
  return run;
}

async function logins(target: Target, list: DeviceCredentials[], concurrency: number): Promise<ConnectRun[]> {
  const runs = new Array<ConnectRun>(list.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, list.length) }, async () => {
      while (next < list.length) {
        const i = next++;
        runs[i] = await login(target, list[i]!);
      }
    }),
  );
  return runs;
}

async function paced(target: Target, devices: DeviceCredentials[], startAt: number, intervalMs: number): Promise<ConnectRun[]> {
  return Promise.all(
    devices.map(async (device, i) => {
      await sleep(Math.max(0, startAt + i * intervalMs - at()));
      return login(target, device);
    }),
  );
}

async function flood(target: Target, deviceId: string, concurrency: number, localAddress: string, endAt: number): Promise<FloodResult> {
  const outcomes: Record<string, number> = {};
  let attempts = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (at() < endAt) {
        attempts++;
        let kind = 'accepted';
        try {
          (await connectOnce(target, { id: deviceId, password: randomBytes(24).toString('base64url') }, localAddress)).end(true);
        } catch (error) {
          kind = error instanceof AttemptFailure ? error.kind : failureKind(error);
        }
        outcomes[kind] = (outcomes[kind] ?? 0) + 1;
      }
    }),
  );
  return { attempts, outcomes };
}

async function handle(request: DeviceRequest): Promise<unknown> {
  switch (request.op) {
    case 'connect':
      return connectSet(request.set, request, request.devices, request.keep);
    case 'runs':
      return setOf(request.set).runs;
    case 'publish':
      return publishSet(request.set, request.startAt, request.endAt);
    case 'disconnect':
      return disconnectSet(request.set);
    case 'logins':
      return logins(request, request.logins, request.concurrency);
    case 'paced':
      return paced(request, request.devices, request.startAt, request.intervalMs);
    case 'flood':
      return flood(request, request.deviceId, request.concurrency, request.localAddress, request.endAt);
  }
}

const send = (reply: DeviceReply) => process.send?.(reply);

process.on('message', (message: { id: number; request: DeviceRequest }) => {
  handle(message.request).then(
    (result) => send({ id: message.id, result: result ?? null }),
    (error: unknown) => send({ id: message.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});
process.on('disconnect', () => process.exit(0));

setInterval(() => {
  const connecting = [...sets.entries()].filter(([, set]) => !set.stop.signal.aborted);
  if (connecting.length > 0) send({ event: 'progress', at: at(), connected: Object.fromEntries(connecting.map(([name, set]) => [name, set.clients.filter((c) => c?.connected).length])) });
}, 1_000);
