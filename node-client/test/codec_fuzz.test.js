'use strict';
// Mutated frames through both codecs: protocol/codec.py and src/codec.js must accept the same
// frames with the same value, and reject the others with the same reason. The mutations
// are re-signed, so they reach the unpacker and the rules behind it (the fast path and the
// strict one here, msgpack.unpackb there).

const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const codec = require('../src/codec.js');
const { PYTHON } = require('../test-support/python.js');

const KEY = Buffer.alloc(32, 9);
const SEEDS = [
  codec.encode('hello', 1, { pid: 1, argv: ['a', '\u4e2d'], cwd: '/', python: { version: '3' }, host: 'h', env: {}, packages: { torch: null }, proto: '1.0', worker: '0', heartbeat_s: 1 }, KEY, 'job-1', 1.5),
  codec.encode('progress', 2, { step: 2n ** 60n, total: 100, metrics: { loss: 0.5, lr: 3, nan: NaN } }, KEY, 'job-1', 2),
  codec.encode('log', 3, { level: 'info', message: 'caf\u00e9 \\ \u{1f600} \udcff' }, KEY, 'job-1', 3),
  codec.encode('error', 4, { type: 'E', message: 'm', traceback: 't', frames: [{ file: 'f', line: 1, function: 'g' }], chain: [], stage: null, fatal: true, thread: 'MainThread', kind: 'exception' }, KEY, 'job-1', 4),
  codec.encode('bye', 5, { exit_code: 0, reason: 'normal' }, KEY, 'job-1', 5),
].map((f) => f[0]);

function mutations(count) {
  let seed = 7;
  const rand = (n) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) % n;
  };
  const interesting = [0x00, 0x7f, 0x80, 0x90, 0xa0, 0xc0, 0xc1, 0xc4, 0xca, 0xcb, 0xcf, 0xd3, 0xd4, 0xd9, 0xdc, 0xde, 0xe0, 0xff, 0x5c, 0xe4];
  const out = [];
  for (let i = 0; i < count; i++) {
    const packed = Buffer.from(SEEDS[rand(SEEDS.length)]);
    const edits = 1 + rand(3);
    let bytes = packed;
    for (let e = 0; e < edits; e++) {
      const pos = rand(bytes.length);
      const op = rand(4);
      if (op === 0) bytes[pos] = interesting[rand(interesting.length)];
      else if (op === 1) bytes[pos] ^= 1 << rand(8);
      else if (op === 2) bytes = Buffer.concat([bytes.subarray(0, pos), bytes.subarray(pos + 1)]);
      else bytes = Buffer.concat([bytes.subarray(0, pos), Buffer.from([interesting[rand(interesting.length)]]), bytes.subarray(pos)]);
    }
    out.push(bytes);
  }
  return out;
}

/** A decoded message as comparable JSON: big integers and non-finite floats as strings. */
const floatBits = (x) => { const b = Buffer.alloc(8); b.writeDoubleBE(x); return `float:${b.toString('hex')}`; };

function plain(value) {
  if (typeof value === 'bigint') return `int:${value}`;
  if (typeof value === 'number' && (!Number.isFinite(value) || (Math.abs(value) > 2 ** 53 && Number.isInteger(value)))) {
    return floatBits(value);
  }
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  return value;
}

test('5,000 mutated frames: the same verdict from the Python and the Node codec', () => {
  const frames = mutations(5000);
  const script = `
import json, math, struct, sys
sys.path.insert(0, ${JSON.stringify(path.resolve(__dirname, '../..'))})
from trainbridge.protocol import codec
key = bytes([9] * 32)
def plain(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v if abs(v) <= 2 ** 53 else f"int:{v}"
    if isinstance(v, float):
        if not math.isfinite(v) or (v.is_integer() and abs(v) > 2 ** 53):
            return "float:" + struct.pack(">d", v).hex()
        return v
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return [plain(x) for x in v]
out = []
for line in sys.stdin:
    packed = bytes.fromhex(line.strip())
    try:
        m = codec.decode([packed, codec.sign(key, packed)], key)
        out.append({"kind": m.kind, "seq": plain(m.seq), "job": m.job, "body": plain(m.body), "truncated": list(m.truncated)})
    except codec.ProtocolError as exc:
        out.append({"error": exc.reason})
print(json.dumps(out))
`;
  const want = JSON.parse(execFileSync(PYTHON, ['-c', script], {
    input: frames.map((f) => f.toString('hex')).join('\n'), encoding: 'utf8', maxBuffer: 1 << 26,
  }));
  const reasons = new Set();
  frames.forEach((packed, i) => {
    let got;
    try {
      const m = codec.decode([packed, codec.sign(KEY, packed)], KEY);
      got = { kind: m.kind, seq: plain(m.seq), job: m.job, body: plain(m.body), truncated: m.truncated };
    } catch (err) {
      if (!(err instanceof codec.ProtocolError)) throw err;
      got = { error: err.reason };
    }
    reasons.add(got.error || 'ok');
    assert.deepEqual(got, want[i], `frame ${i}: ${packed.toString('hex')}`);
  });
  // the mutations reach more than one rule
  assert.ok(reasons.size >= 5, [...reasons].join(', '));
});
