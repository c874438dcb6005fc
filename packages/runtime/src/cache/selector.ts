/**
 * Label selectors: parsing the string form the API server accepts and matching objects.
 *
 * Guarantees: supports `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)` and `k notin (a,b)`,
 * comma-separated and all required, with the API server's meaning; a selector that cannot be
 * parsed raises an error naming the offending term instead of matching everything.
 */

export type Requirement =
  | { key: string; op: 'in'; values: string[] }
  | { key: string; op: 'notin'; values: string[] }
  | { key: string; op: 'exists' }
  | { key: string; op: '!exists' };

export type LabelSelector = Requirement[];

export function parseSelector(text: string | Record<string, string> | undefined): LabelSelector {
  if (text === undefined) return [];
  if (typeof text !== 'string') return Object.entries(text).map(([key, value]) => ({ key, op: 'in', values: [value] }));
  const terms = splitTerms(text);
  return terms.map(parseTerm);
}

export function formatSelector(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

export function matchesSelector(labels: Record<string, string> | undefined, selector: LabelSelector): boolean {
  const have = labels ?? {};
  return selector.every((req) => {
    const value = have[req.key];
    switch (req.op) {
      case 'in':
        return value !== undefined && req.values.includes(value);
      case 'notin':
        return value === undefined || !req.values.includes(value);
      case 'exists':
        return value !== undefined;
      case '!exists':
        return value === undefined;
    }
  });
}

function splitTerms(text: string): string[] {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      terms.push(current.trim());
      current = '';
    } else current += ch;
  }
  if (current.trim()) terms.push(current.trim());
  return terms.filter((t) => t.length > 0);
}

function parseTerm(term: string): Requirement {
  const set = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
  if (set) {
    const values = set[3]!.split(',').map((v) => v.trim()).filter(Boolean);
    return { key: set[1]!, op: set[2] as 'in' | 'notin', values };
  }
  const notEqual = /^([\w./-]+)\s*!=\s*([\w.-]*)$/.exec(term);
  if (notEqual) return { key: notEqual[1]!, op: 'notin', values: [notEqual[2]!] };
  const equal = /^([\w./-]+)\s*==?\s*([\w.-]*)$/.exec(term);
  if (equal) return { key: equal[1]!, op: 'in', values: [equal[2]!] };
  const absent = /^!([\w./-]+)$/.exec(term);
  if (absent) return { key: absent[1]!, op: '!exists' };
  if (/^[\w./-]+$/.test(term)) return { key: term, op: 'exists' };
  throw new Error(`invalid label selector term "${term}"`);
}
