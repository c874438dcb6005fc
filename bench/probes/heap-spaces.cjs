/**
 * A probe to preload into an operator under test (`node --require bench/probes/heap-spaces.cjs`,
 * e.g. in `--operator-cmd`): once a second it appends one JSON line to $HEAPLOG (default
 * /tmp/heaplog-<pid>.jsonl) with the seconds since start, the process's CPU seconds so far, its
 * RSS, its peak (VmHWM, the figure the bench reports) and its anonymous and file-backed parts
 * (RssAnon: V8's heap and malloc's; RssFile: the executable's pages), V8's committed and used heap,
 * external memory (MiB), and each V8 heap space as [committed, used] MiB.
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
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const statusMiB = (field) => mib(Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? NaN) * 1024);
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name.replace(/_space$/, ''), [mib(s.space_size), mib(s.space_used_size)]]));
  const line = {
    t: (Date.now() - started) / 1000,
    cpu: Math.round((cpu.user + cpu.system) / 1e4) / 100,
    rss: mib(memory.rss),
    hwm: statusMiB('VmHWM'),
    anon: statusMiB('RssAnon'),
    file: statusMiB('RssFile'),
    total: mib(heap.total_heap_size),
    used: mib(heap.used_heap_size),
    ext: mib(memory.external),
    spaces,
  };
  fs.appendFileSync(file, `${JSON.stringify(line)}\n`);
}, 1000).unref();
