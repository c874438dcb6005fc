/**
 * A bound on costly work running at once (core's password checks: a database read and a hash,
 * one scrypt for a device registered before hashes became fast).
 *
 * Guarantees: at most `concurrency` jobs run at once; up to `maxQueued` more wait, in arrival
 * order; beyond that `run` rejects at once with `BusyError` (the caller sheds the load rather
 * than queueing without bound). A job whose `signal` aborts while it waits is dropped without
 * running (`run` rejects with the signal's reason); a job that started runs to its end.
 */

export class BusyError extends Error {
  constructor() {
    super('busy');
  }
}

export class Bounded {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly concurrency: number,
    private readonly maxQueued: number,
  ) {}

  async run<T>(job: () => Promise<T>, signal: AbortSignal): Promise<T> {
    signal.throwIfAborted();
    if (this.running >= this.concurrency) {
      if (this.waiting.length >= this.maxQueued) throw new BusyError();
      await new Promise<void>((resolve, reject) => {
        const start = () => {
          signal.removeEventListener('abort', drop);
          resolve();
        };
        const drop = () => {
          this.waiting.splice(this.waiting.indexOf(start), 1);
          reject(signal.reason);
        };
        this.waiting.push(start);
        signal.addEventListener('abort', drop, { once: true });
      });
    } else {
      this.running++;
    }
    try {
      return await job();
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // the slot passes to the next job
      else this.running--;
    }
  }
}
