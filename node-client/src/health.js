'use strict';
/**
 * Training health: a metric the job reports that becomes NaN or an infinity (a loss that
 * diverged). Pure, and judged once: the supervisor folds each of the lead's progress messages
 * in (job_facts.js), publishes a 'health' event for each new entry, and the report keeps the
 * entries (report.health, docs/CLIENT.md "Training health"). The twin of bridge/health.py;
 * vectors/health.json holds cases both run.
 *
 * A metric is said once: the first report in which it is not finite. The worker sends the
 * latest progress a few times a second, not every step, so the steps between the last finite
 * report and this one were not seen: the entry says "at step N" only when N follows the last
 * finite step, and "by step N" otherwise.
 */

const { textOf } = require('./jsonform.js');
const { fmt } = require('./report_text.js');

const KEPT = 32; // metrics said at most

/** The health record of a job that has reported nothing. */
function initial() {
  return { entries: [], finite: {}, said: [] };
}

const isNumber = (value) => typeof value === 'number';

function text(entry) {
  const value = textOf(entry.value);
  if (entry.last_finite === null) return `${entry.metric} was ${value} from its first report (step ${fmt(entry.step)})`;
  const follows = isNumber(entry.step) && isNumber(entry.last_finite_step) && entry.step === entry.last_finite_step + 1;
  return `${entry.metric} became ${value} ${follows ? 'at' : 'by'} step ${fmt(entry.step)} (it was ${fmt(entry.last_finite)} at step ${fmt(entry.last_finite_step)})`;
}

/**
 * Fold one progress report (its step and metrics) into the record; return the new entries
 * (each: metric, value, step, last_finite, last_finite_step, text).
 */
function observe(record, step, metrics) {
  const out = [];
  if (metrics === null || typeof metrics !== 'object' || Array.isArray(metrics)) return out;
  const { finite, said } = record;
  for (const [name, value] of Object.entries(metrics)) {
    if (!isNumber(value) || said.includes(name)) continue;
    const has = Object.prototype.hasOwnProperty.call(finite, name);
    if (Number.isFinite(value)) {
      if (Object.keys(finite).length < KEPT || has) finite[name] = [step, value];
      continue;
    }
    if (said.length >= KEPT) continue;
    const last = has ? finite[name] : null;
    if (has) delete finite[name];
    const entry = {
      metric: name, value, step, last_finite: last === null ? null : last[1], last_finite_step: last === null ? null : last[0],
    };
    entry.text = text(entry);
    said.push(name);
    out.push(entry);
  }
  record.entries.push(...out);
  return out;
}

/** Whether the user asked to stop the job on this entry: a list of metric names, '*' for every one. */
function stops(entry, stopOn) {
  return Array.isArray(stopOn) && (stopOn.includes('*') || stopOn.includes(entry.metric));
}

module.exports = { KEPT, initial, observe, stops, text };
