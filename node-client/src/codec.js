'use strict';
/**
 * Protocol v1 codec: the one pure module that turns messages into frames and back.
 *
 * The mirror of protocol/codec.py (same names, same rejection reasons); docs/PROTOCOL.md is
 * the specification and vectors/codec.json the golden vectors both implementations obey,
 * byte for byte. No sockets, no timers: values in, values out.
 *
 * A message on the wire is two ZeroMQ frames: the packed envelope and its HMAC-SHA256.
 */

const crypto = require('node:crypto');
const { Unpackr } = require('msgpackr');
const { pack, unpackStrict, Bin, Ext } = require('./msgpack.js');
const { decodeUtf8Escaped } = require('./utf8.js');
const { ProtocolError } = require('./errors.js');

const { PROTOCOL_MAJOR, PROTOCOL_VERSION, SUPPORTED_MAJORS, MAC_SIZE } = require('./constants.js');
const {
  MAX_MESSAGE_BYTES, MAX_FIELD_CHARS, MAX_TEXT_CHARS, MAX_ARRAY_ITEMS, MAX_MAP_ITEMS, MAX_DEPTH,
  TEXT_FIELDS, SAFE_INT, INT64_MIN, UINT64_MAX,
} = require('./limits.js');

// --- the ASCII rule -------------------------------------------------------------------
// Encoders escape: "\" -> "\\"; U+0080..U+00FF -> \xhh; up to U+FFFF (lone surrogates
// too) -> \uhhhh; beyond -> \Uhhhhhhhh; hex lowercase. Undecodable bytes travel as the
// PEP 383 surrogates U+DC80..U+DCFF, so they get a reversible \udcXX escape.
const NEEDS_ESCAPE = /[\\\u0080-\uffff]/;
// eslint-disable-next-line no-control-regex -- NUL..DEL is exactly the ASCII range tested here
const NON_ASCII = /[^\x00-\x7f]/;
const ESCAPE_AT = /\\(?:\\|x[89a-f][0-9a-f]|u(?!00)[0-9a-f]{4}|U0010[0-9a-f]{4}|U000[1-9a-f][0-9a-f]{4})/y;

function escapeCodePoint(cp) {
  if (cp === 0x5c) return '\\\\';
  if (cp < 0x80) return String.fromCharCode(cp);
  if (cp <= 0xff) return '\\x' + cp.toString(16).padStart(2, '0');
  if (cp <= 0xffff) return '\\u' + cp.toString(16).padStart(4, '0');
  return '\\U' + cp.toString(16).padStart(8, '0');
}

/** Make `text` ASCII, reversibly, by code point. ASCII text without a backslash comes back as is. */
function escape(text) {
  if (!NEEDS_ESCAPE.test(text)) return text;
  const parts = [];
  let plainStart = 0;
  let i = 0;
  while (i < text.length) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80 && unit !== 0x5c) { i += 1; continue; }
    if (plainStart < i) parts.push(text.slice(plainStart, i));
    const cp = text.codePointAt(i); // a lone surrogate comes back as itself
    parts.push(escapeCodePoint(cp));
    i += cp > 0xffff ? 2 : 1;
    plainStart = i;
  }
  if (plainStart < text.length) parts.push(text.slice(plainStart));
  return parts.join('');
}

function checkEscapes(text) {
  let pos = 0;
  for (;;) {
    const i = text.indexOf('\\', pos);
    if (i < 0) return;
    ESCAPE_AT.lastIndex = i;
    const m = ESCAPE_AT.exec(text);
    if (m === null) throw new ProtocolError('bad_escape', JSON.stringify(text.slice(i, i + 12)));
    pos = ESCAPE_AT.lastIndex;
  }
}

/** Inverse of escape(). Throws ProtocolError for non-ASCII or a malformed escape. */
function unescape(text) {
  if (NON_ASCII.test(text)) throw new ProtocolError('non_ascii', JSON.stringify(text.slice(0, 40)));
  if (text.indexOf('\\') < 0) return text;
  return unescapeAscii(text);
}

/** unescape() of a string already known to be ASCII and to hold a backslash. */
function unescapeAscii(text) {
  checkEscapes(text);
  return text.replace(/\\(?:\\|x(..)|u(....)|U(........))/g, (all, x, u, U) => {
    if (all === '\\\\') return '\\';
    return String.fromCodePoint(parseInt(x || u || U, 16));
  });
}

/**
 * escape(text), or if longer than `limit`, that of the longest prefix of `text` (in code
 * points) whose escape fits. Returns [escaped, cut].
 */
function escapeWithin(text, limit) {
  const out = escape(text);
  if (out.length <= limit) return [out, false];
  // Escaped lengths only grow with the prefix, so walk code points until the next one
  // would not fit: the same prefix Python's binary search finds.
  let used = 0;
  let end = 0;
  while (end < text.length) {
    const cp = text.codePointAt(end);
    const width = cp === 0x5c ? 2 : cp < 0x80 ? 1 : cp <= 0xff ? 4 : cp <= 0xffff ? 6 : 10;
    if (used + width > limit) break;
    used += width;
    end += cp > 0xffff ? 2 : 1;
  }
  return [escape(text.slice(0, end)), true];
}

// --- schema ---------------------------------------------------------------------------
// Field types: int, num (int or float: JavaScript's 3.0 arrives as 3), str, bool, list,
// map; a trailing "?" allows nil. Unknown extra fields are kept (minor versions add them).
const WORKER_KINDS = {
  hello: { pid: 'int', argv: 'list', cwd: 'str', python: 'map', host: 'str', rank: 'int?',
    local_rank: 'int?', world_size: 'int?', env: 'map', packages: 'map', proto: 'str',
    worker: 'str', heartbeat_s: 'num' },
  stage: { event: 'str', name: 'str', depth: 'int', budget_s: 'num?', duration_s: 'num?',
    status: 'str?' },
  progress: { step: 'num', total: 'num?', metrics: 'map' },
  heartbeat: { beat: 'int', stage: 'str?', stages: 'list', idle_s: 'num',
    progress_age_s: 'num?', stack: 'str?', dropped: 'map' },
  log: { level: 'str', message: 'str' },
  // Consecutive log records in one message (PROTOCOL.md "logs"): each is a `log` body.
  logs: { records: 'list' },
  error: { type: 'str', message: 'str', traceback: 'str', frames: 'list', chain: 'list',
    stage: 'str?', fatal: 'bool', thread: 'str', kind: 'str' },
  bye: { exit_code: 'int?', reason: 'str' },
  reply: { to: 'int', ok: 'bool' },
  // An application message (PROTOCOL.md "user"): body {data: any value}, both ways.
  user: {},
};
const CLIENT_KINDS = {
  ping: {},
  dump_stacks: {},
  cancel: { reason: 'str?' },
  ack: { to: 'int' },
  refuse: { reason: 'str', supported: 'list' },
  user: {},
};
const KINDS = { ...WORKER_KINDS, ...CLIENT_KINDS };
// Messages the sender keeps until the client acks them (never dropped, never coalesced).
const FINAL_KINDS = new Set(['error', 'bye']);
// Application data is sent whole or not at all: a value over a limit is an error, not a cut.
const UNCUT_KINDS = new Set(['user']);

const isInt = (v) => (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint';
const isPlainMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const TYPE_CHECKS = {
  int: isInt,
  num: (v) => typeof v === 'number' || typeof v === 'bigint',
  str: (v) => typeof v === 'string',
  bool: (v) => typeof v === 'boolean',
  list: (v) => Array.isArray(v),
  map: isPlainMap,
};

// kind -> [[field, type, check, nullable], ...]: compiled once, checked per message.
const SCHEMA = Object.fromEntries(Object.entries(KINDS).map(([kind, fields]) => [kind,
  Object.entries(fields).map(([field, spec]) => {
    const type = spec.replace('?', '');
    return [field, type, TYPE_CHECKS[type], spec.endsWith('?')];
  })]));

function checkFields(kind, body) {
  for (const [field, type, check, nullable] of SCHEMA[kind]) {
    const value = Object.prototype.hasOwnProperty.call(body, field) ? body[field] : null;
    if (value === null || value === undefined) {
      if (nullable) continue;
      throw new ProtocolError('bad_field', `${kind}.${field} is missing`);
    }
    if (!check(value)) throw new ProtocolError('bad_field', `${kind}.${field} must be ${type}`);
  }
  if (kind === 'logs') { // clients expand the records into log events: each must be one
    body.records.forEach((record, i) => {
      if (!isPlainMap(record)) throw new ProtocolError('bad_field', `logs.records[${i}] must be map`);
      checkFields('log', record);
    });
  }
}

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
