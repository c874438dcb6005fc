/**
 * Unit tests of the process metrics: the names and values scraped, parsing of /proc, and no
 * series that would need a timer or an observer running between scrapes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { maxOpenFiles, procStatusMemory, registerProcessMetrics } from '../src/metrics/process-metrics.ts';

const value = (text: string, name: string): number | undefined => {
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
};

describe('process metrics', () => {
  it('reads resident, virtual and data sizes from /proc/self/status, and the open-files limit', () => {
    const status = 'Name:\tnode\nVmSize:\t  1000 kB\nVmData:\t   300 kB\nVmRSS:\t    50 kB\nThreads:\t7\n';
    assert.deepEqual(procStatusMemory(status), { rss: 50 * 1024, virtual: 1000 * 1024, data: 300 * 1024 });
    assert.deepEqual(procStatusMemory('Name:\tnode\n'), { rss: undefined, virtual: undefined, data: undefined });
    assert.equal(maxOpenFiles('Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n'), 1048576);
    assert.equal(maxOpenFiles('Max open files            unlimited            unlimited            files\n'), undefined);
  });

  it('scrapes CPU that only grows, memory, descriptors, start time and the Node.js version', async () => {
    const registry = new Registry();
    registerProcessMetrics(registry);
    const first = await registry.metrics();
    for (const name of ['process_resident_memory_bytes', 'process_virtual_memory_bytes', 'process_heap_bytes', 'nodejs_heap_size_total_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_external_memory_bytes']) {
      assert.ok(value(first, name)! > 0, `${name} has its value at the first scrape`);
    }
    let spin = 0;
    for (let i = 0; i < 2e6; i++) spin += Math.sqrt(i);
    assert.ok(spin > 0);
    const second = await registry.metrics();
    assert.ok(value(second, 'process_cpu_seconds_total')! > value(first, 'process_cpu_seconds_total')!, 'CPU time grows between scrapes');
    assert.ok(Math.abs(value(second, 'process_cpu_seconds_total')! - value(second, 'process_cpu_user_seconds_total')! - value(second, 'process_cpu_system_seconds_total')!) < 0.01);
    assert.ok(value(second, 'process_resident_memory_bytes')! > 10 * 1024 * 1024);
    assert.ok(value(second, 'process_open_fds')! >= 3);
    assert.ok(Math.abs(value(second, 'process_start_time_seconds')! - (Date.now() / 1000 - process.uptime())) < 2);
    assert.ok(value(second, 'nodejs_heap_size_used_bytes')! > 0);
    assert.match(second, new RegExp(`^nodejs_version_info\\{version="${process.version}",major="\\d+",minor="\\d+",patch="\\d+"\\} 1$`, 'm'));
  });

  it('has no series that must be measured between scrapes (event-loop lag, GC durations), which prom-client\'s defaults keep timers and observers running for', async () => {
    const registry = new Registry();
    registerProcessMetrics(registry);
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    assert.ok(names.includes('process_cpu_seconds_total'));
    assert.deepEqual(names.filter((name) => /eventloop|_gc_|active_(handles|requests|resources)/.test(name)), []);
  });
});
