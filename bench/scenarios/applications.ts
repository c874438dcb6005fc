/**
 * `applications`: what a tenant's applications see of ONE reference IoT service on the cluster's
 * real node (the `reference` scenario's instance: gateway 2, core 2, processing 1, broker 1,
 * database 1; `withReferenceInstance`) — figures for docs/in-cluster.md. Needs the cluster with
 * the real node (`--kubeconfig`).
 *
 * What it does, in order, once the instance is Available:
 * 1. An application credential (`POST /v1/applications`), used for everything below.
 * 2. Device → application: the application follows `GET /v1/stream` at one core pod; 50 of the
 *    simulator's continuous devices (`startContinuousDevice`, MQTT QoS 1, spread over the two
 *    gateway pods) each begin a message every 50 ms (`periodMs`): 1,000 messages/s together.
 *    After 5 s of warm-up, a window of `--window` seconds (default 60); once the devices stopped,
 *    up to 30 s for the window's last events. Per message sent in the window: the time from its
 *    first attempt (the device's clock) to its `telemetry` event reaching the application (this
 *    machine's clock, the same one): p50, p95, p99, max; and how many never came.
 * 3. Commands: 60 devices connected over MQTT (`connectOnce`), each subscribed to its own
 *    commands and answering each at once (`answerCommands`); the application sends 300 commands
 *    a second for 5 s of warm-up and `--window` seconds (each to the next device in turn, to the
 *    two core pods in turn), each a request/response (`responseTimeoutSeconds: 10`), not waiting
 *    for one before the next. Per command sent in the window: delivery (the POST sent → the device
 *    received it) and round trip (the POST sent → core's answer carrying the device's response)
 *    p50, p95, p99, max; how many were answered otherwise than 200, with what they said, and the
 *    errors core's pods logged meanwhile.
 * Each phase also reports the rate it achieved, the pods' CPU (cores, their cgroups on the real
 * node) and the host's CPU utilisation over its window, and the targets: device → application
 * p99 ≤ 250 ms, command delivery p95 ≤ 200 ms, round trip p95 ≤ 500 ms.
 *
 * Guarantees: as `reference`'s, the landscape is torn down whether the run succeeds or fails;
 * nothing outside it and its instance namespace is created or deleted on the shared cluster.
 */
import { execFile } from 'node:child_process';
import os from 'node:os';
import { promisify } from 'node:util';
import type { MqttClient } from 'mqtt';
import {
  answerCommands,
  connectOnce,
  followEvents,
  issueApplication,
  registerDevice,
  sendCommand,
  startContinuousDevice,
  type ContinuousDevice,
  type DeviceCredentials,
} from '@iot-operator/iot-service/simulator';
import { arrivalsWithin, latencySummary } from '../lib/applications.ts';
import type { BenchContext, ScenarioOutput } from '../lib/context.ts';
import { log, mapLimit, sleep } from '../lib/kube.ts';
import { readHostCpu } from '../lib/proc.ts';
import { round } from '../lib/stats.ts';
import { readPodCpu, withReferenceInstance, type InstancePod } from './reference.ts';

const run = promisify(execFile);
/**
 * The load: devices sending to the application's stream and the messages per second they send
 * together; devices receiving commands and the commands per second the application sends them;
 * the warm-up before each window, which the figures leave out.
 */
const STREAM_DEVICES = 50;
const STREAM_RATE = 1000;
const COMMAND_DEVICES = 60;
const COMMAND_RATE = 300;
const WARMUP_MS = 5_000;
/** What the figures are held against. */
const TARGETS = { streamP99Ms: 250, commandDeliveryP95Ms: 200, commandRoundTripP95Ms: 500 };

/** The pods' CPU (cores) and the host's utilisation from here until `end()` is called. */
function cpuFrom(pods: readonly InstancePod[]): { end(): { podCores: Record<string, number>; hostUtilisation: number } } {
  const start = { pods: readPodCpu(pods), host: readHostCpu() };
  return {
    end() {
      const end = { pods: readPodCpu(pods), host: readHostCpu() };
      const seconds = (end.pods.at - start.pods.at) / 1000;
      const podCores = Object.fromEntries(pods.map((p) => [p.key, round((end.pods.usageNs.get(p.key)! - start.pods.usageNs.get(p.key)!) / 1e9 / seconds)]));
      return { podCores, hostUtilisation: round((end.host.busyS - start.host.busyS) / (end.host.totalS - start.host.totalS)) };
    },
  };
}

interface Endpoints {
  kubeconfig: string;
  namespace: string;
  cores: string[];
  gateways: string[];
  pods: InstancePod[];
  apiToken: string;
  appToken: string;
}

async function register(e: Endpoints, prefix: string, count: number): Promise<DeviceCredentials[]> {
  return mapLimit(Array.from({ length: count }, (_, i) => i), 8, (i) => registerDevice({ coreUrl: e.cores[i % e.cores.length]!, apiToken: e.apiToken }, `${prefix}${i}`));
}

/** Device → application: the stream's latency at STREAM_RATE messages/s. */
async function streamPhase(e: Endpoints, windowS: number): Promise<Record<string, unknown>> {
  const devices = await register(e, 'stream-', STREAM_DEVICES);
  const eventAt = new Map<string, number>();
  const following = new AbortController();
  let streamError: string | undefined;
  const stream = followEvents(e.cores[0]!, { token: e.appToken, signal: following.signal }, (event) => {
    if (event.type === 'telemetry') eventAt.set(String(event.data['messageId']), Date.now());
  }).then(
    () => {
      if (!following.signal.aborted) streamError = 'core ended the stream';
    },
    (err: unknown) => {
      streamError = err instanceof Error ? err.message : String(err);
    },
  );
  // The stream answers with its opening position first: give it a moment, then start the devices.
  await sleep(1000);
  const periodMs = (1000 * STREAM_DEVICES) / STREAM_RATE;
  const senders: ContinuousDevice[] = devices.map((device, i) => {
    const gateway = e.gateways[i % e.gateways.length]!;
    const d = startContinuousDevice({ gatewayMqttUrl: `mqtt://${gateway}:1883`, gatewayHttpUrl: `http://${gateway}:8080` }, device, { protocols: ['mqtt'], periodMs });
    d.done.catch(() => undefined); // reported by stop()
    return d;
  });
  await sleep(WARMUP_MS);
  const from = Date.now();
  const cpu = cpuFrom(e.pods);
  await sleep(windowS * 1000);
  const to = Date.now();
  const usage = cpu.end();
  await Promise.all(senders.map((d) => d.stop(60_000)));
  const sent = senders.flatMap((d) => d.messages.filter((m) => m.ackedAt !== undefined).map((m) => ({ id: m.messageId, sentAt: m.firstSentAt })));
  const inWindow = sent.filter((m) => m.sentAt >= from && m.sentAt < to);
  for (const waitUntil = Date.now() + 30_000; Date.now() < waitUntil && inWindow.some((m) => !eventAt.has(m.id)); ) await sleep(250);
  following.abort();
  await stream;
  if (streamError) throw new Error(`applications: the application's stream ended before the run did: ${streamError}`);
  const arrivals = arrivalsWithin(sent, eventAt, from, to);
  const latency = latencySummary(arrivals.latenciesMs);
  const failedAttempts = senders.reduce((n, d) => n + d.failures.filter((f) => f.at >= from && f.at < to).length, 0);
  const figures = {
    devices: STREAM_DEVICES,
    periodMs,
    windowS: round((to - from) / 1000),
    sentPerS: round(arrivals.sent / ((to - from) / 1000), 1),
    sent: arrivals.sent,
    delivered: arrivals.arrived,
    missing: arrivals.sent - arrivals.arrived,
    failedAttempts,
    latencyMs: latency,
    meetsTarget: latency.p99Ms <= TARGETS.streamP99Ms,
    ...usage,
  };
  log(
    `applications: device → application at ${figures.sentPerS} messages/s: p50 ${latency.p50Ms} ms, p95 ${latency.p95Ms} ms, p99 ${latency.p99Ms} ms, max ${latency.maxMs} ms; ` +
      `${figures.missing} of ${figures.sent} never reached the application; host ${Math.round(usage.hostUtilisation * 100)} % busy`,
  );
  return figures;
}

const tally = (counts: Record<string, number>, key: string) => {
  const k = key.slice(0, 200);
  counts[k] = (counts[k] ?? 0) + 1;
};

/** The errors core's pods logged for failed requests (`request failed`) in the last 3 minutes, counted by their text. */
async function coreErrors(e: Endpoints): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const pod of e.pods.filter((p) => p.component === 'core')) {
    const { stdout } = await run('kubectl', ['--kubeconfig', e.kubeconfig, 'logs', '-n', e.namespace, pod.name, '--since=3m'], { maxBuffer: 256 * 1024 * 1024 });
    for (const line of stdout.split('\n')) {
      if (!line.includes('request failed')) continue;
      try {
        const entry = JSON.parse(line) as { error?: unknown };
        tally(counts, JSON.stringify(entry.error));
      } catch {
        tally(counts, line);
      }
    }
  }
  return counts;
}

/** Commands: delivery and request/response round trip at COMMAND_RATE commands/s. */
async function commandPhase(e: Endpoints, windowS: number): Promise<Record<string, unknown>> {
  const devices = await register(e, 'cmd-', COMMAND_DEVICES);
  const deliveredAt = new Map<string, number>();
  const clients: MqttClient[] = [];
  try {
    await mapLimit(devices, 8, async (device, i) => {
      const client = await connectOnce(`mqtt://${e.gateways[i % e.gateways.length]!}:1883`, device, { connectTimeoutMs: 10_000 });
      clients.push(client);
      await answerCommands(client, device.id, (command) => {
        deliveredAt.set(command.commandId, Date.now());
        return { status: 200, payload: { answered: command.name } };
      });
    });
    const sent: { id: string; sentAt: number }[] = [];
    const answeredAt = new Map<string, number>();
    const statuses: Record<string, number> = {};
    /** What each answer other than 200, and each failed request, said. */
    const refusals: Record<string, number> = {};
    const inFlight: Promise<void>[] = [];
    const fire = async (i: number) => {
      const sentAt = Date.now();
      const core = { coreUrl: e.cores[i % e.cores.length]!, apiToken: e.appToken };
      try {
        const { status, body } = await sendCommand(core, devices[i % devices.length]!.id, { name: 'read', payload: { i }, responseTimeoutSeconds: 10 });
        statuses[status] = (statuses[status] ?? 0) + 1;
        const id = typeof body['commandId'] === 'string' ? body['commandId'] : `unanswered-${i}`;
        sent.push({ id, sentAt });
        if (status === 200) answeredAt.set(id, Date.now());
        else tally(refusals, `${status} ${String(body['error'] ?? '')}`);
      } catch (err) {
        statuses['error'] = (statuses['error'] ?? 0) + 1;
        sent.push({ id: `failed-${i}`, sentAt });
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        tally(refusals, `${err instanceof Error ? err.message : String(err)}: ${cause?.code ?? cause?.message ?? ''}`);
      }
    };
    const start = Date.now();
    const from = start + WARMUP_MS;
    const to = from + windowS * 1000;
    let cpu: ReturnType<typeof cpuFrom> | undefined;
    for (let i = 0; ; i++) {
      const due = start + (1000 * i) / COMMAND_RATE;
      if (due >= to) break;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      if (!cpu && Date.now() >= from) cpu = cpuFrom(e.pods);
      inFlight.push(fire(i));
    }
    const usage = cpu!.end();
    await Promise.all(inFlight);
    const delivery = arrivalsWithin(sent, deliveredAt, from, to);
    const roundTrip = arrivalsWithin(sent, answeredAt, from, to);
    const [deliveryMs, roundTripMs] = [latencySummary(delivery.latenciesMs), latencySummary(roundTrip.latenciesMs)];
    const figures = {
      devices: COMMAND_DEVICES,
      ratePerS: COMMAND_RATE,
      windowS,
      sent: delivery.sent,
      sentPerS: round(delivery.sent / windowS, 1),
      delivered: delivery.arrived,
      answered: roundTrip.arrived,
      statuses,
      refusals,
      coreErrors: await coreErrors(e),
      deliveryMs,
      roundTripMs,
      meetsDeliveryTarget: deliveryMs.p95Ms <= TARGETS.commandDeliveryP95Ms,
      meetsRoundTripTarget: roundTripMs.p95Ms <= TARGETS.commandRoundTripP95Ms,
      ...usage,
    };
    log(
      `applications: ${figures.sentPerS} commands/s: delivery p50 ${figures.deliveryMs.p50Ms} ms, p95 ${figures.deliveryMs.p95Ms} ms; ` +
        `round trip p50 ${figures.roundTripMs.p50Ms} ms, p95 ${figures.roundTripMs.p95Ms} ms; answers ${JSON.stringify(statuses)}, ${JSON.stringify(refusals)}; core logged ${JSON.stringify(figures.coreErrors)}; host ${Math.round(usage.hostUtilisation * 100)} % busy`,
    );
    return figures;
  } finally {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
  }
}

export async function runApplications(ctx: BenchContext): Promise<ScenarioOutput> {
  const windowS = ctx.options.windowS ?? 60;
  const { result, deleteToNamespaceGoneS, operatorCommand } = await withReferenceInstance(ctx, 'applications', async (instance) => {
    const applyToAvailableS = await instance.available();
    const pods = await instance.pods();
    const apiToken = await instance.apiToken();
    const cores = pods.filter((p) => p.component === 'core').map((p) => `http://${p.ip}:8080`);
    const gateways = pods.filter((p) => p.component === 'gateway').map((p) => p.ip);
    const application = await issueApplication({ coreUrl: cores[0]!, apiToken }, 'bench-application');
    const endpoints: Endpoints = { kubeconfig: ctx.kubeconfig, namespace: instance.namespace, cores, gateways, pods, apiToken, appToken: application.token };
    const stream = await streamPhase(endpoints, windowS);
    const commands = await commandPhase(endpoints, windowS);
    return { applyToAvailableS, stream, commands };
  });
  return {
    figures: { machineCores: os.cpus().length, targets: TARGETS, ...result, deleteToNamespaceGoneS },
    samples: {},
    operatorCommand,
  };
}
