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

const { Job, LaunchError, JobFailedError, checkOptions } = require('./job.js');
const { Hub, getDefaultHub } = require('./hub.js');
const { ProtocolError, PythonError, StoreError } = require('./errors.js');
const { toJSON, summary } = require('./report.js');
const { resolvePython } = require('./launcher.js');
const machine = require('./machine.js');
const { openStore, defaultStorePath, AttachedJob, StoreWatch } = require('./store.js');
const { doctor, DoctorError } = require('./doctor.js');

/**
 * Start `command args` under supervision and return its Job at once (an EventEmitter).
 * options: command, args, cwd, env (default process.env), timeouts (machine deadlines and
 * worker settings, snake_case or camelCase), logPath, logTimestamps, tailLines, hub.
 */
function launch(options) {
  checkOptions(options); // bad options fail here, before a hub or a job exists
  const hub = (options && options.hub) || getDefaultHub();
  return new Job(options, hub);
}

module.exports = {
  launch, openStore, defaultStorePath, Job, Hub, ProtocolError, PythonError, StoreError, LaunchError, JobFailedError, toJSON,
  summary, resolvePython, doctor, DoctorError, AttachedJob, StoreWatch,
  DEFAULT_TIMEOUTS: machine.DEFAULTS,
};
