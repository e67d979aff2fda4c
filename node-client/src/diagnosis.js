'use strict';
/**
 * Diagnosis rules: from facts about a job to one answer {kind, summary, hint, evidence}.
 * Pure. A port of bridge/diagnosis.py: diagnoseEnd follows diagnose_end rule for rule (so
 * both clients give the same kind and summary for the same end); diagnoseHang ports the
 * stack rules and the kernel rules for the evidence this client gathers from /proc (main
 * thread state, wchan, syscall, CPU over the hang window, children), not the Python
 * client's sockets, I/O counters, GPU and py-spy evidence.
 */

const NATIVE_SIGNALS = new Set(['SIGSEGV', 'SIGBUS', 'SIGILL', 'SIGFPE', 'SIGABRT']);
const SIGNAL_WORDS = {
  SIGSEGV: 'segmentation fault', SIGBUS: 'bus error', SIGILL: 'illegal instruction',
  SIGFPE: 'floating point exception', SIGABRT: 'abort',
};

// --- Python stack text ----------------------------------------------------------------
// Three formats: traceback ('File "x.py", line 3, in f', innermost last), faulthandler
// ('File "x.py", line 3 in f', innermost first) and py-spy ('f (x.py:3)', innermost first).
// Every parser returns frames innermost LAST, like the protocol's error.frames.
const TB_FRAME = /^\s*File "(?<file>[^"]*)", line (?<line>\d+), in (?<func>.+?)\s*$/;
const FH_FRAME = /^\s*File "(?<file>[^"]*)", line (?<line>\d+) in (?<func>.+?)\s*$/;
const PYSPY_FRAME = /^\s+(?<func>\S[^()]*?) \((?<file>[^()]+?):(?<line>\d+)\)\s*$/;
const HEADER = /^(?:Current thread|Thread|Traceback|Stack|Process|#|---|===)|:\s*$/;

// eslint-disable-next-line no-control-regex -- \x1c-\x1e are line breaks for Python's str.splitlines
const splitlines = (text) => String(text).split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/);
const isSpace = (ch) => /\s/.test(ch);

function splitBlocks(text) {
  const blocks = [];
  let header = '';
  let lines = [];
  for (const raw of splitlines(text)) {
    if (!raw.trim()) continue;
    if (!isSpace(raw[0]) && HEADER.test(raw) && !TB_FRAME.test(raw) && !FH_FRAME.test(raw)) {
      if (lines.length || header) blocks.push([header, lines]);
      header = raw.trim();
      lines = [];
    } else {
      lines.push(raw);
    }
  }
  if (lines.length || header) blocks.push([header, lines]);
  return blocks;
}

function framesOfBlock(header, lines) {
  const frames = [];
  let innermostFirst = null;
  for (const line of lines) {
    for (const [pattern, first] of [[TB_FRAME, false], [FH_FRAME, true], [PYSPY_FRAME, true]]) {
      const m = pattern.exec(line);
      if (m) {
        frames.push({ file: m.groups.file, line: Number(m.groups.line), function: m.groups.func });
        if (innermostFirst === null) innermostFirst = first;
        break;
      }
    }
  }
  if (header.includes('most recent call first')) innermostFirst = true;
  else if (header.includes('most recent call last')) innermostFirst = false;
  if (innermostFirst) frames.reverse();
  return frames;
}

/** Frames (innermost last) of one thread: "main" (MainThread, else the last) or "current". */
function parseStack(text, prefer = 'main') {
  if (!text) return [];
  const blocks = splitBlocks(text).map(([h, ls]) => [h, framesOfBlock(h, ls)]).filter(([, f]) => f.length);
  if (!blocks.length) return [];
  if (prefer === 'current') {
    for (const [header, frames] of blocks) if (header.startsWith('Current thread')) return frames;
  }
  for (const [header, frames] of blocks) if (header.includes('MainThread')) return frames;
  return blocks[blocks.length - 1][1];
}

function shortPath(p) {
  const parts = String(p).replace(/\\/g, '/').split('/');
  return parts.length > 1 && parts[parts.length - 2] ? parts.slice(-2).join('/') : parts[parts.length - 1];
}

/** 'file:line function' with the file shortened to its last two path parts. */
function formatFrame(frame) {
  if (!frame) return 'an unknown frame';
  return `${shortPath(frame.file ?? '?')}:${frame.line ?? '?'} ${frame.function ?? '?'}`;
}

const LIBRARY_MARKERS = ['/lib/python', 'site-packages', 'dist-packages', '<frozen', '/worker/', '/bridge/', '<string>'];

function isLibraryFrame(frame) {
  const p = String(frame.file ?? '').replace(/\\/g, '/');
  return LIBRARY_MARKERS.some((m) => p.includes(m));
}

/** The innermost frame in the user's own code (not the stdlib, site-packages, us). */
function userFrame(frames) {
  for (let i = frames.length - 1; i >= 0; i--) if (!isLibraryFrame(frames[i])) return frames[i];
  return null;
}

function where(frames) {
  if (!frames.length) return 'an unknown frame (no Python stack)';
  const inner = frames[frames.length - 1];
  const mine = userFrame(frames);
  if (mine === null || mine === inner) return formatFrame(inner);
  return `${formatFrame(inner)} (from ${formatFrame(mine)})`;
}

function frameFields(frames) {
  const inner = frames.length ? frames[frames.length - 1] : null;
  const mine = userFrame(frames);
  return { frame: inner ? formatFrame(inner) : null, user_frame: mine ? formatFrame(mine) : null };
}

function moduleName(p) {
  const parts = String(p).replace(/\\/g, '/').split('/');
  const stem = parts[parts.length - 1];
  if ((stem === '__init__.py' || stem === '__init__.pyc') && parts.length > 1) return parts[parts.length - 2];
  return stem.replace(/\.(py|pyc|so|pyd)$/, '');
}

/** The module being imported when the stack is inside importlib, else null. */
function importingModule(frames) {
  let inImport = false;
  let name = null;
  for (const frame of frames) {
    const fname = String(frame.file ?? '');
    if (fname.includes('importlib._bootstrap') || fname.includes('importlib/_bootstrap')) {
      inImport = true;
      continue;
    }
    if (inImport && frame.function === '<module>') name = moduleName(fname);
  }
  if (inImport && name === null) return 'an unknown module';
  return name;
}

// --- ends -----------------------------------------------------------------------------
const CUDA_OOM_TEXT = /CUDA out of memory|CUDA error: out of memory|OutOfMemoryError/i;
const TB_LAST_LINE = /^(?<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(?<msg>.*))?$/;

function oneLine(text, limit = 200) {
  const s = String(text ?? '').split(/\s+/).filter(Boolean).join(' ');
  return s.length <= limit ? s : `${s.slice(0, limit - 3)}...`;
}

function lastLine(logTail) {
  const lines = [...(logTail || [])];
  for (let i = lines.length - 1; i >= 0; i--) if (String(lines[i]).trim()) return oneLine(lines[i]);
  return null;
}

/** The last Python traceback printed in output lines: {type, message, frames}, or null. */
function tracebackInText(lines) {
  const all = (lines || []).map(String);
  let start = null;
  for (let i = all.length - 1; i >= 0; i--) {
    if (all[i].startsWith('Traceback (most recent call last)')) { start = i; break; }
  }
  if (start === null) return null;
  const frames = [];
  let type = null;
  let message = '';
  for (const line of all.slice(start + 1)) {
    const m = TB_FRAME.exec(line);
    if (m) {
      frames.push({ file: m.groups.file, line: Number(m.groups.line), function: m.groups.func });
      continue;
    }
    if (line.startsWith(' ') || line.startsWith('\t') || !line.trim()) continue;
    const t = TB_LAST_LINE.exec(line.trim());
    if (t) {
      type = t.groups.type;
      message = t.groups.msg || '';
      break;
    }
  }
  if (type === null) return null;
  return { type, message, frames };
}

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
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = '';
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (ch === '\\' || ch === quote) out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (cp >= 0xd800 && cp <= 0xdfff) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return quote + out + quote;
}

const inStage = (stage) => (stage ? ` in stage '${stage}'` : '');

/**
 * Name the progress bar that stopped (zero-code tqdm bars carry their description, e.g. a
 * huggingface_hub download's file name); as bridge/diagnosis.py _stuck_bar.
 */
function stuckBar(progress) {
  const metrics = (progress && progress.metrics) || {};
  const { bar } = metrics;
  if (!bar) return '';
  const total = progress.total ?? null;
  const count = total !== null ? `${progress.step}/${total}` : `${progress.step}`;
  return ` (its bar '${bar}' stopped at ${count} ${metrics.unit || 'it'})`;
}

function oomLine(logTail) {
  for (let i = logTail.length - 1; i >= 0; i--) if (CUDA_OOM_TEXT.test(String(logTail[i]))) return String(logTail[i]);
  return '';
}

function diag(kind, summary, hint, evidence) {
  return { kind, summary: oneLine(summary, 400), hint: oneLine(hint, 300), evidence };
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
    const message = oneLine((error || {}).message || oomLine(logTail), 160);
    Object.assign(evidence, frameFields(frames));
    return diag('cuda_oom', `CUDA out of memory${inStage(stage)} at ${where(frames)}: ${message}`,
      'lower the batch size or sequence length, enable gradient checkpointing or mixed precision, or free other jobs on the GPU (nvidia-smi)',
      evidence);
  }
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
  if (fatalError) {
    const frames = errorFrames(error);
    Object.assign(evidence, frameFields(frames));
    evidence.type = error.type ?? null;
    const message = oneLine(error.message, 160);
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
        `${printed.type}: ${oneLine(printed.message, 160)}${inStage(stage)} at ${where(frames)} (from the traceback on stderr)`,
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

// --- hangs ----------------------------------------------------------------------------
const SLEEP_SYSCALLS = new Set(['nanosleep', 'clock_nanosleep']);
const LOCK_SYSCALLS = new Set(['futex', 'futex_waitv']);
const WAIT_SYSCALLS = new Set(['wait4', 'waitid', 'waitpid']);
const POLL_SYSCALLS = new Set(['poll', 'ppoll', 'select', 'pselect6', 'epoll_wait', 'epoll_pwait', 'epoll_pwait2']);
const READ_SYSCALLS = new Set(['read', 'readv', 'pread64', 'preadv', 'preadv2', 'recvfrom', 'recvmsg', 'recvmmsg',
  'connect', 'accept', 'accept4', 'write', 'writev', 'sendto', 'sendmsg', 'pwrite64', 'fsync', 'fdatasync']);
const NET_WCHAN = /sk_wait|tcp_|inet_|sock_|wait_woken|unix_stream/;
const IO_WCHAN = /io_schedule|folio_wait|wait_on_page|nfs|fuse|blk|jbd2|ext4|xfs|btrfs/;
const LOCK_FUNCS = new Set(['acquire', 'wait', '_wait_for_tstate_lock', 'join', 'get', 'put', '__enter__']);
const NET_FILES = ['socket.py', 'ssl.py', 'http/client.py', 'urllib3', 'requests', 'httpx', 'huggingface_hub', 'aiohttp', 'selectors.py', 'asyncio'];
const CHILD_FILES = ['subprocess.py', 'multiprocessing', 'popen_fork.py', 'torch/utils/data'];
const CHILD_FUNCS = new Set(['wait', '_wait', 'poll', '_try_wait', 'communicate', 'join', 'recv', '_recv', '_recv_bytes', 'get']);
const NET_FUNCS = new Set(['recv', 'recv_into', 'readinto', 'connect', 'create_connection', 'getaddrinfo', 'accept']);
const BEACON_SILENT = new Set(['heartbeat', 'heartbeat_silence']);
const CPU_BUSY = 0.5; // fraction of one core over the window: the main work is computing
// As bridge/diagnosis.py: on a loaded machine a spinning thread gets a small share of a core,
// and a spinning Python thread also waits for the GIL (a futex, state S) whenever the beacon
// runs; but a thread blocked in a call is never runnable. So the samples decide.
const RUNNABLE_BUSY = 0.3; // fraction of state samples in R
const CPU_SOME = 0.05;

const mainOf = (evidence) => evidence.main_thread || {};

function remoteOf(conn) {
  const raddr = conn.raddr || '';
  if (Array.isArray(raddr) && raddr.length === 2) {
    const [host, port] = raddr;
    return String(host).includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  }
  return String(raddr) || 'an unknown peer';
}

/** The socket the main thread waits on: the one whose fd is the syscall's fd, else the one connection with a remote end. */
function blockingSocket(evidence) {
  const sockets = (evidence.sockets || []).filter((x) => x.raddr && (!Array.isArray(x.raddr) || x.raddr.length));
  const { fd } = mainOf(evidence);
  for (const sock of sockets) if (fd !== undefined && fd !== null && sock.fd === fd) return sock;
  const live = sockets.filter((x) => ['ESTABLISHED', 'SYN_SENT', 'CLOSE_WAIT'].includes(x.status)
    && [null, undefined, evidence.pid].includes(x.pid));
  return live.length ? live[0] : (sockets.length ? sockets[0] : null);
}

function childToName(evidence) {
  const children = evidence.children || [];
  for (const child of children) { // a stopped or dead child is the likely culprit
    if (['stopped', 'tracing-stop', 'zombie', 'dead', 'disk-sleep'].includes(child.status)) return child;
  }
  return children.length ? children[0] : null;
}

const describeChild = (child) => `child pid ${child.pid ?? null} (${child.name || '?'}, ${child.status || '?'})`;

/** The OS evidence for the report, with long lists cut (a fork bomb has many children). */
function trim(evidence, items = 10) {
  const out = {};
  for (const [k, v] of Object.entries(evidence)) if (k !== 'py_spy') out[k] = v;
  for (const key of ['sockets', 'children']) {
    if (Array.isArray(out[key]) && out[key].length > items) {
      out[`${key}_total`] = out[key].length;
      out[key] = out[key].slice(0, items);
    }
  }
  return out;
}

/** A hang kind from the Python stack alone. */
function stackSays(frames) {
  if (!frames.length) return null;
  const inner = frames[frames.length - 1];
  const func = String(inner.function ?? '');
  const p = String(inner.file ?? '').replace(/\\/g, '/');
  const files = frames.slice(-4).map((f) => String(f.file ?? '')).join(' ');
  if (func === 'sleep') return 'sleeping';
  if (CHILD_FILES.some((k) => files.includes(k)) && CHILD_FUNCS.has(func)) return 'child_wait';
  if (NET_FILES.some((k) => p.includes(k)) || NET_FUNCS.has(func)) return 'network_wait';
  if (LOCK_FUNCS.has(func) && (p.includes('threading.py') || p.includes('queue.py') || !isLibraryFrame(inner))) return 'lock_wait';
  return null;
}

/** A hang kind from outside the interpreter: state, kernel wait, CPU. */
function kernelSays(evidence) {
  if (!evidence || evidence.alive === false) return null;
  const main = evidence.main_thread || {};
  const { status } = evidence;
  const syscall = main.syscall || '';
  const wchan = main.wchan || '';
  const target = String(main.fd_target || '');
  const cpu = evidence.cpu_fraction ?? null;
  if (status === 'stopped' || status === 'tracing-stop') return 'stopped';
  if (status === 'disk-sleep' || IO_WCHAN.test(wchan)) return 'io_wait';
  const runnable = main.runnable_fraction ?? null;
  // "running" in /proc/.../syscall: caught executing user code, not waiting in the kernel.
  const inUserCode = ['', 'running'].includes(syscall) || [null, undefined, 'R'].includes(main.state);
  const spinning = runnable !== null
    // The samples over the window judge; the one syscall read at the end may well catch a
    // spinning thread waiting for the GIL (a futex).
    ? (cpu || 0) >= CPU_SOME && (runnable >= RUNNABLE_BUSY || (inUserCode && runnable > 0))
    : cpu !== null && cpu >= CPU_BUSY && inUserCode;
  if (spinning) return 'cpu_bound';
  if (WAIT_SYSCALLS.has(syscall) || wchan === 'do_wait' || wchan === 'kernel_wait4') return 'child_wait';
  if (SLEEP_SYSCALLS.has(syscall) || wchan.includes('nanosleep')) return 'sleeping';
  if (LOCK_SYSCALLS.has(syscall) || wchan.startsWith('futex')) return 'lock_wait';
  if (target.startsWith('socket:') || NET_WCHAN.test(wchan)) return 'network_wait';
  if (target.startsWith('pipe:') || wchan.includes('pipe')) return (evidence.children || []).length ? 'child_wait' : 'io_wait';
  if (POLL_SYSCALLS.has(syscall)) {
    if (blockingSocket(evidence)) return 'network_wait';
    return (evidence.children || []).length ? 'child_wait' : 'io_wait';
  }
  if (READ_SYSCALLS.has(syscall) && target.startsWith('/')) return 'io_wait';
  if (cpu !== null && cpu >= CPU_BUSY) return 'cpu_bound';
  return null;
}

function hangKind(reason, frames, evidence, sawHello, pythonSilent = false) {
  const kernel = kernelSays(evidence);
  const stack = stackSays(frames);
  if (kernel === 'stopped') return 'stopped';
  if ((BEACON_SILENT.has(reason) || pythonSilent) && sawHello && evidence.alive !== false) return 'gil_held';
  if (importingModule(frames)) return 'import_hang';
  if (!sawHello && reason === 'startup') return 'startup';
  if (kernel === 'lock_wait' && ['child_wait', 'network_wait', 'sleeping'].includes(stack)) return stack;
  if ((kernel === 'child_wait' || kernel === 'io_wait') && stack === 'network_wait') return stack;
  if (kernel === 'io_wait' && stack === 'child_wait') return stack;
  return kernel || stack || 'unknown';
}

// A beat sent just before the hang says ~0 s: a number that small informs nobody.
const idleText = (facts) => (typeof facts.idle_s === 'number' && facts.idle_s >= 1 ? ` for ${pyRound0(facts.idle_s)} s` : '');

/** Python's f"{x:.0f}": round half to even. */
function pyRound0(x) {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * Why a job that is still alive makes no progress. Always returns a diagnosis.
 * facts: reason, stage, stages, idle_s, stack, stacks, saw_hello, evidence.
 */
function diagnoseHang(facts) {
  const reason = facts.reason || 'stall';
  const evidence = { ...(facts.evidence || {}) };
  const sawHello = facts.saw_hello === undefined ? true : Boolean(facts.saw_hello);
  let frames = parseStack(facts.stack);
  if (!frames.length) frames = parseStack(facts.stacks);
  if (!frames.length) frames = parseStack(evidence.py_spy);
  const stage = facts.stage ?? null;
  const kind = hangKind(reason, frames, evidence, sawHello, Boolean(facts.python_silent));
  const at = where(frames);
  const idle = idleText(facts);
  const main = evidence.main_thread || {};
  const extra = {
    reason, stage, stages: facts.stages ?? null, idle_s: facts.idle_s ?? null,
    kernel_wait: main.wchan || main.syscall || null, cpu_fraction: evidence.cpu_fraction ?? null,
    ...frameFields(frames), os: trim(evidence),
  };
  let whereStage = inStage(stage) + stuckBar(facts.progress);
  if (reason === 'after_bye') whereStage += ' after the script said bye (a non-daemon thread or atexit handler)';
  switch (kind) {
    case 'network_wait': {
      const sock = blockingSocket(evidence);
      const remote = sock ? remoteOf(sock) : 'a remote host';
      extra.remote = sock ? remote : null;
      extra.socket_status = sock ? (sock.status ?? null) : null;
      const verb = sock && sock.status === 'SYN_SENT' ? 'connecting to' : 'reading from';
      return diag(kind, `blocked ${verb} ${remote}${idle}${whereStage} at ${at}`,
        `blocked ${verb} ${remote}${idle}: check HTTPS_PROXY / HF_ENDPOINT, the server, or go offline (HF_HUB_OFFLINE=1); put a timeout on the call`, extra);
    }
    case 'child_wait': {
      const child = childToName(evidence);
      extra.child = child;
      const who = child ? describeChild(child) : 'a child process';
      let stateHint;
      if (child && ['stopped', 'tracing-stop'].includes(child.status)) {
        stateHint = `${who} is stopped (SIGSTOP or a debugger): resume it with kill -CONT ${child.pid ?? null} or find who stopped it`;
      } else if (child && child.status === 'zombie') {
        stateHint = `${who} has exited but nobody collected it: the worker died; check its output`;
      } else {
        stateHint = `${who} is not answering: check its stack (py-spy dump --pid ${child ? child.pid ?? null : '?'}) or use DataLoader(num_workers=0) to rule it out`;
      }
      return diag(kind, `waiting${idle} on ${who}${whereStage} at ${at}`, stateHint, extra);
    }
    case 'import_hang': {
      const module = importingModule(frames);
      extra.module = module;
      const never = sawHello ? '' : '; never said hello';
      return diag(kind, `stuck importing ${module}${idle}${never}${whereStage} at ${at}`,
        `the import of ${module} does not finish: run python -X importtime -c 'import ${module}' to see where, and check the network, CUDA init and lock files it may wait on`, extra);
    }
    case 'startup': {
      const what = kernelSays(evidence) || stackSays(frames);
      extra.blocking = what;
      const doing = what ? ` (main thread ${what.replace(/_/g, ' ')})` : '';
      const atText = frames.length ? ` at ${at}` : '';
      const look = frames.length ? 'check what the named frame waits on'
        : 'install py-spy (pip install py-spy) to see the frame it is stuck in';
      return diag(kind, `never said hello${idle}${doing}${atText}`,
        `the script did not reach the worker's hello: from trainbridge import worker (or run it under trainbridge's zero-code mode) before heavy imports, and ${look}`, extra);
    }
    case 'gil_held': {
      const busy = evidence.cpu_fraction;
      const doing = busy !== null && busy !== undefined && busy >= CPU_BUSY ? 'spinning in native code' : 'blocked in native code';
      return diag(kind, `beacon silent${idle} while the process lives: the GIL is held, ${doing}${whereStage} at ${at}`,
        'a C extension or ctypes call holds the GIL: release it around long calls (ctypes.CDLL instead of PyDLL, Py_BEGIN_ALLOW_THREADS), or check the named frame', extra);
    }
    case 'lock_wait':
      return diag(kind, `waiting on a lock${idle}${whereStage} at ${at}`,
        'a lock, queue or join that nobody releases: look for a deadlock (two locks taken in opposite order, a thread that died holding one)', extra);
    case 'sleeping':
      return diag(kind, `sleeping${idle}${whereStage} at ${at}`,
        'the main thread keeps sleeping: check retry/backoff or polling loops at the named frame', extra);
    case 'cpu_bound': {
      const cpu = evidence.cpu_fraction;
      const pct = typeof cpu === 'number' ? `${(cpu * 100).toFixed(0)}%` : '?';
      return diag(kind, `computing without progress${idle} (CPU ${pct})${whereStage} at ${at}`,
        'busy on the CPU but not reporting progress: an infinite loop, or slow preprocessing; report progress inside it or profile the named frame', extra);
    }
    case 'io_wait': {
      extra.file = main.fd_target ?? null;
      const on = main.fd_target ? ` on ${main.fd_target}` : '';
      return diag(kind, `waiting for I/O${on}${idle}${whereStage} at ${at}`,
        'disk or filesystem is slow or stuck (network mount, full disk, a FIFO): check the path and the mount', extra);
    }
    case 'stopped':
      return diag(kind, `the process is stopped (SIGSTOP or a debugger)${idle}${whereStage} at ${at}`,
        `resume it with kill -CONT ${evidence.pid ?? '<pid>'} or find who stopped it`, extra);
    default:
      return diag('unknown', `no progress${idle}${whereStage} at ${at}; cause not recognised`,
        'read the stacks in the report; py-spy dump --pid <pid> shows native frames', extra);
  }
}

module.exports = {
  NATIVE_SIGNALS, parseStack, formatFrame, where, userFrame, tracebackInText, importingModule,
  diagnoseEnd, diagnoseHang,
};
