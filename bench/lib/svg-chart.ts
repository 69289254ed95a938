/**
 * @module bench/lib/svg-chart
 * A small line-chart writer for bench results (no dependency): panels side by
 * side sharing one legend, a log-scale x axis (concurrency 1, 8, 64 sit
 * evenly) and a log-scale y axis (throughputs here span 1k to 100k+, which a
 * linear axis would flatten). Output is a standalone SVG document.
 */

export interface ChartSeries {
  readonly name: string;
  /** One value per x; NaN or ≤ 0 leaves a gap. */
  readonly values: readonly number[];
  readonly color: string;
  readonly dashed?: boolean;
}

/** A goal drawn as a short horizontal mark at one x. */
export interface ChartMark {
  readonly x: number;
  readonly y: number;
  readonly label: string;
  readonly color: string;
}

export interface ChartPanel {
  readonly title: string;
  readonly series: readonly ChartSeries[];
  readonly marks?: readonly ChartMark[];
}

export interface LineChart {
  readonly title: string;
  /** Smaller line under the title (machine, date). */
  readonly subtitle?: string;
  readonly xLabel: string;
  readonly yLabel: string;
  readonly xValues: readonly number[];
  readonly panels: readonly ChartPanel[];
  /** Extra lines under the legend. */
  readonly notes?: readonly string[];
}

const PANEL_W = 460;
const PANEL_H = 330;
const MARGIN = { left: 70, right: 24, top: 34, bottom: 44 };
const HEADER_H = 58;
const FONT = 'font-family="Helvetica, Arial, sans-serif"';

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function fmt(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

/** 12,345 → "12.3k"; 950 → "950". */
export function shortNumber(v: number): string {
  // Three significant digits, trailing zeros after a decimal point dropped (500 stays 500, 1.50 becomes 1.5).
  const three = (x: number): string => {
    const t = x.toPrecision(3);
    return t.includes('.') ? t.replace(/0+$/, '').replace(/\.$/, '') : t;
  };
  if (v >= 1e6) return `${three(v / 1e6)}M`;
  if (v >= 1e3) return `${three(v / 1e3)}k`;
  return three(v);
}

/** Gridlines at 1, 2, 5 × 10^k covering [lo, hi]. */
function logTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const t = m * 10 ** e;
      if (t >= lo && t <= hi) ticks.push(t);
    }
  }
  return ticks;
}

export function lineChartSvg(chart: LineChart): string {
  const all = chart.panels
    .flatMap((p) => [...p.series.flatMap((s) => s.values), ...(p.marks ?? []).map((m) => m.y)])
    .filter((v) => Number.isFinite(v) && v > 0);
  const yMin = 10 ** Math.floor(Math.log10(Math.min(...all, 1e9)));
  const yMax = 10 ** Math.ceil(Math.log10(Math.max(...all, 1)));
  const xs = chart.xValues;
  const xLo = Math.log(Math.min(...xs));
  const xHi = Math.log(Math.max(...xs));
  const innerW = PANEL_W - MARGIN.left - MARGIN.right;
  const innerH = PANEL_H - MARGIN.top - MARGIN.bottom;
  const xPos = (x: number): number => MARGIN.left + (xHi === xLo ? innerW / 2 : ((Math.log(x) - xLo) / (xHi - xLo)) * innerW);
  const yPos = (y: number): number => MARGIN.top + innerH - ((Math.log(y) - Math.log(yMin)) / (Math.log(yMax) - Math.log(yMin))) * innerH;

  const legendSeries = chart.panels[0]?.series ?? [];
  const legendRows = Math.ceil(legendSeries.length / 3);
  const notes = chart.notes ?? [];
  const width = PANEL_W * chart.panels.length;
  const height = HEADER_H + PANEL_H + 16 + legendRows * 20 + notes.length * 16 + 12;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="${width / 2}" y="24" text-anchor="middle" ${FONT} font-size="16" font-weight="bold">${esc(chart.title)}</text>`);
  if (chart.subtitle) out.push(`<text x="${width / 2}" y="44" text-anchor="middle" ${FONT} font-size="11" fill="#555">${esc(chart.subtitle)}</text>`);

  chart.panels.forEach((panel, pi) => {
    out.push(`<g transform="translate(${pi * PANEL_W},${HEADER_H})">`);
    out.push(`<text x="${MARGIN.left + innerW / 2}" y="18" text-anchor="middle" ${FONT} font-size="13" font-weight="bold">${esc(panel.title)}</text>`);
    for (const t of logTicks(yMin, yMax)) {
      const y = fmt(yPos(t));
      out.push(`<line x1="${MARGIN.left}" y1="${y}" x2="${MARGIN.left + innerW}" y2="${y}" stroke="#e4e4e4" stroke-width="1"/>`);
      out.push(`<text x="${MARGIN.left - 6}" y="${y}" dy="4" text-anchor="end" ${FONT} font-size="10" fill="#444">${shortNumber(t)}</text>`);
    }
    for (const x of xs) {
      const px = fmt(xPos(x));
      out.push(`<line x1="${px}" y1="${MARGIN.top}" x2="${px}" y2="${MARGIN.top + innerH}" stroke="#f0f0f0" stroke-width="1"/>`);
      out.push(`<text x="${px}" y="${MARGIN.top + innerH + 16}" text-anchor="middle" ${FONT} font-size="11" fill="#444">${x}</text>`);
    }
    out.push(`<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${innerW}" height="${innerH}" fill="none" stroke="#999" stroke-width="1"/>`);
    out.push(`<text x="${MARGIN.left + innerW / 2}" y="${MARGIN.top + innerH + 34}" text-anchor="middle" ${FONT} font-size="11">${esc(chart.xLabel)}</text>`);
    out.push(`<text transform="translate(16,${MARGIN.top + innerH / 2}) rotate(-90)" text-anchor="middle" ${FONT} font-size="11">${esc(chart.yLabel)}</text>`);
    for (const s of panel.series) {
      const pts = s.values.map((v, i) => (Number.isFinite(v) && v > 0 && xs[i] !== undefined ? { x: xPos(xs[i]!), y: yPos(v), v } : undefined));
      let d = '';
      let pen = false;
      for (const p of pts) {
        if (!p) {
          pen = false;
          continue;
        }
        d += `${pen ? 'L' : 'M'}${fmt(p.x)},${fmt(p.y)}`;
        pen = true;
      }
      if (d !== '') {
        out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2.2"${s.dashed ? ' stroke-dasharray="6,4"' : ''}/>`);
      }
      for (const p of pts) {
        if (!p) continue;
        out.push(`<circle cx="${fmt(p.x)}" cy="${fmt(p.y)}" r="3.2" fill="${s.color}"><title>${esc(`${s.name}: ${Math.round(p.v)}/s`)}</title></circle>`);
      }
    }
    for (const m of panel.marks ?? []) {
      if (!(Number.isFinite(m.y) && m.y > 0)) continue;
      const x = xPos(m.x);
      const y = fmt(yPos(m.y));
      out.push(`<line x1="${fmt(x - 34)}" y1="${y}" x2="${fmt(x + 6)}" y2="${y}" stroke="${m.color}" stroke-width="2" stroke-dasharray="2,2"/>`);
      out.push(`<text x="${fmt(x + 6)}" y="${y}" dy="-5" text-anchor="end" ${FONT} font-size="10" fill="${m.color}">${esc(m.label)}</text>`);
    }
    out.push('</g>');
  });

  const legendY = HEADER_H + PANEL_H + 10;
  const colW = width / 3;
  legendSeries.forEach((s, i) => {
    const x = (i % 3) * colW + 24;
    const y = legendY + Math.floor(i / 3) * 20;
    out.push(`<line x1="${x}" y1="${y + 6}" x2="${x + 26}" y2="${y + 6}" stroke="${s.color}" stroke-width="2.2"${s.dashed ? ' stroke-dasharray="6,4"' : ''}/>`);
    out.push(`<text x="${x + 32}" y="${y + 10}" ${FONT} font-size="11">${esc(s.name)}</text>`);
  });
  notes.forEach((n, i) => {
    out.push(`<text x="24" y="${legendY + legendRows * 20 + 12 + i * 16}" ${FONT} font-size="10" fill="#555">${esc(n)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
