'use strict';
/**
 * The message kinds of protocol v1 and their fields (docs/PROTOCOL.md section 5), and the
 * check that a body has them. Pure; the Python twin is protocol/schema.py.
 */

const { ProtocolError } = require('./errors.js');

// Field types: int, num (int or float: JavaScript's 3.0 arrives as 3), str, bool, list,
// map; a trailing "?" allows nil. Unknown extra fields are kept (minor versions add them).
const WORKER_KINDS = {
  hello: { pid: 'int', argv: 'list', cwd: 'str', python: 'map', host: 'str', rank: 'int?',
    local_rank: 'int?', world_size: 'int?', env: 'map', packages: 'map', proto: 'str',
    worker: 'str', heartbeat_s: 'num' },
  stage: { event: 'str', name: 'str', depth: 'int', budget_s: 'num?', duration_s: 'num?',
    status: 'str?' },
  progress: { step: 'num', total: 'num?', metrics: 'map' },
  artifact: { path: 'str', name: 'str', kind: 'str', bytes: 'int?', step: 'num?', by: 'str' },
  heartbeat: { beat: 'int', stage: 'str?', stages: 'list', idle_s: 'num',
    progress_age_s: 'num?', stack: 'str?', dropped: 'map', where: 'str?', work: 'int?' },
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

/** Throw ProtocolError unless `body` has the fields of `kind`. */
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

module.exports = { WORKER_KINDS, CLIENT_KINDS, KINDS, FINAL_KINDS, UNCUT_KINDS, isInt, isPlainMap, checkFields };
