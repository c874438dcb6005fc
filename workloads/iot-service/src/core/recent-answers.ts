/**
 * Answers of the store kept a short while, so a burst of requests about the same thing asks the
 * store once (core's device lookup for commands, commands.ts).
 *
 * Guarantees: `get(key, ask, keep)` returns the answer `ask()` gave at most `maxAgeMs` ago for the
 * key, if `keep` said to keep it, else asks (requests that come while one `ask` runs share its
 * answer; a failed ask is kept by nobody and rejects each of them). At most `maxEntries` answers
 * are kept: at that bound they are all dropped. `forget(key)` drops the key's answer at once.
 */

export class RecentAnswers<K, V> {
  private readonly kept = new Map<K, { at: number; answer: Promise<V> }>();

  constructor(private readonly options: { maxAgeMs: number; maxEntries: number }) {}

  get(key: K, ask: () => Promise<V>, keep: (answer: V) => boolean): Promise<V> {
    const now = Date.now();
    const found = this.kept.get(key);
    if (found && now - found.at <= this.options.maxAgeMs) return found.answer;
    if (this.kept.size >= this.options.maxEntries) this.kept.clear();
    const answer = ask();
    const entry = { at: now, answer };
    this.kept.set(key, entry);
    const drop = () => {
      if (this.kept.get(key) === entry) this.kept.delete(key);
    };
    answer.then((value) => keep(value) || drop(), drop);
    return answer;
  }

  forget(key: K): void {
    this.kept.delete(key);
  }
}
