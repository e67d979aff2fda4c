'use strict';
// The shared diagnosis cases (vectors/diagnosis.json) through src/diagnosis.js: the same
// facts give the same kind, frame, summary and hint as bridge/diagnosis.py, which runs the
// same file (tests/diagnosis/test_vectors.py).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { diagnoseEnd, diagnoseHang, stageAtEnd } = require('../src/diagnosis.js');

const DATA = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'diagnosis.json'), 'ascii'));

for (const c of DATA.cases) {
  test(`${c.verdict}: ${c.name}`, () => {
    const facts = JSON.parse(JSON.stringify(c.facts));
    if (c.verdict === 'stage') {
      assert.deepEqual({ stage: stageAtEnd(facts.stages, facts.error) }, c.expect);
      return;
    }
    const got = c.verdict === 'end' ? diagnoseEnd(facts) : diagnoseHang(facts);
    if (c.expect === null) {
      assert.equal(got, null);
      return;
    }
    assert.ok(got);
    assert.equal(got.kind, c.kind);
    for (const part of c.summary_has) assert.ok(got.summary.includes(part), `${part} in ${got.summary}`);
    for (const part of c.hint_has) assert.ok(got.hint.includes(part), `${part} in ${got.hint}`);
    assert.deepEqual({ kind: got.kind, frame: got.evidence.frame ?? null, summary: got.summary, hint: got.hint }, c.expect);
  });
}

test('every diagnosis kind has a case', () => {
  assert.deepEqual(new Set(DATA.cases.filter((c) => c.kind).map((c) => c.kind)), new Set(DATA.kinds));
});
