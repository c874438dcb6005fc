/**
 * A probe to preload into an operator under test (`node --require bench/probes/heap-spaces.cjs`,
 * e.g. in `--operator-cmd`): once a second it appends one JSON line to $HEAPLOG (default
 * /tmp/heaplog-<pid>.jsonl) with the seconds since start, the process's CPU seconds so far, its
 * RSS and peak RSS (VmHWM, the figure the bench reports), V8's committed and used heap, external
 * memory (MiB), and each V8 heap space as [committed, used] MiB.
 *
 * Guarantees: it only reads; its timer does not keep the process alive; a line costs a few KiB of
 * garbage a second (the line and /proc/self/status), nothing that stays.
 */
const v8 = require('node:v8');
const fs = require('node:fs');

const file = process.env.HEAPLOG || `/tmp/heaplog-${process.pid}.jsonl`;
const started = Date.now();
const mib = (bytes) => Math.round(bytes / 104857.6) / 10;

setInterval(() => {
  const memory = process.memoryUsage();
  const heap = v8.getHeapStatistics();
  const cpu = process.cpuUsage();
  const peakKiB = Number(/^VmHWM:\s+(\d+) kB$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN);
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name.replace(/_space$/, ''), [mib(s.space_size), mib(s.space_used_size)]]));
  const line = {
    t: (Date.now() - started) / 1000,
    cpu: Math.round((cpu.user + cpu.system) / 1e4) / 100,
    rss: mib(memory.rss),
    hwm: mib(peakKiB * 1024),
    total: mib(heap.total_heap_size),
    used: mib(heap.used_heap_size),
    ext: mib(memory.external),
    spaces,
  };
  fs.appendFileSync(file, `${JSON.stringify(line)}\n`);
}, 1000).unref();
