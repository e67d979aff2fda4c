'use strict';
/** Reads the shared vectors/*.json files and undoes their JSON tags (see scripts/make_vectors.py). */

const fs = require('node:fs');
const path = require('node:path');

const VECTORS_DIR = path.resolve(__dirname, '../../vectors');

function loadVectors(name) {
  return JSON.parse(fs.readFileSync(path.join(VECTORS_DIR, name), 'utf8'));
}

/** JSON with tags -> the JavaScript value it stands for. */
function untag(value) {
  if (Array.isArray(value)) return value.map(untag);
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value);
  if (keys.length === 1) {
    const [k] = keys;
    const v = value[k];
    if (k === '$int') return BigInt(v);
    if (k === '$float') return { nan: NaN, inf: Infinity, '-inf': -Infinity }[v];
    if (k === '$bytes') return Buffer.from(v, 'hex');
    if (k === '$runs') return v.map(([text, count]) => text.repeat(count)).join('');
  }
  const out = {};
  for (const [k, v] of Object.entries(value)) out[k] = untag(v);
  return out;
}

module.exports = { VECTORS_DIR, loadVectors, untag };
