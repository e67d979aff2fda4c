'use strict';
/**
 * The hang-time stack of a child the job may be waiting on (issue 12 item 1), as
 * bridge/childstack.py: `kernel_stack` (the function names of /proc/<pid>/stack, innermost
 * first; readable by root only) on the unix-socket peer and the stopped or stuck children.
 * A child that runs a worker answers dump_stacks itself (process_stacks in the facts). Unlike
 * the Python client, no py-spy: it would block the event loop every job shares.
 */
const fs = require('fs');

const SUSPECT = ['stopped', 'tracing-stop', 'disk-sleep', 'zombie'];
const MOST = 4; // children looked at, at most

/** "[<0>] do_signal_stop+0x16f/0x210" lines -> ["do_signal_stop", ...], or null. */
function kernelStack(pid) {
  let text;
  try {
    text = fs.readFileSync(`/proc/${pid}/stack`, 'latin1');
  } catch {
    return null;
  }
  const names = text.split('\n').map((line) => line.trim().split(/\s+/).pop()).filter(Boolean).map((w) => w.split('+')[0]);
  return names.length ? names : null;
}

/** Add kernel_stack to the children the diagnosis may name (in place). */
function add(children, peer) {
  const chosen = children.filter((c) => c.pid === peer);
  for (const c of children) if (SUSPECT.includes(c.status) && !chosen.includes(c)) chosen.push(c);
  for (const child of chosen.slice(0, MOST)) {
    const stack = kernelStack(child.pid);
    if (stack) child.kernel_stack = stack;
  }
}

module.exports = { add, kernelStack };
