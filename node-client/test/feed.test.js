'use strict';
// vectors/feed.json through src/feed.js (tests/scheduler/test_feed.py runs the same cases
// against bridge/feed.py): how a face finds "now" and "from event N" in a job's feed.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { FeedError, seqOf, lastSeq, offsetOf, lastStatus } = require('../src/feed.js');

const { cases } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'feed.json'), 'ascii'));

/** The case's file, written as the vector's 'about' says. */
function build(c, file) {
  const parts = [];
  for (const item of c.lines) {
    const [first, last] = item.seqs || [null, null];
    const seqs = first === null ? [null] : Array.from({ length: last - first + 1 }, (_, i) => first + i);
    for (const seq of seqs) {
      let line = item.line;
      if (seq !== null) {
        const [mod, unit] = item.pad || [1, 0];
        line = line.replace('{seq}', String(seq)).replace('{pad}', seq % mod === 0 ? 'x'.repeat(unit) : '');
      }
      parts.push(line + '\n');
    }
  }
  parts.push(c.partial || '');
  fs.writeFileSync(file, parts.join(''), 'ascii');
}

function lineAt(file, offset) {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(64);
    const n = fs.readSync(fd, buf, 0, 64, offset);
    return buf.subarray(0, n);
  } finally { fs.closeSync(fd); }
}

for (const c of cases) {
  test(`feed: ${c.name}`, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tb-feed-'));
    try {
      const file = path.join(dir, 'events.jsonl');
      if (c.lines.length || c.partial) build(c, file);
      const expect = c.expect;
      if (expect.last_seq === 'FeedError') assert.throws(() => lastSeq(file), (err) => err instanceof FeedError && /no event number/.test(err.message));
      else assert.equal(lastSeq(file), expect.last_seq);
      const { offset, status } = lastStatus(file);
      assert.equal(status ? status.t : null, expect.last_status_t);
      const size = fs.existsSync(file) ? fs.statSync(file).size : 0;
      assert.equal(offset, size - (c.partial || '').length);
      for (const [n, seq] of expect.from) {
        if (seq === 'FeedError') {
          assert.throws(() => offsetOf(file, n), (err) => err instanceof FeedError && /attach from the start or from now/.test(err.message));
          continue;
        }
        const at = offsetOf(file, n);
        if (seq === null) assert.equal(at, offset, String(n));
        else assert.equal(seqOf(lineAt(file, at)), seq, String(n));
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('feed: an event number is a positive integer', () => {
  for (const bad of [0, -1, 1.5, '3', true, null]) {
    assert.throws(() => offsetOf('/nonexistent/events.jsonl', bad), (err) => err instanceof TypeError && /an event number is an integer from 1/.test(err.message), String(bad));
  }
});
