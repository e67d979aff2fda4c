'use strict';
/**
 * Strict JSON on every face, with NaN and the infinities kept (docs/PROTOCOL.md section 12);
 * the twin of bridge/jsonform.py.
 *
 * JSON has no NaN or infinity: JSON.stringify writes `null` (a loss that diverged would look
 * like a loss never measured) and Python's json writes a bare `NaN` token that JSON.parse
 * throws on. Every JSON trainbridge writes spells a number that is not finite as one of the
 * strings "NaN", "Infinity", "-Infinity" (the protobuf JSON mapping's form): stringify().
 * Where a number is expected (a metric's value, a health entry's value and last finite value),
 * readers turn those strings back into numbers: revive(), parse(). A string anywhere else
 * stays the string it is (a log line that reads "NaN" is text).
 */

/** @type {Record<string, number>} */
const NUMBERS = { NaN, Infinity, '-Infinity': -Infinity };
const HEALTH_NUMBERS = ['value', 'last_finite'];

/**
 * The strict form of a number that is not finite.
 * @param {number} value
 */
function textOf(value) {
  if (Number.isNaN(value)) return 'NaN';
  return value > 0 ? 'Infinity' : '-Infinity';
}

/**
 * @param {string} key
 * @param {unknown} value
 */
function replacer(key, value) {
  return typeof value === 'number' && !Number.isFinite(value) ? textOf(value) : value;
}

/**
 * JSON.stringify, with a number that is not finite written as its string.
 * @param {unknown} value
 * @param {string | number} [space]
 * @returns {string}
 */
function stringify(value, space) {
  return JSON.stringify(value, replacer, space);
}

/**
 * A number's strict form read back: 'NaN' -> NaN; anything else as it is.
 * @template T
 * @param {T} value
 * @returns {T | number}
 */
function number(value) {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(NUMBERS, value) ? NUMBERS[value] : value;
}

/** @param {any} entry a health entry as parsed (arbitrary JSON), changed in place */
function reviveHealth(entry) {
  if (entry === null || typeof entry !== 'object') return;
  for (const key of HEALTH_NUMBERS) if (key in entry) entry[key] = number(entry[key]);
}

/**
 * A parsed event, status or report with its numbers read back, in place: the values of every
 * `metrics` map, and a health entry's numbers (the 'health' event's own, and those of a
 * report's `health` list). Returns the value.
 * @param {any} value parsed JSON, changed in place
 * @returns {any}
 */
function revive(value) {
  if (Array.isArray(value)) {
    for (const item of value) revive(item);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key === 'metrics' && item !== null && typeof item === 'object' && !Array.isArray(item)) {
        for (const name of Object.keys(item)) item[name] = number(item[name]);
      } else if (key === 'health' && Array.isArray(item)) {
        for (const entry of item) reviveHealth(entry);
      } else {
        revive(item);
      }
    }
    if (value.event === 'health') reviveHealth(value);
  }
  return value;
}

/**
 * JSON.parse with the numbers revive() reads back; a line with no such string is only parsed.
 * @param {string} text
 * @returns {any}
 */
function parse(text) {
  const value = JSON.parse(text);
  return text.includes('"NaN"') || text.includes('Infinity"') ? revive(value) : value;
}

/**
 * A report (or any value) as ASCII-only, indented strict JSON: what a file or another process gets.
 * @param {unknown} value
 * @returns {string}
 */
function toJSON(value, indent = 2) {
  return stringify(value, indent).replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

module.exports = { NUMBERS, number, parse, revive, stringify, textOf, toJSON };
