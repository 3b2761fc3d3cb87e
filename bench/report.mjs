// The benchmark's report: rows of figures (ours beside the baseline measured in the same run,
// medians, p95/p99, ratios, targets), printed as a table and written as JSON
// (bench/results/latest.json, with the machine), a markdown table (bench/results/latest.md) and an
// SVG chart of the ratios (bench/results/ratios.svg). Nothing here measures anything.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';

import { median, percentile, ratio, summarize } from './stats.mjs';

// ─── Rows ──────────────────────────────────────────────────────────────────────────────────────

/**
 * The reference's side of a row (`ai-sdk-harness-sessions` 0.2.0 measured in the same run, see
 * `loadReference()` in support.mjs): its summary, ours against it (as the row's ratio is), the
 * median of the interleaved pairs, and its target, by default "at or ahead of the reference".
 */
function referenceFields(side, r, pairs, target, ours, better) {
  if (side == null) return {};
  if (target === undefined) target = better === 'higher' ? AHEAD_HIGHER : AHEAD_LOWER;
  return {
    reference: side,
    referenceRatio: r,
    referencePairedRatio: pairs.length ? median(pairs) : null,
    referenceTarget: target === null ? undefined : judge(target, r, ours, side),
  };
}

/** The default target against the reference: at or ahead of it, by the row's own measure. */
const AHEAD_HIGHER = { text: '≥ 1.0 × the reference', check: (r) => r >= 1 };
const AHEAD_LOWER = { text: '≤ 1.0 × the reference', check: (r) => r <= 1 };

function judge(target, value, ours, baseline) {
  if (target === undefined) return undefined;
  let met = null;
  try {
    met = value === null && target.needsRatio !== false ? null : Boolean(target.check(value, ours, baseline));
  } catch {
    met = null;
  }
  return { text: target.text, met };
}

/**
 * A throughput row from times in milliseconds of `items` items: rates from the median time, the
 * slow end (p95 of the times) beside it, the ratio of the median rates and the median of the
 * ratios of each interleaved pair. Higher is better.
 */
export function rateRow({ id, label, baselineLabel, items, ours, baseline, reference, referenceTarget, target, chart, chartTarget }) {
  const rate = (ms) => (items / ms) * 1000;
  const side = (times) => ({ median: rate(median(times)), p95: rate(percentile(times, 95)), n: times.length, times: summarize(times) });
  const o = side(ours);
  const b = baseline && side(baseline);
  const r = b ? ratio(o.median, b.median) : null;
  const pairs = b ? ours.map((t, i) => baseline[i] / t).filter(Number.isFinite) : [];
  const f = reference && side(reference);
  const fr = f ? ratio(o.median, f.median) : null;
  const fPairs = f && reference.length === ours.length ? ours.map((t, i) => reference[i] / t).filter(Number.isFinite) : [];
  return {
    id,
    label,
    baselineLabel,
    unit: 'chunks/s',
    better: 'higher',
    ours: o,
    baseline: b,
    ...referenceFields(f, fr, fPairs, referenceTarget, o, 'higher'),
    ratio: r,
    ratioOf: 'ours/baseline throughput',
    pairedRatio: pairs.length ? median(pairs) : null,
    target: judge(target, r, o, b),
    chart,
    chartTarget,
  };
}

/** A row of times in milliseconds: medians, p95, p99, the ratio of the medians. Lower is better. */
export function timeRow({ id, label, baselineLabel, ours, baseline, reference, referenceTarget, target, chart, chartTarget, unit = 'ms', tail = 'p95' }) {
  const o = summarize(ours);
  const b = baseline ? summarize(baseline) : null;
  const r = b ? ratio(o.median, b.median) : null;
  const pairs = b && baseline.length === ours.length ? ours.map((t, i) => t / baseline[i]).filter(Number.isFinite) : [];
  const f = reference ? summarize(reference) : null;
  const fr = f ? ratio(o.median, f.median) : null;
  const fPairs = f && reference.length === ours.length ? ours.map((t, i) => t / reference[i]).filter(Number.isFinite) : [];
  return {
    id,
    label,
    baselineLabel,
    unit,
    better: 'lower',
    ours: o,
    baseline: b,
    ...referenceFields(f, fr, fPairs, referenceTarget, o, 'lower'),
    ratio: r,
    ratioOf: 'ours/baseline time',
    tail,
    pairedRatio: pairs.length ? median(pairs) : null,
    target: judge(target, r, o, b),
    chart,
    chartTarget,
  };
}

/**
 * A row of any other measure (memory, counts): `ours` and `baseline` as arrays of samples or
 * single numbers. Lower is better unless `better` says otherwise.
 */
export function valueRow({ id, label, baselineLabel, unit, ours, baseline, reference, referenceTarget, target, chart, chartTarget, better = 'lower' }) {
  const side = (value) => (value == null ? null : Array.isArray(value) ? summarize(value) : { median: value, n: 1 });
  const o = side(ours);
  const b = side(baseline);
  const r = b ? ratio(o.median, b.median) : null;
  const f = side(reference);
  const fr = f ? ratio(o.median, f.median) : null;
  return {
    id,
    label,
    baselineLabel,
    unit,
    better,
    ours: o,
    baseline: b,
    ...referenceFields(f, fr, [], referenceTarget, o, better),
    ratio: r,
    ratioOf: 'ours/baseline',
    pairedRatio: null,
    target: judge(target, r, o, b),
    chart,
    chartTarget,
  };
}

/** A row that says why a figure was not measured. */
export function skippedRow({ id, label, reason }) {
  return { id, label, skipped: reason, ours: null, baseline: null, ratio: null, target: undefined };
}

// ─── Formatting ────────────────────────────────────────────────────────────────────────────────

function number(value, digits = 3) {
  if (value == null || !Number.isFinite(value)) return '–';
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${(value / 1e6).toFixed(2)}M`;
  if (abs >= 1e4) return `${(value / 1e3).toFixed(0)}k`;
  if (abs >= 100) return value.toFixed(0);
  return value.toPrecision(digits);
}

/** `value` in `unit`, for people. */
export function format(value, unit) {
  if (value == null || !Number.isFinite(value)) return '–';
  switch (unit) {
    case 'chunks/s':
      return `${number(value)}/s`;
    case 'ms':
      return value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${number(value)} ms`;
    case 'bytes':
      return bytes(value);
    case 'bytes/session':
      return `${bytes(value)}/session`;
    default:
      return `${number(value)}${unit ? ` ${unit}` : ''}`;
  }
}

function bytes(value) {
  const abs = Math.abs(value);
  if (abs >= 1024 * 1024) return `${(value / 1024 / 1024).toFixed(1)} MiB`;
  if (abs >= 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${value.toFixed(0)} B`;
}

function sideText(side, unit, tail = 'p95') {
  if (side == null) return '–';
  const text = side[tail] !== undefined && side.n > 1 ? ` (${tail} ${format(side[tail], unit)})` : '';
  return `${format(side.median, unit)}${text}`;
}

function ratioText(row) {
  if (row.ratio == null) return '–';
  const paired = row.pairedRatio != null ? ` [pairs ${row.pairedRatio.toFixed(2)}]` : '';
  return `${row.ratio.toFixed(2)}×${paired}`;
}

function referenceText(row) {
  if (row.referenceRatio == null) return '–';
  const paired = row.referencePairedRatio != null ? ` [pairs ${row.referencePairedRatio.toFixed(2)}]` : '';
  const met = row.referenceTarget ? ` ${metText(row.referenceTarget)}` : '';
  return `${row.referenceRatio.toFixed(2)}×${paired}${met}`;
}

function metText(target) {
  if (target === undefined) return '';
  return target.met === true ? 'yes' : target.met === false ? 'NO' : '?';
}

/** The table's lines: one per row, figures in the order they ran. */
function tableRows(results) {
  const lines = [];
  for (const figure of results.figures) {
    for (const row of figure.rows) {
      if (row.skipped) {
        lines.push({ figure: figure.name, what: row.label, ours: `skipped: ${row.skipped}`, baseline: '', ratio: '', target: '', met: '', reference: '', vsReference: '' });
        continue;
      }
      lines.push({
        figure: figure.name,
        what: row.baselineLabel ? `${row.label} ‖ vs ${row.baselineLabel}` : row.label,
        ours: sideText(row.ours, row.unit, row.tail),
        baseline: sideText(row.baseline, row.unit, row.tail),
        ratio: ratioText(row),
        target: row.target?.text ?? '',
        met: metText(row.target),
        reference: row.reference ? sideText(row.reference, row.unit, row.tail) : figure.reference?.missing ? 'not run' : '',
        vsReference: row.reference ? referenceText(row) : '',
      });
    }
  }
  return lines;
}

const COLUMNS = [
  ['figure', 'Figure'],
  ['what', 'Measured (‖ baseline)'],
  ['ours', 'Ours: median (tail)'],
  ['baseline', 'Baseline: median (tail)'],
  ['ratio', 'Ratio'],
  ['target', 'Target'],
  ['met', 'Met'],
  ['reference', 'Reference 0.2.0: median (tail)'],
  ['vsReference', 'Ours/reference, at or ahead?'],
];

/** The table as text for a terminal. */
export function textTable(results) {
  const lines = tableRows(results);
  const widths = COLUMNS.map(([key, head]) => Math.min(key === 'what' ? 70 : 40, Math.max(head.length, ...lines.map((l) => String(l[key]).length))));
  const cut = (text, width) => (text.length > width ? `${text.slice(0, width - 1)}…` : text.padEnd(width));
  const out = [COLUMNS.map(([, head], i) => cut(head, widths[i])).join('  '), widths.map((w) => '─'.repeat(w)).join('  ')];
  for (const line of lines) out.push(COLUMNS.map(([key], i) => cut(String(line[key]), widths[i])).join('  '));
  return out.join('\n');
}

/** The table in markdown, with the machine under it. */
export function markdown(results) {
  const escape = (text) => String(text).replaceAll('|', '\\|');
  const out = [
    `| ${COLUMNS.map(([, head]) => head).join(' | ')} |`,
    `| ${COLUMNS.map(() => '---').join(' | ')} |`,
    ...tableRows(results).map((line) => `| ${COLUMNS.map(([key]) => escape(line[key])).join(' | ')} |`),
  ];
  const m = results.machine;
  out.push(
    '',
    `Measured ${m.date} on ${m.cpu} (${m.cores} cores, ${m.memoryGiB} GiB), Node ${m.node}, commit ${m.commit}${m.dirty ? ' (with uncommitted changes)' : ''}, release addon; ` +
      `${results.quick ? 'quick run (few repetitions)' : 'full run'}. Each figure ran beside its baseline in the same process or in alternating processes, ` +
      `interleaved; medians, with p95 (or p99 where named) in brackets; "pairs" is the median of the ratios of the interleaved pairs. A shared, noisy 2-core machine: read ratios, not absolute figures. ` +
      `The reference column is ai-sdk-harness-sessions 0.2.0 (compiled from its source, loaded from ../shared/reference/ at run time) on the same workload in the same run, alternating with ours; "Ours/reference" is ours over it as the row's ratio is (times: below 1 is ahead; rates: above 1 is ahead).`,
  );
  const notes = results.figures.flatMap((figure) => [
    ...(figure.reference?.missing ? [`- **${figure.name}**: the reference was not measured: ${figure.reference.missing}.`] : []),
    ...(figure.notes ?? []).map((note) => `- **${figure.name}**: ${note}`),
  ]);
  if (notes.length) out.push('', ...notes);
  return out.join('\n') + '\n';
}

/**
 * An SVG bar chart of how each charted row compares to its baseline, as a speed (or thrift)
 * factor: above 1, ours is faster (or smaller); log scale; a tick at each row's target factor.
 */
export function svgChart(results) {
  const bars = [];
  for (const figure of results.figures) {
    for (const row of figure.rows) {
      if (!row.chart || row.ratio == null || !(row.ratio > 0)) continue;
      const factor = row.better === 'higher' ? row.ratio : 1 / row.ratio;
      bars.push({ label: `${figure.name}: ${row.chart}`, factor, met: row.target?.met, targetFactor: row.chartTarget });
      if (row.referenceRatio > 0) {
        const against = row.better === 'higher' ? row.referenceRatio : 1 / row.referenceRatio;
        bars.push({ label: `${figure.name}: ${row.chart}, vs the reference`, factor: against, met: row.referenceTarget?.met, targetFactor: 1 });
      }
    }
  }
  const width = 960;
  const left = 380;
  const right = 110;
  const barHeight = 22;
  const gap = 10;
  const top = 74;
  const height = top + bars.length * (barHeight + gap) + 46;
  const factors = bars.map((b) => b.factor);
  const lo = Math.min(0.25, ...factors.map((f) => f / 1.5));
  const hi = Math.max(4, ...factors.map((f) => f * 1.5));
  const span = Math.log(hi) - Math.log(lo);
  const x = (f) => left + ((Math.log(f) - Math.log(lo)) / span) * (width - left - right);
  const esc = (s) => String(s).replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="16" y="24" font-size="15" font-weight="600">harness-sessions against its baselines (same run, medians)</text>`,
    `<text x="16" y="42" fill="#555">Factor by which ours is faster (or smaller) than the baseline measured beside it; log scale; right of 1× is better; dashed: the target.</text>`,
    `<text x="16" y="58" fill="#555">${esc(results.machine.date.slice(0, 10))}, ${esc(results.machine.cpu)}, ${results.machine.cores} cores, Node ${esc(results.machine.node)}, commit ${esc(results.machine.commit)}${results.quick ? ', quick run' : ''}</text>`,
  ];
  const ticks = [];
  for (let f = 1 / 64; f <= 64; f *= 2) if (f >= lo && f <= hi) ticks.push(f);
  for (const f of ticks) {
    const tx = x(f).toFixed(1);
    parts.push(`<line x1="${tx}" y1="${top - 6}" x2="${tx}" y2="${height - 36}" stroke="${f === 1 ? '#333' : '#ddd'}" stroke-width="${f === 1 ? 1.5 : 1}"/>`);
    parts.push(`<text x="${tx}" y="${height - 20}" text-anchor="middle" fill="#555">${f >= 1 ? f : `1/${1 / f}`}×</text>`);
  }
  bars.forEach((bar, i) => {
    const y = top + i * (barHeight + gap);
    const x0 = x(1);
    const x1 = x(bar.factor);
    const color = bar.met === false ? '#d9534f' : bar.factor >= 1 ? '#2e8b57' : '#e0a030';
    const label = bar.label.length > 58 ? `${bar.label.slice(0, 57)}…` : bar.label;
    parts.push(`<text x="${left - 8}" y="${y + barHeight * 0.7}" text-anchor="end">${esc(label)}</text>`);
    parts.push(`<rect x="${Math.min(x0, x1).toFixed(1)}" y="${y}" width="${Math.max(1, Math.abs(x1 - x0)).toFixed(1)}" height="${barHeight}" fill="${color}" rx="2"/>`);
    const value = bar.factor >= 1 ? `${bar.factor >= 10 ? bar.factor.toFixed(0) : bar.factor.toFixed(2)}×` : `${bar.factor.toFixed(2)}× (1/${(1 / bar.factor).toFixed(1)})`;
    parts.push(`<text x="${(Math.max(x0, x1) + 6).toFixed(1)}" y="${y + barHeight * 0.7}">${value}</text>`);
    if (bar.targetFactor != null) {
      const tx = x(bar.targetFactor).toFixed(1);
      parts.push(`<line x1="${tx}" y1="${y - 3}" x2="${tx}" y2="${y + barHeight + 3}" stroke="#000" stroke-width="2" stroke-dasharray="3,2"/>`);
    }
  });
  parts.push('</svg>');
  return parts.join('\n') + '\n';
}

// ─── The machine, and writing it all ───────────────────────────────────────────────────────────

function git(args, cwd) {
  try {
    return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

/** What the figures were measured on. */
export function machineInfo(root) {
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.cpus().length,
    memoryGiB: Math.round(os.totalmem() / 1024 ** 3),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    date: new Date().toISOString(),
    commit: git(['rev-parse', '--short', 'HEAD'], root) ?? 'unknown',
    dirty: (git(['status', '--porcelain', '--', 'src', 'js', 'index.js', 'Cargo.toml'], root) ?? '') !== '',
    loadAverage: os.loadavg().map((l) => Number(l.toFixed(2))),
  };
}

/** Writes latest.json, latest.md and ratios.svg into `dir`; returns their paths. */
export function writeResults(dir, results) {
  mkdirSync(dir, { recursive: true });
  const files = { json: join(dir, 'latest.json'), md: join(dir, 'latest.md'), svg: join(dir, 'ratios.svg') };
  writeFileSync(files.json, JSON.stringify(results, null, 2) + '\n');
  writeFileSync(files.md, markdown(results));
  writeFileSync(files.svg, svgChart(results));
  return files;
}
