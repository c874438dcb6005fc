/**
 * A fleet of simulated MQTT devices in one process, driven by the `fleet` scenario
 * (scenarios/fleet.ts) over the IPC channel of `fork` — so that the devices' work does not share
 * an event loop with the gateway, nor with the runner.
 *
 * Guarantees:
 * - Devices connect, fail, retry and reconnect as the simulator's fleet makes them
 *   (workloads/iot-service simulator/fleet.ts `connectFleet`: client id = user name = device id,
 *   MQTT 3.1.1, over TLS trusting only the CA given for an mqtts:// URL; an attempt fails as
 *   `connack-<code>`, a network error's code, `closed` or `timeout` after 30 s; a retry after the
 *   service's backoff with jitter on every failure but CONNACK 4 and 5, which end the run
 *   unconnected). Every time is milliseconds since the epoch (Date.now), as the runner's.
 * - `connect` starts every device of a set at once and answers once each one's first run ended;
 *   with `keep`, a device whose connection closes (the gateway killed) records a new run from that
 *   moment and connects again in the same way, until `disconnect`. `runs` answers every device's
 *   runs, in order. `publish` has each connected device of a set publish QoS 1 messages one after
 *   the other, each as soon as the previous one's PUBACK came, until `endAt`, and answers the
 *   PUBACKs counted per second from `startAt`. `disconnect` ends a set's connections and retries.
 * - `logins` goes through a list of logins with `concurrency` of them at once, each a device
 *   connected up to its CONNACK (retrying as above), then closed; `paced` starts device i's login
 *   at `startAt` + i × `intervalMs`. Both answer each login's run.
 * - `flood` makes single attempts (`connectOnce`, no retry) as one device id with a fresh random
 *   password each, `concurrency` at once, each the moment the previous one ended, from
 *   `localAddress`, until `endAt`, and answers the attempts by outcome.
 * - Every second while any set is connected or connecting, it reports each set's connected
 *   devices and when it counted them (`progress`). It exits when the runner's channel closes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { connectFleet, connectOnce, failureKind, type ConnectRun, type Fleet } from '../../workloads/iot-service/src/simulator/fleet.ts';
import { generatePassword } from '../../workloads/iot-service/src/core/passwords.ts';
import type { DeviceCredentials, GatewayTls } from '../../workloads/iot-service/src/simulator/types.ts';

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

/** The sets connected or connecting, by name, each with its devices. */
const sets = new Map<string, { fleet: Fleet; devices: DeviceCredentials[] }>();

function setOf(name: string): { fleet: Fleet; devices: DeviceCredentials[] } {
  const set = sets.get(name);
  if (!set) throw new Error(`no set ${name}`);
  return set;
}

async function connectSet(name: string, target: Target, devices: DeviceCredentials[], keep: boolean): Promise<number> {
  const fleet = connectFleet(target.url, devices, { tls: target.tls, keep });
  sets.set(name, { fleet, devices });
  await fleet.settled();
  return fleet.connected();
}

async function publishSet(name: string, startAt: number, endAt: number): Promise<PublishResult> {
  const { fleet, devices } = setOf(name);
  const perSecond = new Array<number>(Math.ceil((endAt - startAt) / 1000)).fill(0);
  let failedDevices = 0;
  await Promise.all(
    devices.map(async (device, i) => {
      const client = fleet.client(i);
      if (!client?.connected) return void failedDevices++;
      const topic = `telemetry/${device.id}`;
      const closed = new Promise<never>((_, reject) => client.once('close', () => reject(new Error('closed'))));
      closed.catch(() => undefined);
      try {
        for (let seq = 0; Date.now() < endAt; seq++) {
          await Promise.race([client.publishAsync(topic, `{"seq":${seq},"t":${Date.now()}}`, { qos: 1 }), closed]);
          const t = Date.now();
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
  await setOf(name).fleet.close();
  sets.delete(name);
}

/** One login: a device connected (retrying), then closed; its run. */
async function login(target: Target, device: DeviceCredentials): Promise<ConnectRun> {
  const fleet = connectFleet(target.url, [device], { tls: target.tls, keep: false });
  await fleet.settled();
  await fleet.close();
  return fleet.runs()[0]![0]!;
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
      await sleep(Math.max(0, startAt + i * intervalMs - Date.now()));
      return login(target, device);
    }),
  );
}

async function flood(target: Target, deviceId: string, concurrency: number, localAddress: string, endAt: number): Promise<FloodResult> {
  const outcomes: Record<string, number> = {};
  let attempts = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < endAt) {
        attempts++;
        const kind = await connectOnce(target.url, { id: deviceId, password: generatePassword() }, { tls: target.tls, localAddress }).then(
          (client) => (client.end(true), 'accepted'),
          (error: unknown) => failureKind(error),
        );
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
      return setOf(request.set).fleet.runs();
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
  if (sets.size > 0) send({ event: 'progress', at: Date.now(), connected: Object.fromEntries([...sets].map(([name, set]) => [name, set.fleet.connected()])) });
}, 1_000);
