'use strict';
/**
 * The argument check of launch() (and of openStore().submit()): bad options are refused with
 * a LaunchError that says which and why, before anything is registered or spawned; the rules
 * of bridge/job_arguments.py check_arguments. The Python twin is bridge/job_arguments.py.
 */

const fs = require('node:fs');
const settings = require('./settings.js');

const DEFAULT_TAIL_LINES = 40;
const WORKER_SETTINGS = ['heartbeat_s', 'stall_s', 'freeze_s', 'ack_timeout_s'];
const snake = (/** @type {string} */ name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Split user timeouts (snake_case or camelCase) into machine config and worker settings. */
function splitTimeouts(timeouts = {}) {
  /** @type {Record<string, any>} */
  const config = {};
  /** @type {Record<string, any>} */
  const worker = {};
  for (const [name, value] of Object.entries(timeouts || {})) {
    const key = snake(name);
    if (key in settings.DEFAULTS) config[key] = value;
    else if (WORKER_SETTINGS.includes(key)) worker[key] = value;
    else throw new LaunchError(`unknown timeout ${JSON.stringify(name)}; known: ${[...Object.keys(settings.DEFAULTS), ...WORKER_SETTINGS].join(', ')}`);
  }
  // As bridge.job.launch: a stall deadline makes the job show "stalled" halfway there.
  if (config.stall_timeout !== undefined && config.stall_timeout !== null && !('stalled_after' in config)) {
    config.stalled_after = Math.min(settings.DEFAULTS.stalled_after, config.stall_timeout / 2);
  }
  return { config, worker };
}

const show = (/** @type {unknown} */ value) => (value === undefined ? 'undefined' : typeof value === 'string' ? JSON.stringify(value)
  : typeof value === 'number' || typeof value === 'boolean' || value === null ? String(value)
    : Array.isArray(value) ? 'an array' : typeof value === 'function' ? 'a function' : `a ${typeof value}`);

/**
 * Each named value is a path (a string), undefined or null; else a LaunchError naming it.
 * @param {Record<string, unknown>} values
 */
function checkPaths(values) {
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined && value !== null && typeof value !== 'string') {
      throw new LaunchError(`${name} must be a path (a string) or null, got ${show(value)}`);
    }
  }
}

/**
 * Refuse bad launch() options with a LaunchError that says which and why, before anything
 * is registered or spawned; the rules of bridge/job.py check_arguments (settings:
 * settings.configProblem, pinned by vectors/config.json).
 * @param {any} options whatever the caller passed (JavaScript): every field is checked here
 */
function checkOptions(options) {
  if (!options || typeof options !== 'object') {
    throw new LaunchError('launch() needs options, e.g. {command: "python", args: ["train.py"]}');
  }
  const { command, args, cwd, env, logPath, tailLines, timeouts } = options;
  // No command at all: the resolved Python runs `args` (see the constructor).
  if (command !== undefined && command !== null && (typeof command !== 'string' || command === '')) {
    throw new LaunchError(`command must be the program to run (a non-empty string), got ${show(command)}; e.g. {command: "python", args: ["train.py"]}`);
  }
  if (typeof command === 'string' && /\s/.test(command) && !fs.existsSync(command)) {
    const [program, ...rest] = command.trim().split(/\s+/);
    throw new LaunchError(`command must be one program, not a shell line: got ${JSON.stringify(command)}; write {command: ${JSON.stringify(program)}, args: ${JSON.stringify(rest)}} (there is no shell)`);
  }
  if (args !== undefined && args !== null) {
    if (!Array.isArray(args)) throw new LaunchError(`args must be an array of strings, got ${show(args)}`);
    args.forEach((arg, i) => {
      if (typeof arg !== 'string') throw new LaunchError(`args[${i}] must be a string, got ${show(arg)} in ${JSON.stringify(args)}`);
    });
  }
  checkPaths({ cwd, logPath, python: options.python, pythonPath: options.pythonPath });
  if (env !== undefined && env !== null) {
    if (typeof env !== 'object' || Array.isArray(env)) throw new LaunchError(`env must be an object of strings or null, got ${show(env)}`);
    for (const [key, value] of Object.entries(env)) {
      if (key === '' || key.includes('=') || key.includes('\0')) throw new LaunchError(`env keys must be non-empty strings without '=', got ${JSON.stringify(key)}`);
      if (typeof value !== 'string' || value.includes('\0')) {
        throw new LaunchError(`env[${JSON.stringify(key)}] must be a string, got ${show(value)}; to leave a variable out, do not put it in env`);
      }
    }
  }
  if (tailLines !== undefined && !(Number.isInteger(tailLines) && tailLines >= 0)) {
    throw new LaunchError(`tailLines must be a whole number >= 0, got ${show(tailLines)}`);
  }
  metricNames(options.stopOnNan);
  for (const name of ['zeroCode', 'raw', 'pythonEnv', 'logTimestamps', 'sampleResources', 'rejectOnFailure']) {
    const value = options[name];
    if (value !== undefined && value !== null && typeof value !== 'boolean') throw new LaunchError(`${name} must be true or false, got ${show(value)}`);
  }
  if (timeouts !== undefined && timeouts !== null && (typeof timeouts !== 'object' || Array.isArray(timeouts))) {
    throw new LaunchError(`timeouts must be an object, got ${show(timeouts)}`);
  }
  /** @type {Record<string, string>} */
  const names = {};
  /** @type {Record<string, unknown>} */
  const config = {};
  /** @type {Record<string, unknown>} */
  const worker = {};
  for (const [name, value] of Object.entries(timeouts || {})) {
    const key = snake(name);
    names[key] = name;
    if (WORKER_SETTINGS.includes(key)) worker[key] = value;
    else config[key] = value;
  }
  const problem = settings.configProblem(config);
  if (problem !== null) {
    const [key, what] = problem;
    const name = `timeouts.${names[key]}`;
    const value = config[key];
    if (what === 'unknown') throw new LaunchError(`unknown timeout ${JSON.stringify(names[key])}; known: ${[...Object.keys(settings.DEFAULTS), ...WORKER_SETTINGS].join(', ')}`);
    if (what === 'type') throw new LaunchError(`${name} must be a number of seconds${settings.OPTIONAL.includes(key) ? ' or null (off)' : ''}, got ${show(value)}`);
    if (what === 'not_finite') throw new LaunchError(`${name} must be a finite number of seconds, got ${show(value)}`);
    throw new LaunchError(`${name} must be >= 0 seconds, got ${show(value)}`);
  }
  for (const [key, value] of Object.entries(worker)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      throw new LaunchError(`timeouts.${names[key]} must be a finite number of seconds > 0, got ${show(value)}`);
    }
  }
}

/**
 * stopOnNan as a list of metric names ('*': every metric); undefined, null or [] is off. A
 * LaunchError says what is wrong with anything else. Python: job_arguments.metric_names.
 * @param {unknown} stopOnNan
 * @returns {string[]}
 */
function metricNames(stopOnNan) {
  if (stopOnNan === undefined || stopOnNan === null) return [];
  const names = typeof stopOnNan === 'string' ? [stopOnNan] : stopOnNan;
  if (!Array.isArray(names) || !names.every((n) => typeof n === 'string' && n !== '')) {
    throw new LaunchError(`stopOnNan must be a metric name, an array of them, or '*' for every metric (the job is cancelled when one becomes NaN or infinite), got ${show(stopOnNan)}`);
  }
  return [...names];
}

class LaunchError extends Error {
  /**
   * The command could not be started (not found, not executable, bad cwd).
   * @param {string} message
   * @param {NodeJS.ErrnoException} [cause] the failure behind it; its `code` is kept
   */
  constructor(message, cause) {
    super(message, { cause });
    this.name = 'LaunchError';
    this.code = cause && cause.code;
  }
}

module.exports = { checkOptions, checkPaths, metricNames, splitTimeouts, LaunchError, DEFAULT_TAIL_LINES, WORKER_SETTINGS };
