'use strict';
// The look before a hang is declared, the pure part: vectors/look.json, which
// tests/client/test_look.py runs too (real processes: e2e.test.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { heard, judge, stallWheres } = require('../src/look.js');

const vectors = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'look.json'), 'ascii'));
const { cases } = vectors;

for (const c of cases) {
  test(`look vector (${c.reason}): ${c.name}`, () => {
    assert.deepEqual(judge(c.reason, c.before, c.after), c.verdict);
  });
}

test('an unknown look reason is refused', () => {
  assert.throws(() => judge('stage_budget', { t: 0 }, { t: 1, procs: [] }), /unknown look reason "stage_budget"/);
});

for (const c of vectors.heard) {
  test(`the lead's heartbeats folded in: ${c.name}`, () => {
    let track = {};
    const worked = [];
    for (const [t, body] of c.beats) {
      const [next, w] = heard(track, body, t);
      track = next;
      worked.push(w);
    }
    assert.deepEqual(worked, c.worked);
    assert.deepEqual(track, c.track);
  });
}

for (const c of vectors.stall_wheres) {
  test(`the places of a stall window: ${c.name}`, () => {
    assert.deepEqual(stallWheres(c.wheres, c.start), c.out);
  });
}
