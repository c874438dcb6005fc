/**
 * Dashboard panels as one self-contained SVG: a grid of time-series charts, one per panel, each a
 * line per series over the same time range — the picture of a Grafana dashboard drawn from what
 * Prometheus's query_range API answered (written by hand, as svg.ts, no plotting library).
 *
 * Guarantees: pure; every panel has its title, a y axis from min(0, lowest value) to a "nice"
 * bound at or above the highest value, and an x axis in seconds from the range's start. A
 * non-finite value (NaN, ±Inf) breaks its line; titles and legend labels are cut to fit the panel's width. Series beyond `maxSeries` per panel are left out
 * and the panel says how many; a panel without data says "no data". Text is XML-escaped.
 */
import { escapeXml, niceCeil } from './svg.ts';

export interface PanelSeries {
  label: string;
  /** [Unix seconds, value] pairs in time order. */
  points: ReadonlyArray<readonly [number, number]>;
}

export interface Panel {
  title: string;
  series: readonly PanelSeries[];
}

export interface DashboardPictureOptions {
  title: string;
  startSeconds: number;
  endSeconds: number;
  columns?: number;
  panelWidth?: number;
  panelHeight?: number;
  maxSeries?: number;
}

const LEGEND_PER_LINE = 3;
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
const fmt = (n: number): string => (Math.round(n * 10) / 10).toString();

/** A value as an axis label: short, with k/M/G for large magnitudes. */
function tick(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toPrecision(3)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toPrecision(3)}k`;
  return `${+v.toPrecision(3)}`;
}

function panelSvg(panel: Panel, x0: number, y0: number, w: number, h: number, o: DashboardPictureOptions): string[] {
  const out: string[] = [];
  const m = { left: 48, right: 10, top: 24, bottom: 24 + 13 * 3 };
  const plotW = w - m.left - m.right;
  const plotH = h - m.top - m.bottom;
  const maxSeries = o.maxSeries ?? 6;
  const shown = panel.series.slice(0, maxSeries);
  const values = shown.flatMap((s) => s.points.map(([, v]) => v)).filter((v) => Number.isFinite(v));
  const hi = niceCeil(Math.max(0, ...values));
  const lo = Math.min(0, ...values) < 0 ? -niceCeil(-Math.min(...values)) : 0;
  const span = o.endSeconds - o.startSeconds || 1;
  const x = (t: number) => x0 + m.left + ((t - o.startSeconds) / span) * plotW;
  const y = (v: number) => y0 + m.top + (1 - (v - lo) / (hi - lo)) * plotH;
  const titleRoom = Math.floor((w - m.left) / 7.5);
  const title = panel.title.length > titleRoom ? `${panel.title.slice(0, titleRoom - 1)}…` : panel.title;
  out.push(`<text x="${fmt(x0 + m.left)}" y="${fmt(y0 + 16)}" font-size="13" font-weight="bold">${escapeXml(title)}</text>`);
  for (let i = 0; i <= 4; i++) {
    const v = lo + ((hi - lo) / 4) * i;
    out.push(`<line x1="${fmt(x0 + m.left)}" y1="${fmt(y(v))}" x2="${fmt(x0 + m.left + plotW)}" y2="${fmt(y(v))}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${fmt(x0 + m.left - 4)}" y="${fmt(y(v) + 4)}" text-anchor="end" font-size="10">${tick(v)}</text>`);
  }
  for (let i = 0; i <= 4; i++) {
    const t = o.startSeconds + (span / 4) * i;
    out.push(`<text x="${fmt(x(t))}" y="${fmt(y0 + m.top + plotH + 13)}" text-anchor="middle" font-size="10">${Math.round(t - o.startSeconds)} s</text>`);
  }
  out.push(`<rect x="${fmt(x0 + m.left)}" y="${fmt(y0 + m.top)}" width="${fmt(plotW)}" height="${fmt(plotH)}" fill="none" stroke="#999"/>`);
  if (values.length === 0) {
    out.push(`<text x="${fmt(x0 + m.left + plotW / 2)}" y="${fmt(y0 + m.top + plotH / 2)}" text-anchor="middle" fill="#999">no data</text>`);
  }
  shown.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    let segment: string[] = [];
    const flush = () => {
      if (segment.length === 1) out.push(`<circle cx="${segment[0]!.split(',')[0]}" cy="${segment[0]!.split(',')[1]}" r="1.5" fill="${color}"/>`);
      else if (segment.length > 1) out.push(`<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${segment.join(' ')}"/>`);
      segment = [];
    };
    for (const [t, v] of s.points) {
      if (Number.isFinite(v)) segment.push(`${fmt(x(t))},${fmt(y(v))}`);
      else flush();
    }
    flush();
  });
  // Legend: up to LEGEND_PER_LINE entries a line under the plot, each cut to its share of the width.
  const room = Math.floor((w - m.left) / LEGEND_PER_LINE / 6.5) - 3;
  const short = (label: string) => (label.length > room ? `${label.slice(0, room - 1)}…` : label);
  const entries = shown.map((s, i) => `<tspan fill="${COLORS[i % COLORS.length]}">■</tspan> ${escapeXml(short(s.label))}`);
  if (panel.series.length > shown.length) entries.push(`(+${panel.series.length - shown.length} more)`);
  entries.forEach((entry, i) => {
    const ex = x0 + m.left + (i % LEGEND_PER_LINE) * ((w - m.left) / LEGEND_PER_LINE);
    const ey = y0 + m.top + plotH + 28 + Math.floor(i / LEGEND_PER_LINE) * 13;
    out.push(`<text x="${fmt(ex)}" y="${fmt(ey)}" font-size="10">${entry}</text>`);
  });
  return out;
}

export function dashboardSvg(panels: readonly Panel[], o: DashboardPictureOptions): string {
  const columns = o.columns ?? 3;
  const pw = o.panelWidth ?? 420;
  const ph = o.panelHeight ?? 230;
  const width = columns * pw;
  const height = 40 + Math.ceil(panels.length / columns) * ph;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  out.push(`<text x="${width / 2}" y="26" text-anchor="middle" font-size="16">${escapeXml(o.title)}</text>`);
  panels.forEach((p, i) => out.push(...panelSvg(p, (i % columns) * pw, 40 + Math.floor(i / columns) * ph, pw, ph, o)));
  out.push('</svg>');
  return out.join('\n') + '\n';
}
