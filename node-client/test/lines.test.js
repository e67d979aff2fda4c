'use strict';
// The Node line splitter/decoder against the shared table (vectors/lines.json), plus the
// properties the table cannot show: chunking does not matter, decoding is reversible, and
// the GBK rule accepts exactly the byte pairs Python's gbk codec accepts.

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { LineSplitter, decodeLine, lineBytes, logText, isGbk } = require('../src/lines.js');
const { loadVectors } = require('../test-support/vectors.js');
const { PYTHON } = require('../test-support/python.js');

const { cases } = loadVectors('lines.json');

function splitAll(chunks, maxLine) {
  const splitter = new LineSplitter(maxLine);
  return [...chunks.flatMap((c) => splitter.feed(c)), ...splitter.flush()];
}

test('lines.json: the same lines, ends, encodings and texts as bridge/lines.py', async (t) => {
  for (const c of cases) {
    await t.test(c.name, () => {
      const chunks = c.chunks_hex.map((h) => Buffer.from(h, 'hex'));
      const got = splitAll(chunks, c.max_line).map((line) => {
        const { text, encoding } = decodeLine(line.data);
        return { hex: line.data.toString('hex'), end: line.end, encoding, text };
      });
      assert.deepEqual(got, c.lines);
    });
  }
});

test('lines do not depend on how the pipe cut the stream', () => {
  for (const c of cases) {
    const whole = Buffer.concat(c.chunks_hex.map((h) => Buffer.from(h, 'hex')));
    const oneByOne = [...whole].map((b) => Buffer.from([b]));
    assert.deepEqual(splitAll(oneByOne, c.max_line), splitAll([whole], c.max_line), c.name);
  }
});

test('decoding never throws and gives back the original bytes', () => {
  const pieces = ['a', '\n', '\xff', '\xe4\xb8\xad', '\xd6\xd0', '\x80', '\xa1\xa1', '\xed\xa0\x80'];
  let seed = 12345; // mulberry32: a reproducible stream of byte soups
  const rand = (n) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) % n;
  };
  const seen = new Set();
  for (let k = 0; k < 500; k++) {
    const data = Buffer.from(Array.from({ length: rand(12) }, () => pieces[rand(pieces.length)]).join(''), 'latin1');
    const { text, encoding } = decodeLine(data);
    seen.add(encoding);
    assert.deepEqual(lineBytes(text, encoding), data);
    Buffer.from(logText(text), 'utf8'); // always writable
    assert.doesNotMatch(logText(text), /[\ud800-\udfff]/);
  }
  assert.deepEqual([...seen].sort(), ['escaped', 'gbk', 'utf-8']);
  assert.equal(logText(decodeLine(Buffer.from('bad \xff', 'latin1')).text), 'bad \\udcff');
});

test('GBK: exactly the byte pairs (and texts) Python\'s gbk codec decodes', () => {
  // Python lists every lead/trail pair it decodes, with the text; Node must agree on all 32K.
  const script = `
import sys
out = []
for lead in range(0x81, 0xff):
    for trail in range(0x100):
        try:
            out.append("%02x%02x %04x" % (lead, trail, ord(bytes([lead, trail]).decode("gbk"))))
        except UnicodeDecodeError:
            pass
sys.stdout.write("\\n".join(out))
`;
  const pythonPairs = new Map(execFileSync(PYTHON, ['-c', script], { encoding: 'ascii' })
    .split('\n').map((l) => l.split(' ')));
  let accepted = 0;
  for (let lead = 0x81; lead <= 0xfe; lead++) {
    for (let trail = 0; trail < 0x100; trail++) {
      const hex = lead.toString(16).padStart(2, '0') + trail.toString(16).padStart(2, '0');
      const pair = Buffer.from(hex, 'hex');
      const want = pythonPairs.get(hex);
      assert.equal(isGbk(pair), want !== undefined, hex);
      if (want === undefined) continue;
      accepted += 1;
      const { text, encoding } = decodeLine(Buffer.concat([Buffer.from('x'), pair]));
      if (encoding === 'gbk') assert.equal(text.codePointAt(1).toString(16).padStart(4, '0'), want, hex);
    }
  }
  assert.equal(accepted, pythonPairs.size);
});
