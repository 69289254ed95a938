/**
 * @module perf/xy-chart
 * A standalone SVG scatter/line chart with free x values (no dependency), for
 * perf's throughput-vs-latency curve and tune's Pareto front and memory
 * chart. Kin of bench/lib/svg-chart.ts, which draws series over shared x
 * values for the developers' benches; src/ does not import bench/, so the
 * few shared helpers are repeated here.
 */

export interface XyPoint {
  readonly x: number;
  readonly y: number;
  /** Written beside the point (e.g. "c=16"). */
  readonly label?: string;
}

export interface XySeries {
  readonly name: string;
  readonly points: readonly XyPoint[];
  readonly color: string;
  /** Join the points in order (a sweep); false draws points only (candidates). */
  readonly line: boolean;
  readonly dashed?: boolean;
}

export interface XyChart {
  readonly title: string;
  readonly subtitle?: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly series: readonly XySeries[];
  /** A point drawn larger, ringed, with its label (tune's chosen config). */
  readonly highlight?: XyPoint & { readonly color: string };
  readonly logX?: boolean;
}

const W = 760;
const H = 470;
const M = { left: 78, right: 200, top: 64, bottom: 54 };
const FONT = 'font-family="Helvetica, Arial, sans-serif"';

export function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** 12,345 → "12.3k"; 0.25 → "0.25". */
export function shortNumber(v: number): string {
  const three = (x: number): string => {
    const t = x.toPrecision(3);
    return t.includes('.') && !t.includes('e') ? t.replace(/0+$/, '').replace(/\.$/, '') : t;
  };
  if (Math.abs(v) >= 1e6) return `${three(v / 1e6)}M`;
  if (Math.abs(v) >= 1e3) return `${three(v / 1e3)}k`;
  return three(v);
}

/** About six round ticks (1, 2, 5 × 10^k steps) covering [lo, hi]. */
function linearTicks(lo: number, hi: number): number[] {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  const span = hi - lo || Math.abs(hi) || 1;
  const raw = span / 6;
  const e = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * e).find((s) => s >= raw) ?? 10 * e;
  const out: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Number(t.toPrecision(12)));
  return out;
}

function logTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  if (!(lo > 0) || !Number.isFinite(hi) || hi < lo) return ticks;
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const t = m * 10 ** e;
      if (t >= lo && t <= hi) ticks.push(t);
    }
  }
  return ticks;
}

const f = (n: number): string => n.toFixed(1);

export function renderXyChart(chart: XyChart): string {
  const all = chart.series.flatMap((s) => s.points).filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  // A log axis needs positive values; with none at all (no successful answer) the frame is drawn empty, linear.
  const logX = chart.logX === true && all.length > 0 && all.every((p) => p.x > 0);
  let xLo = Math.min(...all.map((p) => p.x), Number.POSITIVE_INFINITY);
  let xHi = Math.max(...all.map((p) => p.x), Number.NEGATIVE_INFINITY);
  let yHi = Math.max(...all.map((p) => p.y), 0);
  if (!Number.isFinite(xLo)) [xLo, xHi] = [0, 1];
  if (logX) {
    // Half-decade bounds: round numbers at the edges, points never on the frame.
    xLo = 10 ** (Math.floor(Math.log10(xLo) * 2) / 2);
    xHi = 10 ** (Math.ceil(Math.log10(xHi) * 2) / 2);
  } else {
    xLo = 0;
    xHi = xHi > 0 ? xHi * 1.08 : 1;
  }
  yHi = yHi > 0 ? yHi * 1.1 : 1;
  const sx = (x: number): number =>
    M.left + (logX ? (Math.log10(x) - Math.log10(xLo)) / (Math.log10(xHi) - Math.log10(xLo) || 1) : (x - xLo) / (xHi - xLo || 1)) * plotW;
  const sy = (y: number): number => M.top + plotH - (y / yHi) * plotH;

  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`);
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${M.left}" y="26" ${FONT} font-size="16" font-weight="bold">${esc(chart.title)}</text>`);
  if (chart.subtitle) out.push(`<text x="${M.left}" y="46" ${FONT} font-size="12" fill="#555">${esc(chart.subtitle)}</text>`);
  for (const t of linearTicks(0, yHi)) {
    if (t > yHi) continue;
    out.push(`<line x1="${M.left}" x2="${M.left + plotW}" y1="${f(sy(t))}" y2="${f(sy(t))}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${M.left - 8}" y="${f(sy(t) + 4)}" ${FONT} font-size="11" text-anchor="end" fill="#444">${esc(shortNumber(t))}</text>`);
  }
  for (const t of logX ? logTicks(xLo, xHi) : linearTicks(xLo, xHi)) {
    if (t < xLo || t > xHi) continue;
    out.push(`<line x1="${f(sx(t))}" x2="${f(sx(t))}" y1="${M.top}" y2="${M.top + plotH}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${f(sx(t))}" y="${M.top + plotH + 16}" ${FONT} font-size="11" text-anchor="middle" fill="#444">${esc(shortNumber(t))}</text>`);
  }
  out.push(`<rect x="${M.left}" y="${M.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#999"/>`);
  out.push(`<text x="${M.left + plotW / 2}" y="${H - 12}" ${FONT} font-size="12" text-anchor="middle">${esc(chart.xLabel)}</text>`);
  out.push(
    `<text x="18" y="${M.top + plotH / 2}" ${FONT} font-size="12" text-anchor="middle" transform="rotate(-90 18 ${M.top + plotH / 2})">${esc(chart.yLabel)}</text>`,
  );

  chart.series.forEach((s, i) => {
    const pts = s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y) && (!logX || p.x > 0));
    if (s.line && pts.length > 1) {
      const d = pts.map((p, j) => `${j === 0 ? 'M' : 'L'}${f(sx(p.x))},${f(sy(p.y))}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    }
    for (const p of pts) {
      out.push(`<circle cx="${f(sx(p.x))}" cy="${f(sy(p.y))}" r="3.5" fill="${s.color}"/>`);
      if (p.label) out.push(`<text x="${f(sx(p.x) + 6)}" y="${f(sy(p.y) - 6)}" ${FONT} font-size="10" fill="${s.color}">${esc(p.label)}</text>`);
    }
    const ly = M.top + 8 + i * 20;
    const lx = W - M.right + 16;
    out.push(`<line x1="${lx}" x2="${lx + 22}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="3"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    out.push(`<text x="${lx + 28}" y="${ly + 4}" ${FONT} font-size="12">${esc(s.name)}</text>`);
  });
  const h = chart.highlight;
  if (h && Number.isFinite(h.x) && Number.isFinite(h.y) && (!logX || h.x > 0)) {
    out.push(`<circle cx="${f(sx(h.x))}" cy="${f(sy(h.y))}" r="9" fill="none" stroke="${h.color}" stroke-width="2.5"/>`);
    if (h.label)
      out.push(`<text x="${f(sx(h.x) + 12)}" y="${f(sy(h.y) + 16)}" ${FONT} font-size="12" font-weight="bold" fill="${h.color}">${esc(h.label)}</text>`);
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
