'use strict';
/**
 * trainbridge for Node: supervise a Python training process.
 *
 *   const { launch } = require('trainbridge');
 *   const job = launch({ command: 'python', args: ['train.py'], timeouts: { stallTimeout: 600 } });
 *   job.on('progress', (p) => bar.update(p.step / p.total));
 *   const report = await job.done;
 */

if (process.platform !== 'linux') {
  // One sentence instead of a failure deep inside (no /proc, no process groups as used here).
  throw new Error(`trainbridge's Node client supports Linux only and this is ${process.platform}; `
    + 'the Python worker does run here, so supervise the training process from a Linux machine or container');
}

const { Job, LaunchError, JobFailedError } = require('./job.js');
const { checkOptions, checkPaths } = require('./job_arguments.js');
const { ProtocolError, PythonError, StoreError } = require('./errors.js');
const { toJSON } = require('./jsonform.js');
const { resolvePython } = require('./launcher.js');
const { DEFAULTS } = require('./settings.js');
const { openStore, defaultStorePath, AttachedJob, StoreWatch } = require('./store.js');
const { FeedJob } = require('./feed_job.js');
const { JobServer } = require('./job_server.js');
const { doctor, DoctorError } = require('./doctor.js');

/** @typedef {import('./feed_job.js').Report} Report */

/**
 * Start `command args` under supervision and return its Job at once (an EventEmitter). The
 * Python supervisor (bridge/jobserve.py) judges it; the Job renders what it publishes.
 * options: command, args, cwd, env (default process.env), timeouts (deadlines and worker
 * settings, snake_case or camelCase), logPath, logTimestamps, tailLines, stdin, raw, signal,
 * sampleResources.
 * @param {import('./job.js').LaunchOptions} options checked by checkOptions()
 */
function launch(options) {
  checkOptions(options); // bad options fail here, before anything is started
  return new Job(options);
}

/**
 * Start the supervisor (the job server) for `python` now, so that the first launch() finds it
 * running: a GUI calls it at start-up, before a user clicks "Train". options: python (or
 * pythonPath), as launch()'s (default resolvePython()). Resolves to {pid, python} once it
 * serves; rejects with a LaunchError saying what to install where when it cannot run. It keeps
 * this process alive only while a job runs.
 * @param {{python?: string, pythonPath?: string} | null} [options] the paths checked by checkPaths()
 */
function prepare(options = {}) {
  try {
    checkPaths({ python: options && options.python, pythonPath: options && options.pythonPath });
  } catch (err) {
    return Promise.reject(err);
  }
  const python = resolvePython({ python: (options && (options.python || options.pythonPath)) || undefined });
  return JobServer.for(python).whenReady();
}

/** A report in words: its summary, as the supervisor wrote it. @type {(report: Report | null) => string} */
const summary = (report) => String((report && report.summary) || '');

module.exports = {
  launch, prepare, openStore, defaultStorePath, Job, ProtocolError, PythonError, StoreError, LaunchError, JobFailedError, toJSON,
  summary, resolvePython, doctor, DoctorError, FeedJob, AttachedJob, StoreWatch,
  DEFAULT_TIMEOUTS: DEFAULTS,
};
