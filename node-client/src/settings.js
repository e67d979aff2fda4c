'use strict';
/**
 * A launched job's settings: the supervisor's deadlines and their defaults (bridge/machine.py
 * DEFAULTS), and the check launch() makes before anything starts (bridge/machine.py
 * config_problem; vectors/config.json pins both). The supervisor checks them again.
 */

// Seconds; null disables a deadline. launch()'s `timeouts` override these.
const DEFAULTS = Object.freeze({
  startup_timeout: 120.0, // spawn -> hello
  heartbeat_timeout: 30.0, // last worker message -> hung, while the process lives
  stall_timeout: null, // last progress/stage change -> hung (off unless asked for)
  stalled_after: 30.0, // last progress/stage change -> state "stalled" (reversible)
  kill_grace: 5.0, // SIGTERM -> SIGKILL
  cancel_grace: 5.0, // in-band cancel -> SIGTERM, unless the cancel event says
  dump_timeout: 1.0, // dump_stacks command -> give up on the reply
  signal_dump_wait: 0.2, // SIGUSR1 -> SIGTERM: faulthandler writes synchronously
  snapshot_timeout: 2.0, // hang -> SIGTERM at the latest while evidence is collected
  drain_timeout: 1.0, // exit -> outcome, at the latest, if "drained" never comes
});

// The deadlines null may switch off; the other settings are always a number of seconds.
const OPTIONAL = Object.freeze(['startup_timeout', 'heartbeat_timeout', 'stall_timeout', 'stalled_after']);

/**
 * The first bad setting in `config` as [key, problem], or null when all are good; problem:
 * unknown, type (not a number of seconds, or null where that is not allowed), not_finite,
 * negative. Mirrors bridge/machine.py config_problem; vectors/config.json pins both.
 * @param {Record<string, unknown>} config
 * @returns {[string, 'unknown' | 'type' | 'not_finite' | 'negative'] | null}
 */
function configProblem(config) {
  for (const key of Object.keys(config).sort()) {
    if (!(key in DEFAULTS)) return [key, 'unknown'];
  }
  for (const key of Object.keys(DEFAULTS)) {
    if (!(key in config)) continue;
    const value = config[key];
    if (value === null && OPTIONAL.includes(key)) continue;
    if (typeof value !== 'number') return [key, 'type'];
    if (!Number.isFinite(value)) return [key, 'not_finite'];
    if (value < 0) return [key, 'negative'];
  }
  return null;
}

module.exports = { DEFAULTS, OPTIONAL, configProblem };
