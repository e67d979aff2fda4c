'use strict';
/**
 * The report in words: summary(report), the one readable paragraph (what happened, where, why,
 * what to try, and what the record is missing); logFooter(report), what a job's log file ends
 * with; toJSON(report), ASCII JSON. Pure. The Python twin is bridge/report_text.py.
 */

const jsonform = require('./jsonform.js');

/**
 * What a job's log file ends with: the verdict, then the stacks that explain it (the crash
 * file's are gone once the job ends; the log keeps them). Python: report_text.log_footer.
 */
function logFooter(report) {
  const lines = [`[trainbridge] ${report.summary || report.outcome}`];
  if (report.stacks) lines.push('[trainbridge] stacks:', String(report.stacks).replace(/\n+$/, ''));
  return lines.join('\n');
}

const POINTS_KEPT = 1024; // worker/runtime.py SERIES_CAP: the calls' metrics kept between two sends

/** Sentences for the summary about anything the job's record is missing. */
function losses(report) {
  const out = [];
  const dropped = Object.entries(report.dropped || {}).filter(([, n]) => n).sort(([a], [b]) => (a < b ? -1 : 1));
  for (const [kind, count] of dropped) {
    if (kind === 'user') {
      out.push(`The script's inbox was full: the worker dropped ${count} job.send() message${count !== 1 ? 's' : ''} (report 'dropped'); read them with worker.receive() or worker.on_message().`);
      continue;
    }
    if (kind === 'artifacts') {
      out.push(`${count} more file${count !== 1 ? 's' : ''} the job made ${count !== 1 ? 'were' : 'was'} not listed: a worker lists at most 1,000 (report 'dropped').`);
      continue;
    }
    if (kind === 'points') {
      out.push(`The metrics of ${count} progress() call${count !== 1 ? 's' : ''} were not kept for the curves: more than ${POINTS_KEPT} calls came between two sends (report 'dropped'); the latest values were sent.`);
      continue;
    }
    out.push(`The worker dropped ${count} ${kind} record${count !== 1 ? 's' : ''}: its queue stayed full past TRAINBRIDGE_LOG_WAIT_S (report 'dropped').`);
  }
  const undelivered = Object.entries((report.protocol || {}).undelivered || {}).filter(([, n]) => n).sort(([a], [b]) => (a < b ? -1 : 1));
  for (const [kind, count] of undelivered) {
    const what = kind === 'user' ? 'job.send() message' : `'${kind}' message`;
    const why = kind === 'user' // also bounded while a worker takes nothing (hub.js)
      ? 'its process was gone, it took none while 10,000 waited, or the job ended first'
      : 'its process was gone or the job ended first';
    out.push(`${count} ${what}${count !== 1 ? 's' : ''} never reached the worker: ${why} (report 'protocol.undelivered').`);
  }
  const lost = (report.protocol || {}).lost || 0;
  if (lost) out.push(`${lost} message${lost !== 1 ? 's' : ''} from the worker never arrived: gaps in their sequence numbers (report 'protocol.lost').`);
  const worker = report.worker || {};
  const unsent = (report.protocol || {}).unsent || 0;
  if (unsent) {
    out.push(`${unsent} record${unsent !== 1 ? 's' : ''} the worker queued at exit (logs, stages, messages) never left it: the client took nothing for a whole ack timeout (report 'protocol.unsent'; TRAINBRIDGE_ACK_TIMEOUT_S waits longer).`);
  } else if (report.outcome === 'succeeded' && worker.hello && !worker.bye) {
    out.push("The worker's last words never arrived, so what it sent at the end may be missing; the log's last lines say how many records never left.");
  }
  const logError = report.log_error;
  if (logError) out.push(`The log file ${logError.path} is incomplete from line ${logError.from_line} on: ${logError.error}.`);
  return out;
}

/** Python's f"{x:g}" for a number that is not a whole one (6 significant digits, exponent
 * form below 1e-4 and from 1e6), String() for the rest; null is Python's None. */
function fmt(value) {
  if (value === null || value === undefined) return 'None';
  if (typeof value !== 'number' || Number.isInteger(value)) return String(value);
  if (Number.isNaN(value)) return 'nan';
  if (!Number.isFinite(value)) return value > 0 ? 'inf' : '-inf';
  const strip = (s) => (s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s);
  const [mant, exp] = value.toExponential(5).split('e');
  const e = Number(exp);
  if (e < -4 || e >= 6) return `${strip(mant)}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  return strip(value.toFixed(5 - e));
}

/**
 * Python's f"{x:.{digits}f}": a tie (the exact binary value halfway between) goes to the even
 * digit, where toFixed goes up (95.25 -> "95.2", as the Python client writes it).
 */
function pyFixed(x, digits) {
  const exact = Math.abs(x).toFixed(100); // the binary value's decimal digits, exactly
  const point = exact.indexOf('.');
  if (point < 0 || !/^50*$/.test(exact.slice(point + 1 + digits))) return x.toFixed(digits);
  const kept = exact.slice(0, digits ? point + 1 + digits : point);
  if (Number(kept.charAt(kept.length - 1)) % 2 !== 0) return x.toFixed(digits);
  return `${x < 0 ? '-' : ''}${kept}`;
}

/** One readable paragraph: what happened, where, why, and what to try. */
function summary(report) {
  const outcome = report.outcome || 'unknown';
  const parts = [`Job ${outcome} after ${pyFixed(report.duration_s ?? 0, 1)} s`];
  if (report.signal) parts[0] += ` (killed by ${report.signal})`;
  else if (report.exit_code !== null && report.exit_code !== undefined) parts[0] += ` (exit status ${report.exit_code})`;
  if (report.stage && outcome !== 'succeeded') parts[0] += `, in stage '${report.stage}'`;
  const { progress } = report;
  if (progress && progress.step !== null && progress.step !== undefined) {
    const { total } = progress;
    parts[0] += `, at step ${fmt(progress.step)}${total ? ` of ${fmt(total)}` : ''}`;
  }
  parts[0] += '.';
  const { hang } = report;
  if (hang) {
    parts.push(`It was declared hung (${hang.reason.replace(/_/g, ' ')}) ${pyFixed(hang.after_s, 1)} s after the start, and stopped.`);
  }
  if (report.health && report.health.length) parts.push(`Training health: ${report.health.map((e) => e.text).join('; ')}.`);
  const { diagnosis } = report;
  if (diagnosis) {
    parts.push(`Diagnosis (${diagnosis.kind}): ${diagnosis.summary}.`);
    if (diagnosis.hint) parts.push(`Try: ${diagnosis.hint}.`);
  } else if (report.error && outcome !== 'succeeded') {
    parts.push(`Error: ${report.error.type}: ${report.error.message}.`);
  }
  parts.push(...losses(report));
  return parts.map((p) => p.replace(/\.\./g, '.')).join(' ');
}

/**
 * ASCII JSON: non-ASCII text and undecodable bytes (lone surrogates) become \u escapes; a
 * number that is not finite is its string (jsonform.js).
 */
function toJSON(report, indent = 2) {
  return jsonform.stringify(report, indent)
    .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const REASON_CHARS = 160; // a job list's "why" column

/**
 * Why, in one short line for a job list (the report's `reason`): the diagnosis summary, a
 * cancel's reason, the store's note, else the summary's first sentence; for a success, only
 * its training health. Python: report_text.reason.
 */
function reason(report) {
  if (!report) return null;
  let text;
  if (report.outcome === 'succeeded') {
    const health = report.health || [];
    text = health.length ? `training health: ${health[0].text}` : null;
  } else {
    const diagnosis = report.diagnosis && report.diagnosis.summary;
    const cancel = report.outcome === 'cancelled' && report.cancel && report.cancel.reason;
    text = diagnosis || (cancel ? `cancelled: ${cancel}` : null) || report.note
      || String(report.summary || '').split(/(?<=\.) /)[0] || null;
  }
  if (text && text.length > REASON_CHARS) text = `${text.slice(0, REASON_CHARS - 3)}...`;
  return text || null;
}

module.exports = { fmt, logFooter, losses, reason, summary, toJSON };
