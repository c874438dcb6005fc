/**
 * A cumulative-distribution chart as a self-contained SVG, written by hand (no network, no
 * plotting library).
 *
 * Guarantees: pure; the output is a complete SVG document whose axes start at 0, whose x axis
 * ends at a "nice" bound (1, 2, 2.5 or 5 × 10^k) at or above the largest value, and in which each
 * series is a step line from 0 % to 100 %. Text is XML-escaped. Empty series are skipped.
 */

export interface Series {
  label: string;
  values: readonly number[];
  color: string;
  dashed?: boolean;
  opacity?: number;
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  width?: number;
  height?: number;
}

export function niceCeil(x: number): number {
  if (!(x > 0)) return 1;
  const exp = Math.floor(Math.log10(x));
  const base = 10 ** exp;
  for (const m of [1, 2, 2.5, 5, 10]) if (m * base >= x - 1e-12) return m * base;
  return 10 * base;
}

export function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const fmt = (n: number): string => (Math.round(n * 10) / 10).toString();

export function cdfSvg(series: readonly Series[], o: ChartOptions): string {
  const width = o.width ?? 720;
  const height = o.height ?? 420;
  const m = { left: 60, right: 20, top: 40, bottom: 50 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  const drawn = series.filter((s) => s.values.some((v) => Number.isFinite(v)));
  const maxX = niceCeil(Math.max(0, ...drawn.flatMap((s) => s.values.filter((v) => Number.isFinite(v)))));
  const x = (v: number) => m.left + (v / maxX) * plotW;
  const y = (f: number) => m.top + (1 - f) * plotH;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="white"/>`);
  out.push(`<text x="${width / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(o.title)}</text>`);
  // Grid and axes.
  for (let i = 0; i <= 5; i++) {
    const v = (maxX / 5) * i;
    out.push(`<line x1="${fmt(x(v))}" y1="${m.top}" x2="${fmt(x(v))}" y2="${m.top + plotH}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${fmt(x(v))}" y="${m.top + plotH + 18}" text-anchor="middle">${fmt(v)}</text>`);
  }
  for (let i = 0; i <= 4; i++) {
    const f = i / 4;
    out.push(`<line x1="${m.left}" y1="${fmt(y(f))}" x2="${m.left + plotW}" y2="${fmt(y(f))}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${m.left - 8}" y="${fmt(y(f) + 4)}" text-anchor="end">${i * 25}%</text>`);
  }
  out.push(`<line x1="${m.left}" y1="${m.top + plotH}" x2="${m.left + plotW}" y2="${m.top + plotH}" stroke="black"/>`);
  out.push(`<line x1="${m.left}" y1="${m.top}" x2="${m.left}" y2="${m.top + plotH}" stroke="black"/>`);
  out.push(`<text x="${m.left + plotW / 2}" y="${height - 12}" text-anchor="middle">${escapeXml(o.xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${m.top + plotH / 2}) rotate(-90)" text-anchor="middle">instances done</text>`);
  // Series as step lines.
  for (const s of drawn) {
    const v = s.values.filter((n) => Number.isFinite(n)).slice().sort((a, b) => a - b);
    const points: string[] = [`${fmt(x(0))},${fmt(y(0))}`];
    v.forEach((value, i) => {
      points.push(`${fmt(x(value))},${fmt(y(i / v.length))}`);
      points.push(`${fmt(x(value))},${fmt(y((i + 1) / v.length))}`);
    });
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.8" stroke-opacity="${s.opacity ?? 1}"${dash} points="${points.join(' ')}"/>`);
  }
  // Legend: one entry per distinct label.
  const legend = [...new Map(drawn.map((s) => [s.label, s])).values()];
  legend.forEach((s, i) => {
    const ly = m.top + 14 + i * 18;
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    out.push(`<line x1="${m.left + plotW - 230}" y1="${ly}" x2="${m.left + plotW - 200}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`);
    out.push(`<text x="${m.left + plotW - 194}" y="${ly + 4}">${escapeXml(s.label)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
