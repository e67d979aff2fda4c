'use strict';
/**
 * Protocol v1 codec: the one pure module that turns messages into frames and back.
 *
 * The mirror of protocol/codec.py (same names, same rejection reasons); docs/PROTOCOL.md is
 * the specification and vectors/codec.json the golden vectors both implementations obey,
 * byte for byte. No sockets, no timers: values in, values out.
 *
 * A message on the wire is two ZeroMQ frames: the packed envelope and its HMAC-SHA256. The
 * rules it applies have rooms of their own, as in Python: the ASCII escapes (ascii.js), the
 * kinds and their fields (schema.js), the limits (limits.js), the version (constants.js) and
 * the error (errors.js).
 */

const crypto = require('node:crypto');
const { Unpackr } = require('msgpackr');
const { pack, unpackStrict, Bin, Ext } = require('./msgpack.js');
const { decodeUtf8Escaped } = require('./utf8.js');
const { ProtocolError } = require('./errors.js');
const { NON_ASCII, escape, unescape, unescapeAscii, escapeWithin } = require('./ascii.js');
const { WORKER_KINDS, CLIENT_KINDS, KINDS, FINAL_KINDS, UNCUT_KINDS, isInt, isPlainMap, checkFields } = require('./schema.js');

const { PROTOCOL_MAJOR, PROTOCOL_VERSION, SUPPORTED_MAJORS, MAC_SIZE } = require('./constants.js');
const {
  MAX_MESSAGE_BYTES, MAX_FIELD_CHARS, MAX_TEXT_CHARS, MAX_ARRAY_ITEMS, MAX_MAP_ITEMS, MAX_DEPTH,
  TEXT_FIELDS, SAFE_INT, INT64_MIN, UINT64_MAX,
} = require('./limits.js');

// --- encode ---------------------------------------------------------------------------
function isMapLike(value) {
  if (value instanceof Map) return true;
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function entriesOf(value) {
  return value instanceof Map ? [...value.entries()] : Object.entries(value);
}

/** Escape strings, cut long ones, check integers; keys sorted for stable bytes. */
function prepare(value, path, trunc, depth, key = '') {
  switch (typeof value) {
    case 'string': {
      const [out, cut] = escapeWithin(value, TEXT_FIELDS.has(key) ? MAX_TEXT_CHARS : MAX_FIELD_CHARS);
      if (cut) trunc.push(path);
      return out;
    }
    case 'boolean': return value;
    case 'undefined': return null;
    case 'number': return value; // integral within 2^53 packs as an int (msgpack.js)
    case 'bigint':
      if (value < INT64_MIN || value > UINT64_MAX) throw new ProtocolError('int_range', `${path} = ${value}`);
      return value;
    default: break;
  }
  if (value === null) return null;
  if (value instanceof Uint8Array) return prepare(decodeUtf8Escaped(value), path, trunc, depth, key);
  if (Array.isArray(value) || isMapLike(value)) {
    if (depth >= MAX_DEPTH) throw new ProtocolError('too_deep', path);
  }
  if (isMapLike(value)) {
    let items = entriesOf(value)
      .filter(([, v]) => v !== undefined) // JavaScript's "absent"; JSON drops these too
      .map(([k, v]) => [String(k), escape(String(k)), v])
      .sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    if (items.length > MAX_MAP_ITEMS) {
      trunc.push(path);
      items = items.slice(0, MAX_MAP_ITEMS);
    }
    const out = new Map();
    for (const [k, escaped, v] of items) out.set(escaped, prepare(v, `${path}.${k}`, trunc, depth + 1, k));
    return out;
  }
  if (Array.isArray(value)) {
    let items = value;
    if (items.length > MAX_ARRAY_ITEMS) {
      trunc.push(path);
      items = items.slice(0, MAX_ARRAY_ITEMS);
    }
    return items.map((v, i) => prepare(v, `${path}[${i}]`, trunc, depth + 1, key));
  }
  return prepare(String(value), path, trunc, depth, key);
}

function sign(key, packed) {
  return crypto.createHmac('sha256', key).update(packed).digest();
}

/** Build the two frames [envelope, mac] of one message. Throws ProtocolError. */
function encode(kind, seq, body, key, job, ts = null, sender = null) {
  if (!Object.prototype.hasOwnProperty.call(KINDS, kind)) throw new ProtocolError('unknown_kind', kind);
  const trunc = [];
  const prepared = prepare(body, 'body', trunc, 1);
  if (trunc.length && UNCUT_KINDS.has(kind)) throw new ProtocolError('too_long', `${kind} would be cut at ${trunc.join(', ').slice(0, 200)}`);
  const envelope = new Map([['body', prepared]]);
  // The sender's routing id, signed (bridge: protocol/codec.py encode): keys stay sorted.
  if (sender !== null && sender !== undefined) envelope.set('from', escape(sender));
  envelope.set('job', escape(job));
  envelope.set('kind', kind);
  envelope.set('seq', seq);
  // Paths name the original keys; escaped so the envelope itself obeys the ASCII rule.
  if (trunc.length) envelope.set('trunc', trunc.map(escape));
  envelope.set('ts', ts === null ? Date.now() / 1000 : ts);
  envelope.set('v', PROTOCOL_MAJOR);
  const packed = pack(envelope);
  if (packed.length > MAX_MESSAGE_BYTES) throw new ProtocolError('oversize', `${kind} message is ${packed.length} bytes`);
  return [packed, sign(key, packed)];
}

// --- decode ---------------------------------------------------------------------------
// The fast path unpacks with msgpackr (maps as Map, so key types stay visible). Anything
// unusual sends the frame to unpackStrict, which follows Python's msgpack.unpackb rules,
// so both clients reject the same frames for the same reason.
const fastUnpackr = new Unpackr({ useRecords: false, mapsAsObjects: false, int64AsType: 'auto' });

class Unusual extends Error {}
const UNUSUAL = new Unusual('needs the strict decoder');

function setKey(obj, key, value) {
  if (key === '__proto__') Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}

/** Fast walk over msgpackr's output; throws UNUSUAL where Python's unpacker might disagree. */
function restoreFast(value, depth) {
  switch (typeof value) {
    case 'string':
      if (NON_ASCII.test(value)) throw UNUSUAL; // maybe invalid UTF-8 on the wire
      return value.indexOf('\\') < 0 ? value : unescapeAscii(value);
    case 'number': case 'boolean': case 'bigint': return value;
    default: break;
  }
  if (value === null) return null;
  if (value instanceof Map) {
    if (value.size > MAX_MAP_ITEMS) throw UNUSUAL;
    if (depth >= MAX_DEPTH) throw new ProtocolError('too_deep');
    const out = {};
    for (const [k, v] of value) {
      if (typeof k !== 'string') throw UNUSUAL;
      setKey(out, restoreFast(k, depth), restoreFast(v, depth + 1));
    }
    return out;
  }
  if (Array.isArray(value)) {
    if (value.length > MAX_ARRAY_ITEMS) throw UNUSUAL;
    if (depth >= MAX_DEPTH) throw new ProtocolError('too_deep');
    return value.map((v) => restoreFast(v, depth + 1));
  }
  throw UNUSUAL; // bin, ext, timestamps
}

/** Reject non-ASCII and bin/ext values; unescape every string (keys too). */
function restore(value, depth) {
  switch (typeof value) {
    case 'string': return unescape(value);
    case 'number': case 'boolean': case 'bigint': return value;
    default: break;
  }
  if (value === null) return null;
  if (value instanceof Map) {
    if (depth >= MAX_DEPTH) throw new ProtocolError('too_deep');
    const out = {};
    for (const [k, v] of value) setKey(out, restoreKey(k), restore(v, depth + 1));
    return out;
  }
  if (Array.isArray(value)) {
    if (depth >= MAX_DEPTH) throw new ProtocolError('too_deep');
    return value.map((v) => restore(v, depth + 1));
  }
  throw new ProtocolError('bad_type', value instanceof Bin ? 'bytes' : value instanceof Ext ? 'ext' : typeof value);
}

function restoreKey(key) {
  if (typeof key !== 'string') throw new ProtocolError('bad_type', 'map keys must be strings');
  return unescape(key);
}

function checkVersion(raw) {
  if (!(raw instanceof Map)) throw new ProtocolError('malformed', 'envelope is not a map');
  const version = raw.get('v');
  if (!isInt(version)) throw new ProtocolError('malformed', 'envelope.v must be an int');
  if (!SUPPORTED_MAJORS.includes(Number(version))) {
    throw new ProtocolError('unsupported_version', `v${version}; this side speaks v${PROTOCOL_MAJOR}`);
  }
}

/** Unpack, check the version, restore: in Python's order, so errors get Python's reasons. */
function restoreEnvelope(packed) {
  try {
    const raw = fastUnpackr.unpack(packed);
    checkVersion(raw);
    return restoreFast(raw, 0);
  } catch {
    // Any doubt, error or not: redo it the slow, exact way (rare: only bad frames get here).
  }
  const raw = unpackStrict(packed);
  checkVersion(raw);
  return restore(raw, 0);
}

/**
 * Check and unpack one message. `expect` is "worker" (client side), "client" (worker side)
 * or "any". Throws ProtocolError with a stable reason; never anything else.
 */
function decode(frames, key, expect = 'any') {
  if (!Array.isArray(frames) || frames.length !== 2) {
    throw new ProtocolError('bad_frames', `${frames && frames.length} frames, want 2`);
  }
  const packed = Buffer.isBuffer(frames[0]) ? frames[0] : Buffer.from(frames[0]);
  const mac = Buffer.isBuffer(frames[1]) ? frames[1] : Buffer.from(frames[1]);
  if (packed.length > MAX_MESSAGE_BYTES) throw new ProtocolError('oversize', `${packed.length} bytes`);
  if (mac.length !== MAC_SIZE || !crypto.timingSafeEqual(sign(key, packed), mac)) {
    throw new ProtocolError('bad_signature');
  }
  const envelope = restoreEnvelope(packed);
  const { kind, seq, ts, job, body } = envelope;
  if (typeof kind !== 'string' || !isInt(seq) || seq < 1 || typeof job !== 'string'
      || !isPlainMap(body) || !(typeof ts === 'number' || typeof ts === 'bigint')) {
    throw new ProtocolError('malformed', 'envelope needs kind, seq >= 1, ts, job, body');
  }
  const allowed = expect === 'worker' ? WORKER_KINDS : expect === 'client' ? CLIENT_KINDS : KINDS;
  if (!Object.prototype.hasOwnProperty.call(allowed, kind)) throw new ProtocolError('unknown_kind', kind);
  checkFields(kind, body);
  const trunc = envelope.trunc === undefined || envelope.trunc === null ? [] : envelope.trunc;
  if (!Array.isArray(trunc)) throw new ProtocolError('malformed', 'envelope.trunc must be a list');
  const sender = envelope.from === undefined ? null : envelope.from;
  if (sender !== null && typeof sender !== 'string') throw new ProtocolError('malformed', 'envelope.from must be a string');
  return { kind, seq, ts: Number(ts), job, body, truncated: trunc.map(String), sender };
}

// --- sequence numbers -----------------------------------------------------------------
/**
 * Judge a sender's next seq against the last one accepted (0 before any).
 * "ok": the next one; "gap": newer, with seq - last - 1 messages lost; "replay": not
 * newer (a duplicate or reordered message) and must not be processed. Returns [verdict, last].
 */
function checkSeq(last, seq) {
  if (seq <= last) return ['replay', last];
  return [seq === last + 1 ? 'ok' : 'gap', seq];
}

// The constants and limits are exported here too (protocol/codec.py's __all__ does the
// same), so a caller needs one require.
module.exports = {
  PROTOCOL_MAJOR, PROTOCOL_VERSION, SUPPORTED_MAJORS, MAC_SIZE, MAX_MESSAGE_BYTES,
  MAX_FIELD_CHARS, MAX_TEXT_CHARS, MAX_ARRAY_ITEMS, MAX_MAP_ITEMS, MAX_DEPTH, TEXT_FIELDS,
  SAFE_INT, INT64_MIN, UINT64_MAX, WORKER_KINDS, CLIENT_KINDS, KINDS, FINAL_KINDS, UNCUT_KINDS,
  ProtocolError, escape, unescape, escapeWithin, encode, decode, sign, checkSeq,
};
