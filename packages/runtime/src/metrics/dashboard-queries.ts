/**
 * What a Grafana dashboard asks Prometheus: each panel's queries, the metric names a query reads,
 * and a query with the dashboard's variables filled in, so that tests can hold a dashboard to the
 * metrics an operator really serves and run its queries on a real Prometheus.
 *
 * Guarantees:
 * - `panelQueries` lists every target with an `expr` of every panel, rows' nested panels
 *   included, in the dashboard's order, each with its panel's title.
 * - `metricNames` names the series a PromQL expression selects: identifiers that are neither
 *   functions, aggregation modifiers, keywords, label names (in matchers, `by`/`without`/`on`/
 *   `ignoring`/`group_*` lists) nor text inside strings, durations or Grafana variables.
 * - `concreteQuery` replaces Grafana's `$__rate_interval` / `$__interval` / `$__range` and the
 *   dashboard's `$var` / `${var}` variables, so the query is plain PromQL.
 */

/** A panel's query. */
export interface PanelQuery {
  title: string;
  expr: string;
}

/** The part of a Grafana panel the queries are read from. */
export interface DashboardPanel {
  title?: string;
  targets?: Array<{ expr?: string }>;
  panels?: DashboardPanel[];
}

export function panelQueries(dashboard: { panels?: DashboardPanel[] }): PanelQuery[] {
  const queries: PanelQuery[] = [];
  const visit = (panels: readonly DashboardPanel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) if (target.expr) queries.push({ title: panel.title ?? '', expr: target.expr });
      visit(panel.panels ?? []);
    }
  };
  visit(dashboard.panels ?? []);
  return queries;
}

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'inf', 'nan']);

export function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""') // strings
    .replace(/\$\{[^}]*\}|\$\w+/g, ' ') // Grafana variables
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' '); // label lists
  const names = new Set<string>();
  for (const match of stripped.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const word = match[0];
    const rest = stripped.slice(match.index + word.length);
    const preceding = stripped[match.index - 1];
    if (KEYWORDS.has(word.toLowerCase()) || /^\s*\(/.test(rest) || (preceding !== undefined && /[0-9.]/.test(preceding))) continue;
    names.add(word);
  }
  return [...names];
}

/** `expr` with Grafana's interval variables set to `interval` and each `$name` / `${name}` to `variables[name]` (default `.*`, Grafana's "All"). */
export function concreteQuery(expr: string, variables: Record<string, string> = {}, interval = '1m'): string {
  return expr
    .replace(/\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}/g, interval)
    .replace(/\$\{(\w+)(?::\w+)?\}|\$(\w+)/g, (_, braced: string | undefined, bare: string | undefined) => variables[(braced ?? bare)!] ?? '.*');
}
