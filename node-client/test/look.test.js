'use strict';
// The look before a hang is declared, the pure part: vectors/look.json, which
// tests/client/test_look.py runs too (real processes: e2e.test.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { judge } = require('../src/look.js');

const { cases } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'look.json'), 'ascii'));

for (const c of cases) {
  test(`look vector (${c.reason}): ${c.name}`, () => {
    assert.deepEqual(judge(c.reason, c.before, c.after), c.verdict);
  });
}

test('an unknown look reason is refused', () => {
  assert.throws(() => judge('stall', { t: 0 }, { t: 1, procs: [] }), /unknown look reason "stall"/);
});
