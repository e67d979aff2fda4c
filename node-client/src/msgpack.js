'use strict';
/**
 * The two msgpack jobs msgpackr cannot do exactly as Python's msgpack does:
 *
 * pack(value): the smallest encodings, an integral Number up to 2^53 as an integer (also
 *   between 2^32 and 2^53, where msgpackr writes a float64), every other Number as float64,
 *   BigInt as an integer. Same bytes as msgpack.packb(..., use_bin_type=True) for the same
 *   value, which the golden vectors check.
 * unpackStrict(bytes): msgpack.unpackb(raw=False, strict_map_key=True, limits) semantics:
 *   invalid UTF-8, non-str/bytes keys, over-long arrays/maps, truncated or trailing bytes
 *   are "malformed". Only the codec's slow path uses it (frames msgpackr found unusual),
 *   so both clients reject the same frames for the same reason.
 */

const { isUtf8 } = require('node:buffer');
const { ProtocolError } = require('./errors.js');

const SAFE_INT = 2 ** 53;
const MAX_ARRAY_ITEMS = 4096;
const MAX_MAP_ITEMS = 1024;
const MAX_NESTING = 1024; // the C unpacker's stack

class Bin { constructor(bytes) { this.bytes = bytes; } }
class Ext { constructor(type, data) { this.type = type; this.data = data; } }

const malformed = (detail) => new ProtocolError('malformed', detail);

// --- pack -----------------------------------------------------------------------------
class Writer {
  constructor() { this.buf = Buffer.allocUnsafe(256); this.pos = 0; }
  ensure(n) {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  u8(v) { this.ensure(1); this.buf[this.pos++] = v; }
  head(tag, bytes, v) {
    this.ensure(1 + bytes);
    this.buf[this.pos++] = tag;
    if (bytes === 1) this.buf.writeUInt8(v, this.pos);
    else if (bytes === 2) this.buf.writeUInt16BE(v, this.pos);
    else if (bytes === 4) this.buf.writeUInt32BE(v, this.pos);
    this.pos += bytes;
  }
  done() { return Buffer.from(this.buf.subarray(0, this.pos)); }
}

function packInt(w, v) {
  // v: a Number integer within 2^53, or a BigInt in int64/uint64 range.
  if (typeof v === 'number') {
    if (v >= 0) {
      if (v < 0x80) return w.u8(v);
      if (v <= 0xff) return w.head(0xcc, 1, v);
      if (v <= 0xffff) return w.head(0xcd, 2, v);
      if (v <= 0xffffffff) return w.head(0xce, 4, v);
      return packInt(w, BigInt(v));
    }
    if (v >= -32) return w.u8(v & 0xff);
    if (v >= -0x80) { w.u8(0xd0); w.ensure(1); w.buf.writeInt8(v, w.pos); w.pos += 1; return undefined; }
    if (v >= -0x8000) { w.u8(0xd1); w.ensure(2); w.buf.writeInt16BE(v, w.pos); w.pos += 2; return undefined; }
    if (v >= -0x80000000) { w.u8(0xd2); w.ensure(4); w.buf.writeInt32BE(v, w.pos); w.pos += 4; return undefined; }
    return packInt(w, BigInt(v));
  }
  if (v >= -(2n ** 31n) && v <= 0xffffffffn) return packInt(w, Number(v));
  w.ensure(9);
  if (v >= 0n) { w.buf[w.pos] = 0xcf; w.buf.writeBigUInt64BE(v, w.pos + 1); }
  else { w.buf[w.pos] = 0xd3; w.buf.writeBigInt64BE(v, w.pos + 1); }
  w.pos += 9;
  return undefined;
}

function packStr(w, s) {
  const n = Buffer.byteLength(s, 'utf8');
  if (n < 32) w.u8(0xa0 | n);
  else if (n <= 0xff) w.head(0xd9, 1, n);
  else if (n <= 0xffff) w.head(0xda, 2, n);
  else w.head(0xdb, 4, n);
  w.ensure(n);
  w.pos += w.buf.write(s, w.pos, n, 'utf8');
}

function packValue(w, v) {
  if (v === null || v === undefined) return w.u8(0xc0);
  switch (typeof v) {
    case 'boolean': return w.u8(v ? 0xc3 : 0xc2);
    case 'string': return packStr(w, v);
    case 'bigint': return packInt(w, v);
    case 'number':
      // Integral floats travel as integers, as every JavaScript encoder sends them.
      if (Number.isInteger(v) && Math.abs(v) <= SAFE_INT) return packInt(w, v === 0 ? 0 : v);
      w.ensure(9);
      w.buf[w.pos] = 0xcb;
      w.buf.writeDoubleBE(v, w.pos + 1);
      w.pos += 9;
      return undefined;
    default: break;
  }
  if (Array.isArray(v)) {
    if (v.length < 16) w.u8(0x90 | v.length);
    else if (v.length <= 0xffff) w.head(0xdc, 2, v.length);
    else w.head(0xdd, 4, v.length);
    for (const item of v) packValue(w, item);
    return undefined;
  }
  const entries = v instanceof Map ? [...v.entries()] : Object.entries(v);
  const n = entries.length;
  if (n < 16) w.u8(0x80 | n);
  else if (n <= 0xffff) w.head(0xde, 2, n);
  else w.head(0xdf, 4, n);
  for (const [k, item] of entries) { packStr(w, String(k)); packValue(w, item); }
  return undefined;
}

/** msgpack bytes of `value` (maps in their given order; the codec sorts them first). */
function pack(value) {
  const w = new Writer();
  packValue(w, value);
  return w.done();
}

// --- unpackStrict ---------------------------------------------------------------------
function unpackStrict(bytes) {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes);
  let pos = 0;
  const need = (n) => {
    if (pos + n > buf.length) throw malformed('truncated');
  };
  const str = (n) => {
    need(n);
    const slice = buf.subarray(pos, pos + n);
    pos += n;
    if (!isUtf8(slice)) throw malformed('invalid UTF-8 in a str');
    return slice.toString('utf8');
  };
  const bin = (n) => { need(n); const b = Buffer.from(buf.subarray(pos, pos + n)); pos += n; return new Bin(b); };
  const ext = (n) => {
    need(1 + n);
    const type = buf.readInt8(pos);
    const data = Buffer.from(buf.subarray(pos + 1, pos + 1 + n));
    pos += 1 + n;
    if (type === -1 && ![4, 8, 12].includes(n)) throw malformed('bad timestamp');
    return new Ext(type, data);
  };
  const int64 = (big) => (big >= -BigInt(SAFE_INT) && big <= BigInt(SAFE_INT) ? Number(big) : big);
  const array = (n, depth) => {
    if (n > MAX_ARRAY_ITEMS) throw malformed(`${n} array items`);
    const out = new Array(n);
    for (let i = 0; i < n; i++) out[i] = value(depth + 1);
    return out;
  };
  const map = (n, depth) => {
    if (n > MAX_MAP_ITEMS) throw malformed(`${n} map entries`);
    const out = new Map();
    for (let i = 0; i < n; i++) {
      const k = value(depth + 1);
      if (typeof k !== 'string' && !(k instanceof Bin)) throw malformed('map key is not str or bytes');
      out.set(k, value(depth + 1));
    }
    return out;
  };
  const value = (depth) => {
    if (depth > MAX_NESTING) throw malformed('nested too deep for the unpacker');
    need(1);
    const b = buf[pos++];
    if (b < 0x80) return b;
    if (b >= 0xe0) return b - 0x100;
    if ((b & 0xf0) === 0x80) return map(b & 0x0f, depth);
    if ((b & 0xf0) === 0x90) return array(b & 0x0f, depth);
    if ((b & 0xe0) === 0xa0) return str(b & 0x1f);
    let v;
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xc4: need(1); v = buf[pos]; pos += 1; return bin(v);
      case 0xc5: need(2); v = buf.readUInt16BE(pos); pos += 2; return bin(v);
      case 0xc6: need(4); v = buf.readUInt32BE(pos); pos += 4; return bin(v);
      case 0xc7: need(1); v = buf[pos]; pos += 1; return ext(v);
      case 0xc8: need(2); v = buf.readUInt16BE(pos); pos += 2; return ext(v);
      case 0xc9: need(4); v = buf.readUInt32BE(pos); pos += 4; return ext(v);
      case 0xca: need(4); v = buf.readFloatBE(pos); pos += 4; return v;
      case 0xcb: need(8); v = buf.readDoubleBE(pos); pos += 8; return v;
      case 0xcc: need(1); v = buf[pos]; pos += 1; return v;
      case 0xcd: need(2); v = buf.readUInt16BE(pos); pos += 2; return v;
      case 0xce: need(4); v = buf.readUInt32BE(pos); pos += 4; return v;
      case 0xcf: need(8); v = buf.readBigUInt64BE(pos); pos += 8; return int64(v);
      case 0xd0: need(1); v = buf.readInt8(pos); pos += 1; return v;
      case 0xd1: need(2); v = buf.readInt16BE(pos); pos += 2; return v;
      case 0xd2: need(4); v = buf.readInt32BE(pos); pos += 4; return v;
      case 0xd3: need(8); v = buf.readBigInt64BE(pos); pos += 8; return int64(v);
      case 0xd4: return ext(1);
      case 0xd5: return ext(2);
      case 0xd6: return ext(4);
      case 0xd7: return ext(8);
      case 0xd8: return ext(16);
      case 0xd9: need(1); v = buf[pos]; pos += 1; return str(v);
      case 0xda: need(2); v = buf.readUInt16BE(pos); pos += 2; return str(v);
      case 0xdb: need(4); v = buf.readUInt32BE(pos); pos += 4; return str(v);
      case 0xdc: need(2); v = buf.readUInt16BE(pos); pos += 2; return array(v, depth);
      case 0xdd: need(4); v = buf.readUInt32BE(pos); pos += 4; return array(v, depth);
      case 0xde: need(2); v = buf.readUInt16BE(pos); pos += 2; return map(v, depth);
      case 0xdf: need(4); v = buf.readUInt32BE(pos); pos += 4; return map(v, depth);
      default: throw malformed(`reserved byte 0x${b.toString(16)}`);
    }
  };
  const out = value(0);
  if (pos !== buf.length) throw malformed('trailing bytes after the message');
  return out;
}

module.exports = { pack, unpackStrict, Bin, Ext };
