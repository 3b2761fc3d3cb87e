// Statistics shared by the benchmark's figures: medians, percentiles and ratios of repeated
// measurements, and the interleaving of a figure with its baseline (A B, B A, A B, ...), so that
// the noise of this shared machine falls on both sides alike.

/** The `p`-th percentile of `values` (0..100), linear between the closest ranks. */
export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low] + (sorted[high] - sorted[low]) * (rank - low);
}

export const median = (values) => percentile(values, 50);

export function mean(values) {
  return values.length === 0 ? NaN : values.reduce((sum, value) => sum + value, 0) / values.length;
}

/** `{ n, median, p95, p99, min, max, mean }` of `values`. */
export function summarize(values) {
  return {
    n: values.length,
    median: median(values),
    p95: percentile(values, 95),
    p99: percentile(values, 99),
    min: values.length === 0 ? NaN : Math.min(...values),
    max: values.length === 0 ? NaN : Math.max(...values),
    mean: mean(values),
  };
}

/** `a / b`, or `null` when it has no meaning. */
export function ratio(a, b) {
  return Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? a / b : null;
}

/**
 * Runs `reps` rounds of every variant of `variants` (`{ name: async () => number }`), in an order
 * that rotates each round, after `warmup` untimed rounds. Returns `{ name: number[] }`.
 */
export async function interleave(variants, { reps, warmup = 0, between } = {}) {
  const names = Object.keys(variants);
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  for (let round = -warmup; round < reps; round++) {
    const shift = ((round % names.length) + names.length) % names.length;
    const order = [...names.slice(shift), ...names.slice(0, shift)];
    for (const name of order) {
      const value = await variants[name]();
      if (round >= 0) samples[name].push(value);
      await between?.();
    }
  }
  return samples;
}

/** Milliseconds since an arbitrary origin, with sub-microsecond resolution. */
export const now = () => Number(process.hrtime.bigint()) / 1e6;

/** Runs the garbage collector when Node was started with `--expose-gc`, a few times over. */
export async function collectGarbage() {
  if (typeof globalThis.gc !== 'function') return false;
  for (let i = 0; i < 3; i++) {
    globalThis.gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return true;
}

/** Memory of this process now, in bytes: `{ rss, heapTotal, heapUsed, external, arrayBuffers }`. */
export function memory() {
  const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage();
  return { rss, heapTotal, heapUsed, external, arrayBuffers };
}
