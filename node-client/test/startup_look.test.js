'use strict';
// The look at the startup deadline, the pure part: vectors/startup_look.json, which
// tests/client/test_startup_look.py runs too (real processes: e2e.test.js).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { judge } = require('../src/startup_look.js');

const { cases } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'startup_look.json'), 'ascii'));

for (const c of cases) {
  test(`startup look vector: ${c.name}`, () => {
    assert.deepEqual(judge(c.before, c.after), c.verdict);
  });
}
