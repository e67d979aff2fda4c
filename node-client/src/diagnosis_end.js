'use strict';
/**
 * Diagnosis, part 2: end verdicts (pure) -- why a process ended. A port of
 * bridge/diagnosis_end.py rule for rule: the same facts give the same kind, summary and hint
 * (vectors/diagnosis.json holds the shared cases).
 */

const {
  parseStack, formatFrame, userFrame, where, frameFields, oneLine, quote, lastLine, tracebackInText, inStage, diag,
} = require('./diagnosis_stack.js');

const NATIVE_SIGNALS = new Set(['SIGSEGV', 'SIGBUS', 'SIGILL', 'SIGFPE', 'SIGABRT']);
const SIGNAL_WORDS = {
  SIGSEGV: 'segmentation fault', SIGBUS: 'bus error', SIGILL: 'illegal instruction',
  SIGFPE: 'floating point exception', SIGABRT: 'abort',
};

// --- ends -----------------------------------------------------------------------------
const CUDA_OOM_TEXT = /CUDA out of memory|CUDA error: out of memory|OutOfMemoryError/i;

function isCudaOom(error, logTail) {
  if (error) {
    if (error.kind === 'cuda_oom') return true;
    if (CUDA_OOM_TEXT.test(`${error.type ?? ''} ${error.message ?? ''}`)) return true;
  }
  return (logTail || []).slice(-50).some((line) => CUDA_OOM_TEXT.test(String(line)));
}

function errorFrames(error) {
  if (!error) return [];
  const frames = (error.frames || []).filter((f) => f && typeof f === 'object' && !Array.isArray(f));
  if (frames.length) return frames;
  return parseStack(error.traceback);
}

/** Python's repr() of a str (quotes and escapes), for messages quoted as Python shows them. */
function pyRepr(text) {
  const mark = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (ch === '\\' || ch === mark) out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (cp >= 0xd800 && cp <= 0xdfff) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return mark + out + mark;
}

function oomLine(logTail) {
  for (let i = logTail.length - 1; i >= 0; i--) if (CUDA_OOM_TEXT.test(String(logTail[i]))) return String(logTail[i]);
  return '';
}

// torch's messages when a DataLoader worker dies (as bridge/diagnosis_end.py _WORKER_DIED).
const WORKER_DIED = /DataLoader worker \(pid(?:\(s\))? (?<pids>\d+(?:, \d+)*)\) (?:is killed by signal: (?<word>[A-Za-z ]+?)\.|exited unexpectedly)/g;
const STRSIGNAL = { Killed: 'SIGKILL', 'Bus error': 'SIGBUS', 'Segmentation fault': 'SIGSEGV', Aborted: 'SIGABRT',
  Terminated: 'SIGTERM', 'Floating point exception': 'SIGFPE', 'Illegal instruction': 'SIGILL', Interrupt: 'SIGINT' };

function workerDied(error, logTail) {
  const texts = [];
  if (error) {
    texts.push(String(error.message ?? ''));
    for (const c of error.chain || []) if (c && typeof c === 'object') texts.push(String(c.message ?? ''));
  }
  for (const line of logTail.slice(-200)) texts.push(String(line));
  let found = null;
  for (const text of texts) {
    for (const m of text.matchAll(WORKER_DIED)) {
      const sig = m.groups.word ? (STRSIGNAL[m.groups.word] || m.groups.word) : null;
      if (found === null) found = { pids: m.groups.pids, signal: sig };
      else if (sig && !found.signal) found.signal = sig;
    }
  }
  return found;
}

// A resource that ran out, raised as a library's generic error: the words of the allocators
// and of the kernel's errno, as Python, torch and numpy print them (as bridge/diagnosis_end.py).
const HOST_OOM_TEXT = /\bMemoryError\b|DefaultCPUAllocator: can't allocate memory|std::bad_alloc|Cannot allocate memory|Unable to allocate [\d.]+ [KMGT]i?B/;
const DISK_FULL_TEXT = /No space left on device|Disk quota exceeded|unexpected pos \d+ vs \d+|PytorchStreamWriter failed writing file/;

/** Whether the fatal error (type, message, chain) or, without one, the last output lines say it. */
function says(pattern, error, logTail) {
  if (error) {
    const texts = [`${error.type ?? ''}: ${error.message ?? ''}`];
    for (const c of error.chain || []) if (c && typeof c === 'object' && !Array.isArray(c)) texts.push(`${c.type ?? ''}: ${c.message ?? ''}`);
    return texts.some((t) => pattern.test(String(t)));
  }
  return logTail.slice(-50).some((line) => pattern.test(String(line)));
}

/** Bytes for people: 1.5 GiB, 320.0 MiB, 12 KiB (rounded half up, as the Python twin). */
function size(value) {
  for (const [unit, name] of [[2 ** 30, 'GiB'], [2 ** 20, 'MiB']]) {
    if (value >= unit) return `${(Math.floor((value / unit) * 10 + 0.5) / 10).toFixed(1)} ${name}`;
  }
  return `${Math.floor(value / 1024 + 0.5)} KiB`;
}

const isInt = (v) => Number.isInteger(v);

function memoryWords(memory) {
  const facts = [];
  const asLimit = memory.as_limit_bytes;
  const cgroup = memory.cgroup_limit_bytes;
  if (isInt(asLimit)) facts.push(`address-space limit ${size(asLimit)}, ulimit -v`);
  if (isInt(cgroup)) facts.push(`memory limit of its cgroup ${size(cgroup)}`);
  for (const [key, name] of [['vm_bytes', 'address space in use'], ['peak_rss_bytes', 'peak RSS']]) {
    if (isInt(memory[key])) facts.push(`${name} ${size(memory[key])}`);
  }
  let advice;
  if (isInt(asLimit)) advice = `the process hit its address-space limit (${size(asLimit)}, ulimit -v or RLIMIT_AS): raise or remove it (ulimit -v unlimited)`;
  else if (isInt(cgroup)) advice = `the process hit its cgroup's memory limit (${size(cgroup)}; a container or systemd limit): raise it`;
  else advice = 'the host ran out of RAM: free memory that other processes hold';
  return [facts.length ? ` (${facts.join('; ')})` : '', advice];
}

function diskWords(disk) {
  const fs = disk.filesystem;
  const facts = [];
  if (typeof disk.path === 'string') facts.push(`writing ${disk.path}`);
  if (typeof fs === 'string' && isInt(disk.free_bytes)) {
    facts.push(`${fs} has ${size(disk.free_bytes)} free${isInt(disk.total_bytes) ? ` of ${size(disk.total_bytes)}` : ''}`);
  }
  if (typeof disk.unknown === 'string') facts.push(disk.unknown); // worker/exhaustion.py could not look in time
  const whereTo = typeof fs === 'string' ? `on ${fs}` : 'on the disk written to';
  return [facts.length ? ` (${facts.join('; ')})` : '', `free space ${whereTo} (old checkpoints, caches) or write to a disk with room`];
}

/** The error's own words: the worker's message, else the traceback's last line. */
function messageOf(error, logTail) {
  if (error) return `${error.type ?? 'Exception'}: ${error.message ?? ''}`;
  const printed = tracebackInText(logTail);
  if (printed) return `${printed.type}: ${printed.message}`;
  return lastLine(logTail) || '';
}

const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// A resource that ran out, in order (bridge/diagnosis_end.py _EXHAUSTION): [kind, the error's
// words, the part of its `resources` that says how much there was, its words, the summary's
// lead, the hint's tail].
const EXHAUSTION = [
  ['host_oom', HOST_OOM_TEXT, 'memory', memoryWords, 'out of host memory',
    '; or make the job need less: a smaller batch or model, fewer DataLoader workers or a lower prefetch_factor, the data read lazily instead of held in memory'],
  ['disk_full', DISK_FULL_TEXT, 'disk', diskWords, 'disk full',
    '; the file being written is likely incomplete: delete it (a checkpoint cut short does not load)'],
];

/** The first resource of EXHAUSTION the fatal error (or, without one, the output) says ran out, else null. */
function exhaustion(error, logTail, stage, evidence) {
  const resources = isMap((error || {}).resources) ? error.resources : {};
  for (const [kind, pattern, part, words, lead, tail] of EXHAUSTION) {
    if (!says(pattern, error, logTail)) continue;
    const errFrames = errorFrames(error);
    const frames = errFrames.length ? errFrames : ((tracebackInText(logTail) || {}).frames || []);
    Object.assign(evidence, frameFields(frames));
    const had = isMap(resources[part]) ? resources[part] : {};
    evidence[part] = Object.keys(had).length ? had : null;
    const [details, advice] = words(had);
    const message = quote(messageOf(error, logTail));
    return diag(kind, `${lead}${inStage(stage)} at ${where(frames)}${details}: ${message}`, advice + tail, evidence);
  }
  return null;
}

function workerDiedHint(signal, oomKills) {
  const memory = 'lower num_workers, prefetch_factor or the batch size, or raise the memory limit';
  if (signal === 'SIGKILL' || signal === null) {
    if (oomKills) return `the kernel's OOM killer killed it (the job's memory cgroup counted ${oomKills} OOM kill(s) during the job): the workers ran out of host RAM; ${memory}`;
    if (oomKills === 0 && signal) return `the job's memory cgroup logged no OOM kill: check dmesg for the host's OOM killer and who else kills processes here; num_workers too high for the memory is the usual cause (${memory})`;
    if (signal) return `likely the OOM killer (dmesg | grep -i 'killed process') or num_workers too high for the memory: ${memory}`;
    return 'the worker exited without a word: run with DataLoader(num_workers=0) to see its error in the main process, and check dmesg for the OOM killer';
  }
  if (signal === 'SIGBUS') return 'out of shared memory (/dev/shm), which workers use to pass batches: raise it (docker run --shm-size=8g) or lower num_workers / the batch size';
  return 'a crash inside the worker (a dataset transform, an image decoder, a native extension): run with DataLoader(num_workers=0) to see it in the main process';
}

/**
 * The job's stage when it ended: where a fatal error was raised, else the innermost stage
 * still open, else the innermost stage the end unwound through (closed with status "error"
 * after the last stage began), else the last stage to close; as bridge/diagnosis_end.py
 * stage_at_end. stages: records in begin order {name, status, began, closed} (the order of
 * the begin and end messages as received).
 */
function stageAtEnd(stages, error = null) {
  if (error && error.stage && (error.fatal ?? true)) return error.stage;
  if (!stages || !stages.length) return null;
  const open = stages.filter((s) => s.status === 'running');
  if (open.length) return open[open.length - 1].name;
  if (!stages.every((s) => Number.isInteger(s.began) && Number.isInteger(s.closed))) return stages[stages.length - 1].name;
  const lastBegin = Math.max(...stages.map((s) => s.began));
  const unwound = stages.filter((s) => s.status === 'error' && s.closed > lastBegin);
  if (unwound.length) return unwound.reduce((a, b) => (b.closed < a.closed ? b : a)).name;
  return stages.reduce((a, b) => (b.closed > a.closed ? b : a)).name;
}

/**
 * Why a process ended; null for a clean success. facts (all optional): outcome, exit_code,
 * signal ("SIGSEGV" or null), error (the worker's error body), saw_bye, crash_text,
 * log_tail, stage, oom_killed, pid.
 */
function diagnoseEnd(facts) {
  const exitCode = facts.exit_code ?? null;
  const signal = facts.signal ?? null;
  const error = facts.error || null;
  const logTail = [...(facts.log_tail || [])];
  // The error knows the stage it was raised in; the client's last stage may be an outer one
  // (the inner stage closed with status "error" while the exception unwound).
  const stage = (error || {}).stage || facts.stage || null;
  const last = lastLine(logTail);
  const evidence = { exit_code: exitCode, signal, stage, last_line: last };
  // A fatal error event decides the end even when the exit status is 0; SystemExit is an
  // exit status, not an exception.
  const fatalError = Boolean(error) && Boolean(error.fatal ?? true) && error.kind !== 'system_exit';
  const endedBadly = fatalError || (exitCode !== 0 && exitCode !== null) || Boolean(signal);

  if (facts.outcome === 'cancelled') return null;
  if (endedBadly && isCudaOom(fatalError ? error : null, logTail)) {
    const printed = tracebackInText(logTail);
    const errFrames = errorFrames(error);
    const frames = errFrames.length ? errFrames : ((printed || {}).frames || []);
    const message = quote((error || {}).message || oomLine(logTail));
    Object.assign(evidence, frameFields(frames));
    return diag('cuda_oom', `CUDA out of memory${inStage(stage)} at ${where(frames)}: ${message}`,
      'lower the batch size or sequence length, enable gradient checkpointing or mixed precision, or free other jobs on the GPU (nvidia-smi)',
      evidence);
  }
  const found = endedBadly ? exhaustion(fatalError ? error : null, logTail, stage, evidence) : null;
  if (found !== null) return found;
  if (facts.oom_killed) {
    return diag('oom_killed', `killed by the kernel's out-of-memory killer${inStage(stage)} (signal ${signal || 'SIGKILL'})`,
      'the job ran out of host RAM: lower the batch size or DataLoader num_workers / prefetch, or raise the memory limit',
      { ...evidence, oom_killed: true });
  }
  if (NATIVE_SIGNALS.has(signal)) {
    const text = facts.crash_text || logTail.join('\n');
    const frames = parseStack(text, 'current');
    Object.assign(evidence, frameFields(frames));
    evidence.crash_text_present = Boolean(facts.crash_text);
    const word = SIGNAL_WORDS[signal] || signal;
    let hint = 'a crash in native code (C/C++/CUDA extension, ctypes): check that torch, CUDA and extension versions match; run with CUDA_LAUNCH_BLOCKING=1 to find the failing call';
    if (signal === 'SIGABRT') {
      hint = 'the process aborted (a C/C++ assertion, abort() or a fatal error in an extension): read the last output lines and check library versions';
    }
    return diag('native_crash', `native crash: ${signal} (${word})${inStage(stage)} at ${where(frames)}`, hint, evidence);
  }
  if (signal === 'SIGKILL') {
    return diag('killed', `killed by SIGKILL${inStage(stage)}; last output: ${last || '(none)'}`,
      'something outside the job sent SIGKILL (a user, a scheduler, a container limit, or the OOM killer when the cgroup cannot tell): check dmesg, the scheduler\'s log and memory limits',
      evidence);
  }
  if (signal) {
    return diag('killed', `terminated by ${signal}${inStage(stage)}; last output: ${last || '(none)'}`,
      `something outside the job sent ${signal}: check who stops jobs here (a scheduler, a terminal closing, a service manager)`,
      evidence);
  }
  const died = endedBadly ? workerDied(fatalError ? error : null, logTail) : null;
  if (died) {
    const errFrames = errorFrames(error);
    const frames = errFrames.length ? errFrames : ((tracebackInText(logTail) || {}).frames || []);
    Object.assign(evidence, frameFields(frames));
    Object.assign(evidence, { child_pids: died.pids, child_signal: died.signal, oom_kills: facts.oom_kills ?? null });
    const how = died.signal ? `died of ${died.signal}` : 'exited unexpectedly';
    const plural = died.pids.includes(',') ? 's' : '';
    return diag('child_killed', `a DataLoader worker (pid${plural} ${died.pids}) ${how}${inStage(stage)}; the main process failed on it at ${where(frames)}`,
      workerDiedHint(died.signal, facts.oom_kills ?? null), evidence);
  }
  if (fatalError) {
    const frames = errorFrames(error);
    Object.assign(evidence, frameFields(frames));
    evidence.type = error.type ?? null;
    const message = quote(error.message);
    const { thread } = error;
    const inThread = thread && thread !== 'MainThread' ? ` in thread ${thread}` : '';
    const fixAt = formatFrame(userFrame(frames) || (frames.length ? frames[frames.length - 1] : null));
    return diag('python_exception',
      `${error.type ?? 'Exception'}: ${message}${inStage(stage)}${inThread} at ${where(frames)}`,
      `fix the error raised at ${fixAt}; the full traceback is in the report's error field`, evidence);
  }
  if (exitCode !== 0 && exitCode !== null) {
    const printed = tracebackInText(logTail);
    if (printed && !error) {
      const { frames } = printed;
      Object.assign(evidence, frameFields(frames));
      evidence.type = printed.type;
      return diag('python_exception',
        `${printed.type}: ${quote(printed.message)}${inStage(stage)} at ${where(frames)} (from the traceback on stderr)`,
        'fix the error at the named frame; the traceback is in the log tail', evidence);
    }
    const bye = facts.bye || {};
    const byeReason = facts.bye_reason || bye.reason || null;
    let hint = 'the script chose to exit with an error status: read the last output lines for its reason';
    let reason = '';
    if (error && error.kind === 'system_exit') {
      const frames = errorFrames(error);
      Object.assign(evidence, frameFields(frames));
      const at = frames.length ? ` at ${where(frames)}` : '';
      reason = ` from sys.exit(${pyRepr(oneLine(error.message, 80))})${at}`;
    } else if (byeReason === 'sys_exit') {
      reason = ` from sys.exit(${exitCode})`;
    } else if (!facts.saw_bye) {
      reason = ' with no last words (os._exit or exit from native code)';
      hint = "the process left without Python's shutdown (os._exit, exit() in native code, a library calling _exit): search for those calls near the last output line";
    }
    return diag('exit_nonzero', `exited with status ${exitCode}${reason}${inStage(stage)}; last output: ${last || '(none)'}`,
      hint, evidence);
  }
  return null;
}

module.exports = { NATIVE_SIGNALS, diagnoseEnd, size, stageAtEnd };
