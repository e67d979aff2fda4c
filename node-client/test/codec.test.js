'use strict';
// The Node codec against the shared golden vectors (vectors/codec.json): the same bytes
// for every encode case, the same value or the same rejection reason for every decode case.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const codec = require('../src/codec.js');
const { unpackStrict } = require('../src/msgpack.js');
const { loadVectors, untag } = require('../test-support/vectors.js');

const vectors = loadVectors('codec.json');
const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

function framesOf(c) {
  if (c.frames_hex) return c.frames_hex.map((h) => Buffer.from(h, 'hex'));
  return c.frames_runs.map(([byteHex, count]) => Buffer.alloc(count, Buffer.from(byteHex, 'hex')));
}

function expectedMessage(d) {
  return { kind: d.kind, seq: d.seq, ts: d.ts, job: d.job, body: untag(d.body), truncated: d.truncated, sender: d.sender };
}

test('encode vectors: byte-identical frames and the documented decoded value', async (t) => {
  const key = Buffer.from(vectors.key_hex, 'hex');
  for (const c of vectors.encode) {
    await t.test(c.name, () => {
      const frames = codec.encode(c.kind, c.seq, untag(c.body), key, c.job, c.ts, c.sender);
      if (c.frames_hex) assert.deepEqual(frames.map((f) => f.toString('hex')), c.frames_hex);
      else assert.deepEqual(frames.map(sha256), c.frames_sha256);
      assert.deepEqual(codec.decode(frames, key), expectedMessage(c.decoded));
    });
  }
});

test('decode vectors: same value or same rejection reason', async (t) => {
  for (const c of vectors.decode) {
    await t.test(c.name, () => {
      const key = Buffer.from(c.key_hex, 'hex');
      const run = () => codec.decode(framesOf(c), key, c.expect);
      if (c.error) {
        assert.throws(run, (err) => err instanceof codec.ProtocolError && err.reason === c.error,
          `expected ${c.error}`);
      } else {
        assert.deepEqual(run(), expectedMessage(c.decoded));
      }
    });
  }
});

test('escape vectors and their round trip', () => {
  for (const c of vectors.escape) {
    assert.equal(codec.escape(c.text), c.escaped, c.name);
    assert.equal(codec.unescape(c.escaped), c.text, c.name);
  }
});

test('unescape rejections', () => {
  for (const c of vectors.unescape_errors) {
    assert.throws(() => codec.unescape(c.escaped), (err) => err.reason === c.error, c.name);
  }
});

test('sequence verdicts', () => {
  for (const c of vectors.seq) {
    assert.deepEqual(codec.checkSeq(c.last, c.seq), [c.verdict, c.new_last]);
  }
});

test('truncation keeps the longest code-point prefix and never splits an escape', () => {
  const text = 'a'.repeat(10) + '\u4e2d' + '\u{1f600}' + 'b';
  for (let limit = 0; limit < 30; limit++) {
    const [out, cut] = codec.escapeWithin(text, limit);
    assert.ok(out.length <= limit || !cut);
    assert.equal(cut, codec.escape(text).length > limit);
    const back = codec.unescape(out);
    assert.ok(text.startsWith(back));
    // one more code point would not fit
    if (cut) {
      const next = [...text].slice(0, [...back].length + 1).join('');
      assert.ok(codec.escape(next).length > limit, `limit ${limit}`);
    }
  }
});

test('every string on the wire is ASCII, including non-ASCII keys and truncation paths', () => {
  const key = Buffer.alloc(32, 7);
  const body = { level: 'info', message: '\u9519'.repeat(codec.MAX_FIELD_CHARS), logger: 'x', extra: { '\u540d': 'v' } };
  const frames = codec.encode('log', 1, body, key, 'job');
  const strings = [];
  const walk = (v) => {
    if (typeof v === 'string') strings.push(v);
    else if (v instanceof Map) for (const [k, x] of v) { strings.push(k); walk(x); }
    else if (Array.isArray(v)) v.forEach(walk);
  };
  walk(unpackStrict(frames[0]));
  assert.ok(strings.length > 8);
  // eslint-disable-next-line no-control-regex -- every string must be ASCII, NUL..DEL
  for (const s of strings) assert.match(s, /^[\x00-\x7f]*$/);
  const msg = codec.decode(frames, key);
  assert.deepEqual(msg.truncated, ['body.message']);
  assert.equal(msg.body.message, '\u9519'.repeat(Math.floor(codec.MAX_FIELD_CHARS / 6)));
  assert.equal(msg.body.extra['\u540d'], 'v');
});

test('integers beyond 2^53 come back as BigInt, others as Number', () => {
  const key = Buffer.alloc(32, 1);
  const frames = codec.encode('progress', 1, { step: 2n ** 53n + 1n, total: 2 ** 53, metrics: { x: 2 ** 40 } }, key, 'j');
  const { body } = codec.decode(frames, key);
  assert.equal(body.step, 2n ** 53n + 1n);
  assert.equal(body.total, 2 ** 53);
  assert.equal(body.metrics.x, 2 ** 40);
  assert.throws(() => codec.encode('progress', 1, { step: 2n ** 64n, metrics: {} }, key, 'j'),
    (err) => err.reason === 'int_range');
});
