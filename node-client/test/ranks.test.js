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
    assert.strictEqual((ranks.errorBody(state, cause) || {}).type ?? null, c.root_cause.error_type); // none for a rank killed with no error
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

test('SIGUSR1 sections are told apart by pid, and the report reads the same markers', () => {
  const { sigusr1Sections } = require('../src/rankdumps.js');
  const { signalDumpedIn } = require('../src/report_files.js');
  const text = '[trainbridge] pid 7: native crashes, SIGUSR1 dumps and GIL-freeze dumps go here\n'
    + '[trainbridge] pid 11: stacks on SIGUSR1\n'
    + 'Current thread 0x1 (most recent call first):\n  File "/w/a.py", line 3 in f\n\n'
    + '[trainbridge] pid 12: stacks on SIGUSR1\n'
    + 'Current thread 0x2 (most recent call first):\n  File "/w/b.py", line 4 in g\n';
  const got = sigusr1Sections(text);
  assert.deepEqual([...got.keys()].sort(), [11, 12]);
  assert.deepEqual(ranksHang.mainThreadFrames(got.get(11)).map((f) => f.function), ['f']);
  assert.deepEqual(ranksHang.mainThreadFrames(got.get(12)).map((f) => f.function), ['g']);
  assert.deepEqual([...signalDumpedIn(text)].sort(), [11, 12]);
});
