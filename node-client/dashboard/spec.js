'use strict';
/**
 * What the dashboard can start (pure): a submitted spec -> launch options, with a SpecError
 * that says what is wrong; and a readable title for a command.
 */

const fs = require('node:fs');
const path = require('node:path');
const { resolvePython } = require('../src/launcher.js');

const REPO = path.resolve(__dirname, '..', '..');
const DEMO_SCRIPT = path.join(REPO, 'examples', 'demo_train.py');
const DEMO_STAGES = ['config', 'data', 'model', 'optimizer', 'train', 'save'];
const TIMEOUT_KEYS = ['startupTimeout', 'heartbeatTimeout', 'stallTimeout', 'stalledAfter', 'killGrace', 'cancelGrace'];

class SpecError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'SpecError';
  }
}

/**
 * @param {unknown} value
 * @param {string} name
 * @returns {number | null}
 */
function positive(value, name, { allowNull = true } = {}) {
  if (value === undefined || value === null || value === '') {
    if (allowNull) return null;
    throw new SpecError(`${name} is required`);
  }
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new SpecError(`${name} must be a positive number of seconds, not ${JSON.stringify(value)}`);
  return n;
}

/**
 * A submitted spec -> launch options (pure). Specs:
 *   {kind: 'demo', steps?, failAt?, hangAt?, crashAt?, stallTimeout?, budget?}
 *   {kind: 'command', argv: [program, ...args], cwd?, timeouts?: {startupTimeout, heartbeatTimeout, stallTimeout, ...}}
 * @param {any} spec the request body as parsed (arbitrary JSON): every field is checked here
 */
function launchOptions(spec, { python = resolvePython(), env = process.env } = {}) {
  if (!spec || typeof spec !== 'object') throw new SpecError('the request body must be a JSON object');
  if (spec.kind === 'demo') {
    const args = [DEMO_SCRIPT];
    const title = ['demo'];
    if (spec.steps !== undefined && spec.steps !== null && spec.steps !== '') {
      const steps = Number(spec.steps);
      if (!Number.isInteger(steps) || steps < 1) throw new SpecError(`steps must be a whole number above 0, not ${JSON.stringify(spec.steps)}`);
      args.push('--steps', String(steps));
    }
    for (const [key, flag] of [['failAt', '--fail-at'], ['hangAt', '--hang-at'], ['crashAt', '--crash-at']]) {
      const stage = spec[key];
      if (stage === undefined || stage === null || stage === '') continue;
      if (!DEMO_STAGES.includes(stage)) throw new SpecError(`${flag} takes one of ${DEMO_STAGES.join(', ')}, not ${JSON.stringify(stage)}`);
      args.push(flag, stage);
      title.push(`${flag} ${stage}`);
    }
    const budget = positive(spec.budget, 'budget');
    if (budget !== null) args.push('--budget', String(budget));
    const stallTimeout = positive(spec.stallTimeout, 'stallTimeout');
    return { title: title.join(' '), options: { command: python, args, cwd: REPO, env,
      timeouts: { startupTimeout: 120, stallTimeout, killGrace: 3 } } };
  }
  if (spec.kind === 'command') {
    const argv = spec.argv;
    if (!Array.isArray(argv) || !argv.length || argv.some((a) => typeof a !== 'string') || !argv[0].trim()) {
      throw new SpecError('a command job needs argv: the program and its arguments, as strings');
    }
    /** @type {Record<string, number>} */
    const timeouts = {};
    for (const [key, value] of Object.entries(spec.timeouts || {})) {
      if (!TIMEOUT_KEYS.includes(key)) throw new SpecError(`unknown timeout ${JSON.stringify(key)}; known: ${TIMEOUT_KEYS.join(', ')}`);
      const v = positive(value, key);
      if (v !== null) timeouts[key] = v;
    }
    let cwd = REPO;
    if (spec.cwd) {
      cwd = path.resolve(REPO, String(spec.cwd));
      if (!fs.existsSync(cwd)) throw new SpecError(`the working directory ${cwd} does not exist`);
    }
    return { title: titleOf(argv), options: { command: argv[0], args: argv.slice(1), cwd, env, timeouts } };
  }
  throw new SpecError(`kind must be "demo" or "command", not ${JSON.stringify(spec.kind)}`);
}

/**
 * A short, readable title for a stored command (the demo's options; else the command line).
 * @param {ReadonlyArray<unknown> | null} [command]
 * @returns {string}
 */
function titleOf(command) {
  const argv = (command || []).map(String);
  const i = argv.findIndex((a) => a.endsWith(path.join('examples', 'demo_train.py')));
  if (i >= 0) {
    const opts = [];
    for (let k = i + 1; k < argv.length; k++) if (/^--(fail|hang|crash)-at$/.test(argv[k])) opts.push(`${argv[k]} ${argv[k + 1]}`);
    return ['demo', ...opts].join(' ');
  }
  // The program by its name (a venv's python path can be long; the full command is the title's
  // tooltip), so what is cut past 100 characters is never the arguments that tell jobs apart.
  // A multi-line argument (python -c code) reads as its lines, each break shown as a return
  // sign: JSON's "\n" read as a backslash in the code.
  const shown = argv.length ? [path.basename(argv[0]), ...argv.slice(1)] : argv;
  const flat = (/** @type {string} */ a) => a.replace(/[ \t]*\r?\n[ \t]*/g, ' \u23ce ').replace(/\t/g, ' ');
  const line = shown.map((a) => (/[\s'"()$`\\;&|<>*?]/.test(a) ? JSON.stringify(flat(a)) : a)).join(' ');
  return line.length > 100 ? `${line.slice(0, 99)}…` : line;
}

module.exports = { SpecError, launchOptions, titleOf, DEMO_STAGES, DEMO_SCRIPT, REPO };
