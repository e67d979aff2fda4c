'use strict';
// Per-rank rows and the root cause (src/ranks.js) against vectors/ranks.json, the contract
// tests/client/test_ranks.py runs too.
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const fs = require('node:fs');
const ranks = require('../src/ranks');
const ranksHang = require('../src/ranks_hang');

const { cases, launchers, rendezvous, hung, live } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'ranks.json'), 'ascii'));

for (const c of cases) {
  test(`ranks: ${c.name}`, () => {
    const state = ranks.initial();
    for (const [key, kind, body, ts] of c.messages) ranks.observe(state, key, kind, body, ts);
    const rows = ranks.table(state);
    assert.deepStrictEqual(rows.map((r) => ({
      rank: r.rank, role: r.role, pid: r.pid, state: r.state, stage: r.stage, progress: r.progress,
      ...(r.addr ? { addr: r.addr } : {}),
    })), c.rows);
    const cause = ranks.rootCause(rows);
    if (c.root_cause === null) {
      assert.strictEqual(cause, null);
      return;
    }
    assert.strictEqual(cause.rank, c.root_cause.rank);
    assert.strictEqual(cause.summary, c.root_cause.summary);
    assert.strictEqual(ranks.errorBody(state, cause).type, c.root_cause.error_type);
    assert.deepStrictEqual(Object.fromEntries(cause.consequences.map((x) => [String(x.rank), x.why])), c.root_cause.why);
  });
}

for (const [argv, worldSize, expected] of launchers) {
  test(`awaitsRanks: ${argv.join(' ')} (world_size ${worldSize})`, () => {
    assert.strictEqual(ranks.awaitsRanks({ argv, world_size: worldSize }), expected);
  });
}

for (const c of rendezvous) {
  test(`rendezvousWait: ${c.name}`, () => {
    const got = ranksHang.rendezvousWait(c.launcher, c.ranks_said_hello, c.waited_s, c.stacks);
    if (c.summary === null) {
      assert.strictEqual(got, null);
      return;
    }
    assert.deepStrictEqual([got.kind, got.summary, got.evidence], ['rendezvous_wait', c.summary, c.evidence]);
  });
}

for (const c of hung) {
  test(`hungRank: ${c.name}`, () => {
    const state = ranks.initial();
    for (const [key, kind, body, ts] of c.messages) ranks.observe(state, key, kind, body, ts);
    const got = ranksHang.hungRank(state);
    assert.strictEqual(got ? got.summary : null, c.summary);
  });
}

for (const c of live) {
  test(`liveCollective: ${c.name}`, () => {
    const state = ranks.initial();
    for (const [key, kind, body, ts] of c.messages) ranks.observe(state, key, kind, body, ts);
    const got = ranksHang.liveCollective(state);
    assert.deepStrictEqual(got ? { kind: got.kind, frame: got.evidence.frame, summary: got.summary } : null, c.diagnosis);
  });
}
