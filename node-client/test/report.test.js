'use strict';
// buildReport(facts, files) (src/report.js) against vectors/report.json, the contract
// tests/client/test_report_vectors.py runs too: the same facts record and files in, the same
// report out, in both clients; and job_facts.apply: the same messages in, the same record out.

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const fs = require('node:fs');
const { buildReport } = require('../src/report.js');
const jobFacts = require('../src/job_facts.js');
const ranks = require('../src/ranks.js');
const jsonform = require('../src/jsonform.js');

const { cases, apply } = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors', 'report.json'), 'ascii'));

for (const c of cases) {
  test(`report vector: ${c.name}`, () => {
    const built = buildReport(jobFacts.fromPlain(c.facts), c.files);
    assert.deepStrictEqual(JSON.parse(JSON.stringify(built)), c.report);
  });
}

for (const c of apply) {
  test(`apply vector: ${c.name}`, () => {
    let facts = jobFacts.initial({ id: 'job-0123456789ab', command: ['python', 'train.py'], started: 1000, startedWall: c.facts.started_wall });
    facts.ranks = ranks.initial();
    // "NaN" in a message's metrics is read back as the number it stands for (jsonform.js)
    for (const message of c.messages) facts = jobFacts.apply(facts, jsonform.revive(structuredClone(message)));
    delete facts.ranks;
    assert.deepStrictEqual(JSON.parse(jsonform.stringify(facts)), c.facts);
  });
}

test('the vectors\' records have every key of a new record, and no other', () => {
  const keys = Object.keys(jobFacts.initial({ id: 'job-x', command: ['true'], started: 0, startedWall: 0 })).sort();
  for (const c of cases) assert.deepStrictEqual(Object.keys(c.facts).sort(), keys, c.name);
});
