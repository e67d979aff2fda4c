'use strict';
/**
 * Which points of a metric series to keep when there are too many to draw: the rule behind
 * the progress message's `points` (protocol/points.py, its twin; vectors/points.json pins
 * both). Pure.
 *
 * The points are cut into equal runs of consecutive points, at most `limit / 3` of them;
 * each run keeps at most three: its first value that is not finite (NaN, inf), and the
 * lowest and highest value of the metric that moved most in that run, relative to the
 * metric's whole range. A spike of one step survives any thinning.
 */

const isNumber = (/** @type {unknown} */ v) => typeof v === 'number';
const isFinite = (/** @type {unknown} */ v) => typeof v === 'number' && Number.isFinite(v);

/**
 * The indices (ascending) to keep of `n` points whose metrics are `values` ({name: [n values]}).
 * @param {number} n
 * @param {Record<string, ReadonlyArray<any>>} values a value: a number, else null or a string (no number at that point)
 * @param {number} limit
 * @returns {number[]}
 */
function keep(n, values, limit) {
  if (n <= limit) return Array.from({ length: n }, (_, i) => i);
  const runs = Math.max(1, Math.floor(limit / 3));
  /** @type {Record<string, number>} */
  const spans = {};
  for (const [name, series] of Object.entries(values)) {
    let min = Infinity;
    let max = -Infinity;
    for (const v of series) if (isFinite(v)) { if (v < min) min = v; if (v > max) max = v; }
    spans[name] = max >= min ? max - min : 0;
  }
  /** @type {number[]} */
  const kept = [];
  for (let r = 0; r < runs; r++) {
    const lo = Math.floor((r * n) / runs);
    const hi = Math.floor(((r + 1) * n) / runs);
    /** @type {Set<number>} */
    const chosen = new Set();
    let odd = null;
    /** @type {[number, number, number] | null} */
    let best = null; // [moved, low, high]
    for (const [name, series] of Object.entries(values)) {
      let low = null;
      let high = null; // set together with low
      for (let i = lo; i < hi; i++) {
        const v = series[i];
        if (isNumber(v) && !isFinite(v)) odd = odd === null ? i : Math.min(odd, i);
        else if (isFinite(v)) {
          if (low === null || v < series[low]) low = i;
          if (high === null || v > series[high]) high = i;
        }
      }
      if (low === null) continue;
      const moved = spans[name] > 0 ? (series[/** @type {number} */ (high)] - series[low]) / spans[name] : 0;
      if (best === null || moved > best[0]) best = [moved, low, /** @type {number} */ (high)];
    }
    if (odd !== null) chosen.add(odd);
    if (best !== null) { chosen.add(best[1]); chosen.add(best[2]); }
    if (!chosen.size) chosen.add(hi - 1); // no number in the run: its last point says where it was
    kept.push(...[...chosen].sort((a, b) => a - b));
  }
  return kept;
}

module.exports = { keep };
