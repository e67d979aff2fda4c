'use strict';
/**
 * Protocol v1 limits (docs/PROTOCOL.md section 4, "Limits"): what one message may hold.
 * Plain values; protocol/limits.py holds the same names.
 *
 * A decoder rejects a frame over MAX_MESSAGE_BYTES or nested deeper than MAX_DEPTH; an encoder
 * cuts a text longer than its limit and names the field in `truncated`. TEXT_FIELDS carry
 * stacks and tracebacks and get the larger MAX_TEXT_CHARS.
 */

const MAX_MESSAGE_BYTES = 1 << 20;
const MAX_FIELD_CHARS = 16 * 1024;
const MAX_TEXT_CHARS = 256 * 1024;
const MAX_ARRAY_ITEMS = 4096;
const MAX_MAP_ITEMS = 1024;
const MAX_DEPTH = 16;
const TEXT_FIELDS = new Set(['traceback', 'stack', 'stacks', 'text']);
const SAFE_INT = 2 ** 53; // the largest integer a JavaScript number holds exactly, plus one
const INT64_MIN = -(2n ** 63n); // msgpack's integer range
const UINT64_MAX = 2n ** 64n - 1n;

module.exports = {
  MAX_MESSAGE_BYTES, MAX_FIELD_CHARS, MAX_TEXT_CHARS, MAX_ARRAY_ITEMS, MAX_MAP_ITEMS, MAX_DEPTH,
  TEXT_FIELDS, SAFE_INT, INT64_MIN, UINT64_MAX,
};
