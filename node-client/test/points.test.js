'use strict';
// vectors/points.json: which points of a metric series are kept (src/points.js; the Python
// twin protocol/points.py runs the same vectors in tests/client/test_points.py).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const points = require('../src/points.js');

const { cases } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'points.json'), 'ascii'));
const NOT_FINITE = { NaN, Infinity, '-Infinity': -Infinity };
const revive = (series) => series.map((v) => (typeof v === 'string' && v in NOT_FINITE ? NOT_FINITE[v] : v));

for (const c of cases) {
  test(`points vector: ${c.name}`, () => {
    const values = Object.fromEntries(Object.entries(c.values).map(([k, s]) => [k, revive(s)]));
    assert.deepEqual(points.keep(c.n, values, c.limit), c.kept);
  });
}

test('never more than the limit', () => {
  const values = { loss: Array.from({ length: 10000 }, (_, i) => ((i * 7919) % 1000) / 10), lr: Array(10000).fill(1e-3) };
  for (const limit of [3, 30, 512, 4000]) {
    const kept = points.keep(10000, values, limit);
    assert.ok(kept.length <= limit);
    assert.deepEqual(kept, [...new Set(kept)].sort((a, b) => a - b));
  }
});
