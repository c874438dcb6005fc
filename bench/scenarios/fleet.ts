/**
 * `fleet`: the gateway's limits with a fleet of devices, on this machine, no cluster: the real
 * gateway (its bundle, as its image runs it, alone in its process), core's API on the database
 * image's PostgreSQL, and a real NATS Server with JetStream, each its own process on this
 * machine, and the devices in `--clients` processes of their own (fleet/devices.ts), so that
 * neither the devices nor the runner share the gateway's event loop. The gateway serves mqtt
 * (1883) and mqtts (8883) with a certificate made as the operator makes it (operators/iot
 * gateway-tls.ts: ECDSA P-256, signed by the instance CA); the devices trust only that CA. Each
 * component gets only its own credentials, as from iot-credentials.
 *
 * Devices are registered through the store's `createDevice`, each with its own password and the
 * hash core's `hashPassword` makes of it; every login the gateway has not cached is one real
 * password check in core.
 *
 * Phases, in this order; for each, the wall time, the cores each process, the host and the rest
 * of the machine (`others`) used over it, and the connections the kernel turned away at a full
 * accept queue, if any:
 * 1. throughput: `--devices` (default 50) devices publish QoS 1, each message as soon as the
 *    previous one's PUBACK came, for `--window` seconds (default 15, after 3 s not counted), over
 *    mqtts, then mqtt, then both again: PUBACKs per second of each protocol over its two
 *    windows, the TLS/plaintext ratio, and the gateway's CPU per message of each.
 * 2. logins: `--logins` (default 200) devices never logged in connect up to their CONNACK and
 *    close the connection, 16 at a time (core checks 2 at once on 2 cores and lets 16 wait, so none is
 *    shed): uncached logins/s, over mqtts and over mqtt (other devices); then the same devices 5
 *    times each (cached): logins/s; each login's time to CONNACK.
 * 3. flood, in 2 rounds: half the `--logins` devices never logged in start one login every
 *    100 ms over mqtts (uncached), then log in again at the same pace (cached); then the same
 *    with other devices while one device process logs in from 127.0.0.2 (a source address of its
 *    own) as one registered device with a fresh wrong password per attempt, 8 attempts at once,
 *    each the moment the previous ended. Each login's time to CONNACK at p50/p99 without and with
 *    the flood (both rounds together), the p99's growth, the flood's attempts by outcome and the
 *    gateway's refusals by reason over it.
 * 4. herd: `--herd` (default 10,000) devices connect over mqtts at once, spread over the device
 *    processes, each retrying a refused or failed attempt after the service's backoff with jitter
 *    (the simulator's `connectFleet`); once all are connected (or `--timeout` passed) the gateway is SIGKILLed
 *    and started again at once, and every device reconnects the same way. For each of the two:
 *    the time until all are connected, time to CONNACK at p50/p90/p99/max (a device never
 *    connected counts as the slowest), attempts, failed attempts by kind (as the devices saw
 *    them), the gateway's refusals by reason (its /metrics) and how long /metrics took to answer,
 *    its /healthz probed every 2 s (latency, and how long it answered slower than the kubelet's
 *    1-s probe timeout), devices that lost their connection again, the gateway's RSS, and
 *    connected devices at the end of each second (samples). Each waits at most `--timeout` s.
 *
 * Guarantees: every process it starts (and the database's container) is ended before it returns,
 * failed or not; the gateway's fixed ports (1883, 8883, 8081) must be free (else it fails at once,
 * naming the port).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { GATEWAY_CERTIFICATE_PROFILE } from '../../operators/iot/src/resources/gateway-tls.ts';
import { keepOrIssue } from '../../operators/iot/src/resources/instance-ca.ts';
import { generatePassword } from '../../workloads/iot-service/src/core/passwords.ts';
import { GATEWAY_MQTT_PORT, GATEWAY_MQTTS_PORT } from '../../workloads/iot-service/src/shared/ports.ts';
import type { ConnectRun } from '../../workloads/iot-service/src/simulator/fleet.ts';
import type { DeviceCredentials, GatewayTls } from '../../workloads/iot-service/src/simulator/types.ts';
import { BROKER_PASSWORDS } from '../../workloads/iot-service/test/nats-server.ts';
import type { FloodResult, PublishResult } from '../fleet/devices.ts';
import {
  bundleGateway,
  DeviceProcess,
  GatewayProcess,
  HOST,
  portsFree,
  raiseOpenFiles,
  scratchDir,
  seedDevices,
  startBroker,
  startCore,
  startDatabase,
} from '../fleet/services.ts';
import type { LocalContext, ScenarioOutput } from '../lib/context.ts';
import {
  connectedBySecond,
  connectFigures,
  coresUsed,
  delayRatio,
  latencyFigures,
  mergeCounts,
  parseTcpExt,
  probeFigures,
  rateFigures,
  refusalsByReason,
  runSince,
  sumBuckets,
  type Probe,
} from '../lib/fleet.ts';
import { log, sleep } from '../lib/kube.ts';
import { freePort } from '../lib/operator.ts';
import { deltaBy } from '../lib/prom.ts';
import { MiB, readHostCpu, readMemory, readTreeCpuSeconds } from '../lib/proc.ts';
import { round } from '../lib/stats.ts';

/** Logins in flight in the logins phase: core checks 2 at once on 2 cores and lets 8 per check wait. */
const LOGIN_CONCURRENCY = 16;
const WARM_ROUNDS = 5;
const WARMUP_MS = 3_000;
const PACED_INTERVAL_MS = 100;
const FLOOD_CONCURRENCY = 8;
const FLOOD_ROUNDS = 2;
/** The flood runs this long before the first login it is measured against. */
const FLOOD_LEAD_MS = 2_000;
/** The gateway's /healthz is probed this often during a herd, each probe waiting up to PROBE_TIMEOUT_MS. */
const PROBE_PERIOD_MS = 2_000;
const PROBE_TIMEOUT_MS = 30_000;
/** timeoutSeconds of the gateway pod's probes (operators/iot resources/pod.ts). */
const KUBELET_PROBE_TIMEOUT_MS = 1_000;
const FLOOD_SOURCE = '127.0.0.2';

/** The runs' time to CONNACK in ms and how many logins a second they made, first attempt to last CONNACK. */
function loginFigures(runs: readonly ConnectRun[]) {
  const connected = runs.filter((r) => r.connectedAt !== undefined);
  const wallS = (Math.max(...connected.map((r) => r.connectedAt!)) - Math.min(...runs.map((r) => r.startedAt))) / 1000;
  return {
    logins: runs.length,
    connected: connected.length,
    perS: round(connected.length / wallS, 1),
    connackMs: latencyFigures(connected.map((r) => r.connectedAt! - r.startedAt)),
    failures: mergeCounts(runs.map((r) => r.failures)),
  };
}

/** `items` dealt round-robin into `n` lists. */
function deal<T>(items: readonly T[], n: number): T[][] {
  return Array.from({ length: n }, (_, k) => items.filter((_, i) => i % n === k));
}

export async function runFleet(ctx: LocalContext): Promise<ScenarioOutput> {
  const o = ctx.options;
  const publishers = o.devices?.[0] ?? 50;
  const windowS = o.windowS ?? 15;
  const herdSize = o.herd ?? 10_000;
  const clients = o.clients ?? 2;
  const loginDevices = o.logins ?? 200;

  await portsFree();
  const openFiles = raiseOpenFiles(herdSize + 1_000); // the gateway holds every device's connection
  const devices = (prefix: string, n: number): DeviceCredentials[] =>
    Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${String(i).padStart(5, '0')}`, password: generatePassword() }));
  const pub = devices('pub', publishers);
  const loginTls = devices('login-tls', loginDevices);
  const loginPlain = devices('login-plain', loginDevices);
  const quiet = devices('quiet', loginDevices);
  const flooded = devices('flooded', loginDevices);
  const [target] = devices('target', 1);
  const herd = devices('herd', herdSize);

  const scratch = scratchDir('fleet-');
  const stops: (() => Promise<void>)[] = [];
  try {
    const database = { superuser: generatePassword(), core: generatePassword(), processing: generatePassword() };

    const { certificates } = keepOrIssue({}, [`IP:${HOST}`], new Date(), GATEWAY_CERTIFICATE_PROFILE);
    const tlsDir = path.join(scratch.dir, 'tls');
    mkdirSync(tlsDir);
    writeFileSync(path.join(tlsDir, 'tls.crt'), certificates.server.cert);
    writeFileSync(path.join(tlsDir, 'tls.key'), certificates.server.key);
    const tls: GatewayTls = { ca: certificates.ca.cert };
    const mqtts = { url: `mqtts://${HOST}:${GATEWAY_MQTTS_PORT}`, tls };
    const mqtt = { url: `mqtt://${HOST}:${GATEWAY_MQTT_PORT}` };

    const db = await startDatabase(ctx.logDir, database);
    stops.push(() => db.stop());
    const t = Date.now();
    await seedDevices(db.port, database.core, [...pub, ...loginTls, ...loginPlain, ...quiet, ...flooded, target!, ...herd]);
    const seedS = round((Date.now() - t) / 1000, 1);
    log(`fleet: the database image's PostgreSQL ${db.version} on port ${db.port}; ${herdSize + publishers + 4 * loginDevices + 1} devices registered in ${seedS} s`);

    const broker = await startBroker();
    stops.push(() => broker.close());
    const corePort = await freePort();
    const configFile = path.join(scratch.dir, 'config.yml');
    writeFileSync(
      configFile,
      [
        'instance: fleet',
        'landscape: bench',
        'namespace: bench',
        'version: bench',
        'endpoints:',
        `  broker: ${HOST}:${broker.server.port}`,
        `  database: ${HOST}:${db.port}`,
        `  core: ${HOST}:${corePort}`,
        'stream:',
        '  replicas: 1',
        `  maxBytes: ${4 * 1024 ** 3}`,
        'retention:',
        '  seconds: 86400',
        '',
      ].join('\n'),
    );
    const env = { PATH: process.env.PATH, HOME: process.env.HOME, IOT_CONFIG_FILE: configFile };
    const deviceCheckToken = generatePassword();
    const core = await startCore(
      { ...env, IOT_API_TOKEN: generatePassword(), IOT_DEVICE_CHECK_TOKEN: deviceCheckToken, IOT_BROKER_CORE_PASSWORD: BROKER_PASSWORDS.core, IOT_DATABASE_CORE_PASSWORD: database.core },
      corePort,
      ctx.logDir,
    );
    stops.push(() => core.stop());
    const gatewayEnv = { ...env, IOT_DEVICE_CHECK_TOKEN: deviceCheckToken, IOT_BROKER_GATEWAY_PASSWORD: BROKER_PASSWORDS.gateway, IOT_GATEWAY_PROTOCOLS: 'mqtt,mqtts', IOT_GATEWAY_TLS_DIR: tlsDir };
    const gateway = new GatewayProcess(await bundleGateway(path.join(scratch.dir, 'bundle')), gatewayEnv, ctx.logDir);
    stops.push(() => gateway.stop());
    const gatewayStartMs = round(await gateway.start(), 0);
    const fleet = Array.from({ length: clients }, (_, i) => new DeviceProcess(`devices-${i + 1}`, ctx.logDir));
    for (const d of fleet) stops.push(() => d.stop());
    log(`fleet: gateway ready ${gatewayStartMs} ms after its spawn; ${clients} device processes; open files ${openFiles.soft} (hard ${openFiles.hard}${openFiles.raised ? ', raised' : ''})`);

    /** CPU seconds of every process now, by name (the gateway's under its pid, which a restart changes). */
    const cpu = (): Record<string, number> => {
      const named: Record<string, number | undefined> = {
        [`gateway-${gateway.pid}`]: gateway.pid === undefined ? undefined : readTreeCpuSeconds(gateway.pid),
        core: readTreeCpuSeconds(core.pid),
        broker: readTreeCpuSeconds(broker.pid),
        database: readTreeCpuSeconds(db.pid),
        runner: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
        ...Object.fromEntries(fleet.map((d) => [d.name, readTreeCpuSeconds(d.pid)])),
      };
      return Object.fromEntries(Object.entries(named).filter((e): e is [string, number] => e[1] !== undefined));
    };
    interface Usage {
      wallS: number;
      /** Cores used over the wall time: the host's, each process's, and the rest of the machine's (`others`). */
      cores: Record<string, number>;
      /** The kernel's counts of connections its listeners' full accept queues turned away, when there were any. */
      listenQueue?: Record<string, number>;
    }
    /** Starts measuring; the function returned ends it. */
    const measure = (): (() => Usage) => {
      const [c0, h0, n0, t0] = [cpu(), readHostCpu(), parseTcpExt(readFileSync('/proc/net/netstat', 'utf8')), Date.now()];
      const c0Gateway = Object.keys(c0).find((k) => k.startsWith('gateway-'));
      return () => {
        const wallS = (Date.now() - t0) / 1000;
        const [c1, h1, n1] = [cpu(), readHostCpu(), parseTcpExt(readFileSync('/proc/net/netstat', 'utf8'))];
        // a gateway started meanwhile counts from 0
        for (const key of Object.keys(c1)) if (key.startsWith('gateway-') && c0[key] === undefined) c0[key] = 0;
        const used = coresUsed(c0, c1, wallS);
        const host = round(((h1.busyS - h0.busyS) / (h1.totalS - h0.totalS)) * os.cpus().length, 2);
        const cores: Record<string, number> = { host, others: round(Math.max(0, host - Object.values(used).reduce((sum, v) => sum + v, 0)), 2) };
        for (const [key, value] of Object.entries(used)) cores[key.startsWith('gateway-') ? (key === c0Gateway ? 'gateway' : 'gatewayRestarted') : key] = value;
        const listen = { overflows: (n1.ListenOverflows ?? 0) - (n0.ListenOverflows ?? 0), drops: (n1.ListenDrops ?? 0) - (n0.ListenDrops ?? 0), syncookiesSent: (n1.SyncookiesSent ?? 0) - (n0.SyncookiesSent ?? 0) };
        return { wallS: round(wallS, 1), cores, ...(Object.values(listen).some((n) => n > 0) ? { listenQueue: listen } : {}) };
      };
    };
    /** Runs `body`; its figures with the wall time and the cores each process (and the host) used over it. */
    const phase = async <T extends Record<string, unknown>>(name: string, body: () => Promise<T>): Promise<T & Usage> => {
      const end = measure();
      const figures = await body();
      const usage = end();
      log(`fleet: ${name} took ${usage.wallS} s; cores ${JSON.stringify(usage.cores)}`);
      return { ...figures, ...usage };
    };
    const refusals = async () => refusalsByReason(await gateway.metrics());
    /** CPU milliseconds per unit of work (a login, a device connected) of each process over a measurement, from its cores and wall time. */
    const cpuMsPer = (usage: Usage, units: number): Record<string, number> =>
      Object.fromEntries(Object.entries(usage.cores).filter(([name]) => name !== 'host' && name !== 'others').map(([name, cores]) => [name, round((cores * usage.wallS * 1000) / units, 2)]));
    /** `phase` of a run of logins, with each process's CPU per login. */
    const loginPhase = async (name: string, runs: () => Promise<ConnectRun[]>) => {
      const measured = await phase(name, async () => loginFigures(await runs()));
      return { ...measured, cpuMsPerLogin: cpuMsPer(measured, measured.connected) };
    };

    // 1. throughput
    const pubShares = deal(pub, clients);
    const windows: { protocol: string; perSecond: number[]; failedDevices: number; usage: Usage }[] = [];
    for (const [protocol, target] of [['mqtts', mqtts], ['mqtt', mqtt], ['mqtts', mqtts], ['mqtt', mqtt]] as const) {
      await Promise.all(fleet.map((d, i) => d.request({ op: 'connect', set: 'pub', devices: pubShares[i]!, keep: false, ...target })));
      const startAt = Date.now() + WARMUP_MS;
      const publishing = Promise.all(fleet.map((d) => d.request<PublishResult>({ op: 'publish', set: 'pub', startAt, endAt: startAt + windowS * 1000 })));
      await sleep(startAt - Date.now());
      const end = measure();
      const results = await publishing;
      const usage = end();
      await Promise.all(fleet.map((d) => d.request({ op: 'disconnect', set: 'pub' })));
      const perSecond = sumBuckets(results.map((r) => r.perSecond));
      windows.push({ protocol, perSecond, failedDevices: results.reduce((s, r) => s + r.failedDevices, 0), usage });
      log(`fleet: ${protocol} window: ${rateFigures(perSecond).perS} PUBACKs/s; cores ${JSON.stringify(usage.cores)}`);
    }
    const ofProtocol = (protocol: string) => {
      const mine = windows.filter((w) => w.protocol === protocol);
      const rate = rateFigures(mine.flatMap((w) => w.perSecond));
      const gatewayCpuS = mine.reduce((s, w) => s + (w.usage.cores.gateway ?? 0) * w.usage.wallS, 0);
      return {
        ...rate,
        windowsPerS: mine.map((w) => rateFigures(w.perSecond).perS),
        failedDevices: mine.reduce((s, w) => s + w.failedDevices, 0),
        perDevicePerS: round(rate.perS / publishers, 1),
        gatewayCpuUsPerMessage: round((gatewayCpuS / rate.total) * 1e6, 1),
        windows: mine.map((w) => w.usage),
      };
    };
    const [tlsRate, plainRate] = [ofProtocol('mqtts'), ofProtocol('mqtt')];
    const throughput = {
      devices: publishers,
      windowS,
      mqtts: tlsRate,
      mqtt: plainRate,
      tlsToPlain: round(tlsRate.perS / plainRate.perS, 3),
      tlsCost: round(1 - tlsRate.perS / plainRate.perS, 3),
      tlsGatewayCpuPerMessage: round(tlsRate.gatewayCpuUsPerMessage / plainRate.gatewayCpuUsPerMessage, 2),
    };

    // 2. logins
    const loginRuns = async (target: { url: string; tls?: GatewayTls }, list: DeviceCredentials[]) => {
      const shares = deal(list, clients);
      const runs = await Promise.all(fleet.map((d, i) => d.request<ConnectRun[]>({ op: 'logins', logins: shares[i]!, concurrency: LOGIN_CONCURRENCY / clients, ...target })));
      return runs.flat();
    };
    const repeated = (list: DeviceCredentials[]) => Array.from({ length: WARM_ROUNDS }, () => list).flat();
    const logins = {
      concurrency: LOGIN_CONCURRENCY,
      warmRounds: WARM_ROUNDS,
      cold: {
        mqtts: await loginPhase('logins: uncached, mqtts', () => loginRuns(mqtts, loginTls)),
        mqtt: await loginPhase('logins: uncached, mqtt', () => loginRuns(mqtt, loginPlain)),
      },
      warm: {
        mqtts: await loginPhase('logins: cached, mqtts', () => loginRuns(mqtts, repeated(loginTls))),
        mqtt: await loginPhase('logins: cached, mqtt', () => loginRuns(mqtt, repeated(loginPlain))),
      },
    };
    log(`fleet: logins/s uncached mqtts ${String(logins.cold.mqtts.perS)} mqtt ${String(logins.cold.mqtt.perS)}; cached mqtts ${String(logins.warm.mqtts.perS)} mqtt ${String(logins.warm.mqtt.perS)}`);

    // 3. flood
    const [victims, attacker] = [fleet[0]!, fleet[fleet.length - 1]!];
    const pacedRuns = (list: DeviceCredentials[]) => victims.request<ConnectRun[]>({ op: 'paced', devices: list, startAt: Date.now() + 100, intervalMs: PACED_INTERVAL_MS, ...mqtts });
    const pacedFigures = (runs: ConnectRun[]) => ({ ...latencyFigures(runs.filter((r) => r.connectedAt !== undefined).map((r) => r.connectedAt! - r.startedAt)), failures: mergeCounts(runs.map((r) => r.failures)) });
    const rounds: Record<string, unknown>[] = [];
    const merged = { quiet: { cold: [] as ConnectRun[], warm: [] as ConnectRun[] }, flooded: { cold: [] as ConnectRun[], warm: [] as ConnectRun[] } };
    /** Half the devices of `list` log in cold, then again cached, one every PACED_INTERVAL_MS. */
    const coldThenWarm = async (list: DeviceCredentials[], into: { cold: ConnectRun[]; warm: ConnectRun[] }) => {
      const cold = await pacedRuns(list);
      const warm = await pacedRuns(list);
      into.cold.push(...cold);
      into.warm.push(...warm);
      return { cold: pacedFigures(cold), warm: pacedFigures(warm) };
    };
    const [quietHalves, floodedHalves] = [deal(quiet, FLOOD_ROUNDS), deal(flooded, FLOOD_ROUNDS)];
    for (let r = 0; r < FLOOD_ROUNDS; r++) {
      const without = await phase(`flood round ${r + 1}: logins without a flood`, () => coldThenWarm(quietHalves[r]!, merged.quiet));
      const during = await phase(`flood round ${r + 1}: logins during a flood`, async () => {
        const before = await refusals();
        const floodMs = FLOOD_LEAD_MS + 2 * floodedHalves[r]!.length * PACED_INTERVAL_MS + 3_000;
        const flooding = attacker.request<FloodResult>({ op: 'flood', deviceId: target!.id, concurrency: FLOOD_CONCURRENCY, localAddress: FLOOD_SOURCE, endAt: Date.now() + floodMs, ...mqtts });
        await sleep(FLOOD_LEAD_MS);
        const logins = await coldThenWarm(floodedHalves[r]!, merged.flooded);
        const flood = await flooding;
        return { ...logins, flood: { ...flood, perS: round(flood.attempts / (floodMs / 1000), 1) }, refusals: deltaBy(before, await refusals()) };
      });
      rounds.push({ without, during });
    }
    const floodFigures = {
      source: FLOOD_SOURCE,
      concurrency: FLOOD_CONCURRENCY,
      pacedIntervalMs: PACED_INTERVAL_MS,
      quiet: { cold: pacedFigures(merged.quiet.cold), warm: pacedFigures(merged.quiet.warm) },
      flooded: { cold: pacedFigures(merged.flooded.cold), warm: pacedFigures(merged.flooded.warm) },
      rounds,
    };
    const floodGrowth = { cold: delayRatio(floodFigures.flooded.cold.p99Ms, floodFigures.quiet.cold.p99Ms), warm: delayRatio(floodFigures.flooded.warm.p99Ms, floodFigures.quiet.warm.p99Ms) };
    log(`fleet: flood: login p99 grew ${floodGrowth.cold * 100} % (uncached), ${floodGrowth.warm * 100} % (cached)`);

    // 4. herd
    const herdShares = deal(herd, clients);
    const connectedNow = () => fleet.reduce((s, d) => s + (d.connected.herd ?? 0), 0);
    /** Until every device process counted the whole herd connected, a second or more after `since` (so no count from before it is taken), or the timeout. */
    const waitAllConnected = async (what: string, since: number) => {
      let lastLog = 0;
      const counted = () => fleet.every((d) => d.reportedAt > since + 1_000) && connectedNow() === herdSize;
      while (!counted() && Date.now() - since < o.timeoutS * 1000) {
        if (Date.now() - lastLog > 10_000) {
          log(`fleet: ${what}: ${connectedNow()} of ${herdSize} connected after ${round((Date.now() - since) / 1000, 0)} s`);
          lastLog = Date.now();
        }
        await sleep(200);
      }
    };
    const herdRuns = async () => (await Promise.all(fleet.map((d) => d.request<ConnectRun[][]>({ op: 'runs', set: 'herd' })))).flat();
    /** Probes the gateway's /healthz one after the other, at most every PROBE_PERIOD_MS, until `stop`; the kubelet's probes time out after 1 s. */
    const probeHealth = () => {
      const probes: Probe[] = [];
      let stopped = false;
      const running = (async () => {
        while (!stopped) {
          const started = Date.now();
          probes.push({ at: started, ms: round(await gateway.healthLatencyMs(PROBE_TIMEOUT_MS), 0) });
          await sleep(Math.max(0, started + PROBE_PERIOD_MS - Date.now()));
        }
      })();
      return async () => {
        stopped = true;
        await running;
        return probeFigures(probes, KUBELET_PROBE_TIMEOUT_MS);
      };
    };
    /** The gateway's refusals by reason, and how long its /metrics took to answer. */
    const timedRefusals = async () => {
      const t0 = Date.now();
      const byReason = await refusals();
      return { byReason, metricsAnsweredMs: round(Date.now() - t0, 0) };
    };
    let herdStart = 0;
    const connectPhase = await phase('herd: connect', async () => {
      const before = await refusals();
      herdStart = Date.now();
      const probed = probeHealth();
      const connecting = Promise.all(fleet.map((d, i) => d.request({ op: 'connect', set: 'herd', devices: herdShares[i]!, keep: true, ...mqtts })));
      connecting.catch(() => undefined); // what failed shows as devices not connected
      await waitAllConnected('herd', herdStart);
      const runs = await herdRuns();
      const health = await probed();
      const after = await timedRefusals();
      return {
        ...connectFigures(runs.map((r) => r[0]!), herdStart),
        devicesDisconnectedAgain: runs.filter((r) => r.length > 1).length,
        refusals: deltaBy(before, after.byReason),
        metricsAnsweredMs: after.metricsAnsweredMs,
        health,
        gatewayRssMiB: round((readMemory(gateway.pid!)?.rssBytes ?? 0) / MiB, 0),
      };
    });
    const connectedCurve = connectedBySecond((await herdRuns()).map((r) => r[0]!), herdStart);
    let killAt = 0;
    const reconnectPhase = await phase('herd: gateway killed, reconnect', async () => {
      killAt = Date.now();
      await gateway.kill();
      const restartMs = round(await gateway.start(), 0);
      const probed = probeHealth();
      await waitAllConnected('reconnect', killAt);
      const runs = await herdRuns();
      const health = await probed();
      const after = await timedRefusals();
      return {
        ...connectFigures(runs.map((r) => runSince(r, killAt)).filter((r): r is ConnectRun => r !== undefined), killAt),
        devicesDisconnectedAgain: runs.filter((r) => r.filter((run) => run.startedAt >= killAt).length > 1).length,
        restartToReadyMs: restartMs,
        refusals: after.byReason,
        metricsAnsweredMs: after.metricsAnsweredMs,
        health,
        gatewayRssMiB: round((readMemory(gateway.pid!)?.rssBytes ?? 0) / MiB, 0),
      };
    });
    const reconnectCurve = connectedBySecond((await herdRuns()).map((r) => runSince(r, killAt)).filter((r): r is ConnectRun => r !== undefined), killAt);
    await Promise.all(fleet.map((d) => d.request({ op: 'disconnect', set: 'herd' })));

    return {
      figures: {
        setup: { devicesRegistered: herdSize + publishers + 4 * loginDevices + 1, seedS, postgres: db.version, gatewayStartMs, clients, openFiles },
        throughput,
        logins,
        flood: { ...floodFigures, p99Growth: floodGrowth },
        herd: {
          devices: herdSize,
          connect: { ...connectPhase, cpuMsPerDeviceConnected: cpuMsPer(connectPhase, connectPhase.connected) },
          reconnect: { ...reconnectPhase, cpuMsPerDeviceConnected: cpuMsPer(reconnectPhase, reconnectPhase.connected) },
        },
      },
      samples: {
        mqttsPerSecond: windows.filter((w) => w.protocol === 'mqtts').flatMap((w) => w.perSecond),
        mqttPerSecond: windows.filter((w) => w.protocol === 'mqtt').flatMap((w) => w.perSecond),
        herdConnectedBySecond: connectedCurve,
        herdReconnectedBySecond: reconnectCurve,
      },
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch((error: unknown) => log(`fleet: stopping a process failed: ${String(error)}`));
    scratch.remove();
  }
}
