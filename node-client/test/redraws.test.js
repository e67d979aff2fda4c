'use strict';
// vectors/redraws.json: a progress bar's redraws reach the log file at most once per second
// (tests/client/test_redraws.py runs the same cases against bridge/lines.py).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { RedrawThrottle } = require('../src/lines.js');

const { cases } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'redraws.json'), 'ascii'));

for (const c of cases) {
  test(`redraws: ${c.name}`, () => {
    const throttle = new RedrawThrottle(c.interval);
    const log = [];
    for (const [stream, text, end, t] of c.lines) log.push(...throttle.feed(stream, text, end, t));
    log.push(...throttle.flush());
    assert.deepEqual(log, c.log);
  });
}
