/**
 * Unit tests of bench/lib/fleet.ts, the pure parts of the fleet scenario: per-second rates,
 * connection runs measured from one instant (devices never connected counted as slower than all
 * others), refusals read from the gateway's /metrics, kernel TCP counters, health probes and
 * cores used.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ConnectRun } from '../workloads/iot-service/src/simulator/fleet.ts';
import { connectedBySecond, connectFigures, coresUsed, delayRatio, latencyFigures, parseTcpExt, probeFigures, rateFigures, refusalsByReason, runSince, sumBuckets } from './lib/fleet.ts';

describe('rates', () => {
  it('adds per-second lists of different lengths and describes the window', () => {
    const perSecond = sumBuckets([[10, 20, 30], [1, 2]]);
    assert.deepEqual(perSecond, [11, 22, 30]);
    assert.deepEqual(rateFigures(perSecond), { total: 63, perS: 21, medianSecondPerS: 22, slowestSecondPerS: 11, fastestSecondPerS: 30 });
  });

  it('gives latency percentiles in ms and the growth of a p99 over a baseline', () => {
    assert.deepEqual(latencyFigures([10, 20, 30, 40, 50]), { count: 5, p50Ms: 30, p90Ms: 46, p99Ms: 49.6, maxMs: 50 });
    assert.equal(delayRatio(110, 100), 0.1);
    assert.equal(delayRatio(90, 100), -0.1);
  });
});

describe('connectFigures', () => {
  const run = (connectedAfterMs: number | undefined, attempts: number, failures: Record<string, number> = {}): ConnectRun => ({
    startedAt: 1_000,
    ...(connectedAfterMs === undefined ? {} : { connectedAt: 1_000 + connectedAfterMs }),
    attempts,
    failures,
  });

  it('measures every device from the instant and sums attempts and failures', () => {
    const figures = connectFigures([run(1_000, 1), run(3_000, 3, { 'connack-3': 2 }), run(2_000, 2, { 'connack-3': 1 })], 1_000);
    assert.equal(figures.allConnectedS, 3);
    assert.deepEqual(figures.connackS, { p50: 2, p90: 2.8, p99: 2.98, max: 3 });
    assert.deepEqual(figures.attempts, { total: 6, mean: 2, max: 3 });
    assert.deepEqual(figures.failures, { 'connack-3': 3 });
  });

  it('counts a device never connected as slower than all, leaving out the percentiles that fall on one', () => {
    const runs = [...Array.from({ length: 9 }, (_, i) => run((i + 1) * 1_000, 1)), run(undefined, 5, { timeout: 5 })];
    const figures = connectFigures(runs, 1_000);
    assert.equal(figures.connected, 9);
    assert.equal(figures.allConnectedS, undefined);
    assert.deepEqual(figures.connackS, { p50: 5.5 }, 'p90 lies between the 9th device and the one never connected');
  });

  it('takes the run an instant began: the first started since, else the one still trying then', () => {
    const first: ConnectRun = { startedAt: 0, connectedAt: 500, attempts: 1, failures: {} };
    const again: ConnectRun = { startedAt: 2_000, connectedAt: 2_100, attempts: 1, failures: {} };
    const trying: ConnectRun = { startedAt: 0, attempts: 9, failures: { timeout: 9 } };
    assert.equal(runSince([first, again], 1_000), again);
    assert.equal(runSince([first], 1_000), undefined, 'connected before the instant, never lost');
    assert.equal(runSince([trying], 1_000), trying);
    assert.equal(runSince([{ ...trying, connectedAt: 1_500 }], 1_000)?.connectedAt, 1_500, 'still trying at the instant, connected after');
  });

  it('counts devices connected by the end of each second', () => {
    assert.deepEqual(connectedBySecond([run(100, 1), run(1_500, 1), run(1_900, 1), run(undefined, 1), run(3_200, 1)], 1_000), [1, 3, 3, 4]);
  });
});

describe('process and kernel figures', () => {
  it("reads the gateway's refusals by reason, without those at 0", () => {
    const text = [
      '# TYPE iot_gateway_refusals_total counter',
      'iot_gateway_refusals_total{reason="bad_credentials"} 3',
      'iot_gateway_refusals_total{reason="registry_busy"} 0',
      'iot_gateway_refusals_total{reason="rate_limited"} 12',
      'iot_gateway_connections 7',
    ].join('\n');
    assert.deepEqual(refusalsByReason(text), { bad_credentials: 3, rate_limited: 12 });
  });

  it('describes health probes: latency, how many exceeded the limit and the longest run of them, start to end', () => {
    const probes = [5, 1_200, 3_000, 8, 1_500, 2_000, 10_000, 7].reduce<{ at: number; ms: number }[]>((list, ms) => {
      const last = list.at(-1);
      return [...list, { at: last ? last.at + Math.max(last.ms, 2_000) : 0, ms }];
    }, []);
    assert.deepEqual(probeFigures(probes, 1_000), { probes: 8, p50Ms: 1350, p99Ms: 9_510, maxMs: 10_000, overLimit: 5, longestRunOverLimit: 3, longestRunOverLimitS: 14 });
  });

  it('reads TcpExt counters by name', () => {
    const netstat = 'TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 5 120 130\nIpExt: InNoRoutes\nIpExt: 0\n';
    assert.deepEqual(parseTcpExt(netstat), { SyncookiesSent: 5, ListenOverflows: 120, ListenDrops: 130 });
  });

  it('turns CPU seconds at two instants into cores, for processes seen at both', () => {
    assert.deepEqual(coresUsed({ gateway: 10, core: 4, gone: 1 }, { gateway: 15, core: 4.5, started: 3 }, 10), { gateway: 0.5, core: 0.05 });
  });
});
