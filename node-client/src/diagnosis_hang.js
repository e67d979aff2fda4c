'use strict';
/**
 * Diagnosis, part 3: hang verdicts (pure) -- why a live job makes no progress. A port of
 * bridge/diagnosis_hang.py rule for rule (vectors/diagnosis.json holds the shared cases).
 */

const {
  isLibraryFrame, where, frameFields, importingModule, parseStack, inStage, diag, threadStacks,
} = require('./diagnosis_stack.js');

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
// As bridge/diagnosis_hang.py: on a loaded machine a spinning thread gets a small share of a core,
// and a spinning Python thread also waits for the GIL (a futex, state S) whenever the beacon
// runs; but a thread blocked in a call is never runnable. So the samples decide.
const RUNNABLE_BUSY = 0.3; // fraction of state samples in R
const CPU_SOME = 0.05;
// Runnable in this share of at least WAIT_MIN_SAMPLES samples: the main thread never blocked
// over the window, so it is computing even when the machine gave it no CPU at all (as Python).
const RUNNABLE_ALWAYS = 0.9;
// Margins against sampling jitter (issue 20), as bridge/diagnosis_hang.py: the two clients
// sample the same process at different moments, so no verdict may turn on one sample.
const RUNNABLE_SOME = 0.15; // below this share of R samples the main thread is not spinning
const WAIT_MAJORITY = 0.6; // share of samples in one kernel wait for that wait to decide
const WAIT_MIN_SAMPLES = 5; // fewer samples than this decide nothing
const POLL_WCHAN = /poll_schedule_timeout|do_select|do_sys_poll|ep_poll/;
const GPU_BUSY = 50; // percent utilisation: the GPU is the thing that is busy
const IO_BUSY_BYTES = 1 << 20; // bytes per window that count as "doing I/O"

const mainOf = (evidence) => evidence.main_thread || {};

/**
 * What to do when no process said hello in time (bridge/diagnosis_hang.py _startup_hint). In
 * zero-code mode every Python process says it as it starts: a Python frame means it was stuck
 * before that. A tree with no Python, or one that works, is never a startup hang
 * (look.js): without a frame, a Python process started and then did nothing.
 */
function startupHint(frames) {
  if (frames.length) {
    return "the process was stuck before trainbridge's hello (in zero-code mode it comes as Python starts; "
      + 'with --no-zero-code at `from trainbridge import worker`): check what the named frame waits on';
  }
  return 'a Python process of the command started and then did nothing (no CPU, I/O or output) until the startup '
    + "deadline, before trainbridge's hello: to see where it is stuck, install py-spy (pip install py-spy); if it waits "
    + 'on purpose, raise --startup-timeout (startup_timeout), or 0 to turn it off';
}

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

/** The job process at the other end of the AF_UNIX socket the main thread reads, if any. */
function peerChild(evidence) {
  const peer = (evidence.unix_peer || {}).pid;
  if (peer === undefined || peer === null || peer === evidence.pid) return null;
  for (const child of evidence.children || []) if (child.pid === peer) return child;
  return null;
}

function childToName(evidence) {
  const peer = peerChild(evidence);
  if (peer) return peer;
  const children = evidence.children || [];
  for (const child of children) { // a stopped or dead child is the likely culprit
    if (['stopped', 'tracing-stop', 'zombie', 'dead', 'disk-sleep'].includes(child.status)) return child;
  }
  return children.length ? children[0] : null;
}

const DATALOADER_WORKER = 'pt_data_worker'; // /proc/<pid>/comm of a torch DataLoader worker

/** 'DataLoader worker N' for a torch DataLoader worker (N: its place by start time), else null. */
function childRole(child, children) {
  if (child.name !== DATALOADER_WORKER) return null;
  const siblings = children.filter((c) => c.name === DATALOADER_WORKER && c.ppid === child.ppid)
    .sort((a, b) => ((a.started || 0) - (b.started || 0)) || ((a.pid || 0) - (b.pid || 0)));
  const i = siblings.findIndex((c) => c.pid === child.pid);
  return i >= 0 ? `DataLoader worker ${i}` : null;
}

/** stopped / exited / spinning / in disk I/O / sleeping, from its state and CPU. */
function childState(child) {
  const { status } = child;
  if (status === 'stopped' || status === 'tracing-stop') return 'stopped';
  if (['zombie', 'dead', 'gone'].includes(status)) return 'exited';
  if (status === 'running' || (child.cpu_fraction || 0) >= CPU_BUSY) return 'spinning';
  if (status === 'disk-sleep') return 'in disk I/O';
  return 'sleeping';
}

function describeChild(child, children = []) {
  const role = childRole(child, children);
  if (role) return `${role} (pid ${child.pid ?? null}, ${childState(child)})`;
  return `child pid ${child.pid ?? null} (${child.name || '?'}, ${child.status || '?'})`;
}

/** The OS evidence for the report, with long lists cut (a fork bomb has many children). */
const KERNEL_FRAMES = 3; // innermost kernel functions named for a child with no Python stack

/**
 * Where the child a job waits on is itself (as bridge/diagnosis_hang.py child_stack): its own
 * Python stack (its dump_stacks answer, else py-spy's dump from the evidence), else its kernel
 * stack or wchan. {source, frame, kernel} or null.
 */
function childStack(child, processStacks) {
  if (!child) return null;
  for (const [source, text] of [['dump_stacks', (processStacks || {})[String(child.pid)]], ['py-spy', child.py_stack]]) {
    const frames = typeof text === 'string' ? parseStack(text) : [];
    if (frames.length) return { source, frame: where(frames), kernel: null };
  }
  const kernel = (child.kernel_stack || []).filter((f) => typeof f === 'string' && f);
  if (kernel.length) return { source: 'kernel', frame: null, kernel: kernel.slice(0, KERNEL_FRAMES) };
  const { wchan } = child;
  if (typeof wchan === 'string' && wchan !== '' && wchan !== '0') return { source: 'wchan', frame: null, kernel: [wchan] };
  return null;
}

function childStackText(stack) {
  if (!stack) return '';
  return stack.frame ? `, itself at ${stack.frame}` : `, itself in the kernel at ${stack.kernel.join(' <- ')}`;
}

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
  // A select under multiprocessing.connection.wait (a DataLoader's data queue) waits for a
  // child, not for a network.
  if (CHILD_FILES.some((k) => files.includes(k)) && (CHILD_FUNCS.has(func) || p.includes('selectors.py'))) return 'child_wait';
  if (NET_FILES.some((k) => p.includes(k)) || NET_FUNCS.has(func)) return 'network_wait';
  if (LOCK_FUNCS.has(func) && (p.includes('threading.py') || p.includes('queue.py') || !isLibraryFrame(inner))) return 'lock_wait';
  return null;
}

/** How many state samples of the main thread the window took. */
function sampleCount(main) {
  return Object.values(main.wait_samples || {}).filter(Number.isInteger).reduce((a, b) => a + b, 0);
}

/** The kernel wait seen in >= WAIT_MAJORITY of >= WAIT_MIN_SAMPLES samples, else null. */
function dominantWait(main) {
  const samples = main.wait_samples || {};
  const total = sampleCount(main);
  if (total < WAIT_MIN_SAMPLES) return null;
  for (const wait of Object.keys(samples).sort()) {
    const n = samples[wait];
    if (!['running', 'unknown'].includes(wait) && Number.isInteger(n) && n >= WAIT_MAJORITY * total) return wait;
  }
  return null;
}

/** A hang kind from outside the interpreter: state, kernel wait, CPU, I/O, GPU. */
function kernelSays(evidence) {
  if (!evidence || evidence.alive === false) return null;
  const main = evidence.main_thread || {};
  const { status } = evidence;
  let syscall = main.syscall || '';
  let wchan = main.wchan || '';
  let target = String(main.fd_target || '');
  const waited = dominantWait(main);
  if (waited !== null && waited !== wchan) {
    // The one read at the end disagrees with most samples over the window: the samples
    // decide, and the end read's syscall and fd no longer describe the wait.
    [syscall, wchan, target] = ['', waited, ''];
  }
  const cpu = evidence.cpu_fraction ?? null;
  if (status === 'stopped' || status === 'tracing-stop') return 'stopped';
  const gpus = (evidence.gpu || []).filter((g) => g && typeof g === 'object' && !Array.isArray(g));
  if (gpus.some((g) => (g.util_percent || 0) >= GPU_BUSY && (g.used_by_job ?? true))) return 'gpu_busy';
  if (status === 'disk-sleep' || IO_WCHAN.test(wchan)) return 'io_wait';
  const runnable = main.runnable_fraction ?? null;
  // "running" in /proc/.../syscall: caught executing user code, not waiting in the kernel.
  const inUserCode = ['', 'running'].includes(syscall) || [null, undefined, 'R'].includes(main.state);
  const spinning = runnable !== null
    // The samples over the window judge; the one syscall read at the end may well catch a
    // spinning thread waiting for the GIL (a futex).
    // Margins (issue 20): one or two runnable samples are not a loop; below RUNNABLE_BUSY a
    // blocking wait that most samples saw decides.
    ? (runnable >= RUNNABLE_ALWAYS && sampleCount(main) >= WAIT_MIN_SAMPLES)
      || ((cpu || 0) >= CPU_SOME && (runnable >= RUNNABLE_BUSY || (inUserCode && runnable >= RUNNABLE_SOME && waited === null)))
    : cpu !== null && cpu >= CPU_BUSY && inUserCode;
  if (spinning) return 'cpu_bound';
  if (WAIT_SYSCALLS.has(syscall) || wchan === 'do_wait' || wchan === 'kernel_wait4') return 'child_wait';
  if (SLEEP_SYSCALLS.has(syscall) || wchan.includes('nanosleep')) return 'sleeping';
  if (LOCK_SYSCALLS.has(syscall) || wchan.startsWith('futex')) return 'lock_wait';
  // A local socket (socketpair, multiprocessing connection) into the job's own tree is a
  // wait on that process, not on a network (issue 12: a stopped DataLoader worker was
  // blamed on the proxy).
  if ((main.fd_family === 'unix' || wchan.startsWith('unix_')) && (peerChild(evidence) || (evidence.children || []).length)) return 'child_wait';
  if (target.startsWith('socket:') || NET_WCHAN.test(wchan)) return 'network_wait';
  if (target.startsWith('pipe:') || wchan.includes('pipe')) return (evidence.children || []).length ? 'child_wait' : 'io_wait';
  if (POLL_SYSCALLS.has(syscall) || POLL_WCHAN.test(wchan)) {
    if (blockingSocket(evidence)) return 'network_wait';
    return (evidence.children || []).length ? 'child_wait' : 'io_wait';
  }
  if (READ_SYSCALLS.has(syscall) && target.startsWith('/')) return 'io_wait';
  const io = evidence.io_delta || {};
  if ((io.read_bytes || 0) + (io.write_bytes || 0) >= IO_BUSY_BYTES) return 'io_wait';
  if (cpu !== null && cpu >= CPU_BUSY) return 'cpu_bound';
  return null;
}

// A main thread waiting for another process's file lock: blocked in the kernel on it, or a
// poll (filelock's try-and-sleep). One that waits on a child, a socket or a GPU only happens
// to have a locked file open (bridge/diagnosis_hang.py _file_lock).
const NOT_A_LOCK_POLL = new Set(['child_wait', 'network_wait', 'gpu_busy', 'stopped']);
const LOCK_CALLS = { FLOCK: ' (flock)', POSIX: ' (fcntl)', OFDLCK: ' (fcntl, open file)' };

/** The file lock the main thread waits for (src/filelocks.js), or null. */
function fileLock(evidence, kernel, stack) {
  const locks = (evidence.file_locks || []).filter((l) => l && typeof l === 'object' && !Array.isArray(l));
  if (!locks.length) return null;
  if (locks[0].blocked) return locks[0]; // queued for it in the kernel: nothing else to weigh
  if (NOT_A_LOCK_POLL.has(kernel) || NOT_A_LOCK_POLL.has(stack)) return null;
  return locks[0];
}

/** 'pid 812 (python serve.py, sleeping)', or 'the job's own process pid 812 (...)'. */
function processWords(peer) {
  const facts = [peer.cmd, peer.state].filter(Boolean).join(', ');
  return `${peer.in_job ? "the job's own process " : ''}pid ${peer.pid}${facts ? ` (${facts})` : ''}`;
}

/** 'pid 812 (python prefetch.py, sleeping)', the job's own or another's; short: 'pid 812'. */
function lockHolder(lock, short = false) {
  const pid = lock.holder_pid ?? null;
  if (pid === null) return short ? 'another process' : "another process's open file (its pid is not known)";
  const facts = [lock.holder_cmd, lock.holder_state].filter(Boolean).join(', ');
  return `${lock.in_job ? "the job's own process " : ''}pid ${pid}${facts && !short ? ` (${facts})` : ''}`;
}

function hangKind(reason, frames, evidence, sawHello, loaded = false, pythonSilent = false) {
  const kernel = kernelSays(evidence);
  const stack = stackSays(frames);
  if (kernel === 'stopped') return 'stopped';
  // (loaded: the worker was imported but its beacon never spoke: issue 12 item 4;
  // pythonSilent: neither dump path answered, only the native SIGUSR2 one)
  if ((BEACON_SILENT.has(reason) || pythonSilent) && (sawHello || loaded) && evidence.alive !== false) return 'gil_held';
  if (importingModule(frames)) return 'import_hang';
  if (!sawHello && reason === 'startup') return 'startup';
  if (fileLock(evidence, kernel, stack) !== null) return 'file_lock_wait';
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
 * facts: reason, stage, stages, idle_s, stack, stacks, saw_hello, python_silent, evidence.
 */
// The wait chain inside the process (issue 32 item 4): a main thread waiting on a lock, a
// queue, an event or a join waits for another thread of the script. Found blocked on a socket
// or a child, that thread is the chain's end (bridge/diagnosis_hang.py _waited_thread).
const THREAD_NAME = /^Thread 0x[0-9a-fA-F]+ "([^"]*)"/;
const CHAIN_ENDS = ['network_wait', 'child_wait']; // in the order one is preferred

function waitedThread(stacks) {
  let best = null;
  for (const [header, frames] of threadStacks(typeof stacks === 'string' ? stacks : null)) {
    // the in-band dump's threads only (named: faulthandler's cannot tell the worker's from the script's)
    const named = THREAD_NAME.exec(header);
    const name = named ? named[1] : null;
    if (name === null || name === '' || name === 'MainThread' || name.startsWith('trainbridge-')) continue;
    const kind = stackSays(frames);
    if (CHAIN_ENDS.includes(kind) && (best === null || CHAIN_ENDS.indexOf(kind) < CHAIN_ENDS.indexOf(best.kind))) {
      best = { thread: name, frames, kind };
    }
  }
  return best;
}

function diagnoseHang(facts) {
  const reason = facts.reason || 'stall';
  const evidence = { ...(facts.evidence || {}) };
  const sawHello = facts.saw_hello === undefined ? true : Boolean(facts.saw_hello);
  let frames = facts.frames || []; // a thread's frames already read (the wait chain, below)
  if (!frames.length) frames = parseStack(facts.stack);
  if (!frames.length) frames = parseStack(facts.stacks);
  if (!frames.length) frames = parseStack(evidence.py_spy);
  const stage = facts.stage ?? null;
  const loaded = Boolean(facts.worker_loaded);
  const kind = hangKind(reason, frames, evidence, sawHello, loaded, Boolean(facts.python_silent));
  const at = where(frames);
  const end = kind === 'lock_wait' ? waitedThread(facts.stacks) : null;
  if (end !== null) {
    // The verdict of the thread waited for: its own stack, and none of the main thread's kernel
    // facts (they describe the main thread's futex)
    const { main_thread: _main, ...rest } = evidence;
    const found = diagnoseHang({ ...facts, stack: null, stacks: null, frames: end.frames, evidence: rest });
    // the call the script made to wait (join, get, wait): below its own innermost frame
    const own = frames.map((f, i) => (isLibraryFrame(f) ? -1 : i)).filter((i) => i >= 0);
    const below = own.length && own[own.length - 1] + 1 < frames.length ? own[own.length - 1] + 1 : frames.length - 1;
    const via = frames.length ? String(frames[below].function) : 'a lock';
    found.evidence.waits_for = { thread: end.thread, via, at };
    return diag(found.kind, `${found.summary}, in thread '${end.thread}'; the main thread waits for it (${via}) at ${at}`, found.hint, found.evidence);
  }
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
      const peer = (sock || {}).peer;
      if (peer && typeof peer === 'object' && peer.pid) {
        // the end of the chain is a process on this machine: name it, and what to do there
        extra.peer = peer;
        return diag(kind, `blocked ${verb} ${remote}${idle}, served by ${processWords(peer)}${whereStage} at ${at}`,
          `the local server, pid ${peer.pid}, does not answer: look at its stack (py-spy dump --pid ${peer.pid}), restart it, or put a timeout on the call`, extra);
      }
      return diag(kind, `blocked ${verb} ${remote}${idle}${whereStage} at ${at}`,
        `blocked ${verb} ${remote}${idle}: check HTTPS_PROXY / HF_ENDPOINT, the server, or go offline (HF_HUB_OFFLINE=1); put a timeout on the call`, extra);
    }
    case 'child_wait': {
      const child = childToName(evidence);
      extra.child = child;
      const children = evidence.children || [];
      const who = child ? describeChild(child, children) : 'a child process';
      const role = child ? childRole(child, children) : null;
      extra.child_role = role;
      extra.via = child !== null && child === peerChild(evidence) ? 'unix socket' : null;
      // The hint says the state in its own words: name the child without it.
      const named = role ? `${role} (pid ${child.pid ?? null})` : who;
      let stateHint;
      if (child && ['stopped', 'tracing-stop'].includes(child.status)) {
        stateHint = `${named} is stopped (SIGSTOP or a debugger): resume it with kill -CONT ${child.pid ?? null} or find who stopped it`;
      } else if (child && child.status === 'zombie') {
        stateHint = `${named} has exited but nobody collected it: the worker died; check its output`;
      } else if (role && childState(child) === 'spinning') {
        stateHint = `${named} is busy computing: a slow or endless __getitem__ / collate_fn in the dataset; profile it (py-spy dump --pid ${child.pid ?? null}) or use DataLoader(num_workers=0) to run it in the main process`;
      } else {
        stateHint = `${named} is not answering: check its stack (py-spy dump --pid ${child ? child.pid ?? null : '?'}) or use DataLoader(num_workers=0) to rule it out`;
      }
      const stack = childStack(child, facts.process_stacks);
      extra.child_stack = stack;
      return diag(kind, `waiting${idle} on ${who}${childStackText(stack)}${whereStage} at ${at}`, stateHint, extra);
    }
    case 'file_lock_wait': {
      const lock = fileLock(evidence, kernelSays(evidence), stackSays(frames)) || {};
      const holder = lockHolder(lock);
      extra.file_lock = lock;
      const pid = lock.holder_pid ?? null;
      const stop = pid !== null ? ` (kill ${pid})` : '';
      return diag(kind, `waiting${idle} for a lock on ${lock.path}${LOCK_CALLS[lock.lock] || ''}, held by ${holder}${whereStage} at ${at}`,
        `${lockHolder(lock, true)} holds the lock: let it finish, stop it${stop} if it is stuck, or give each job its own cache directory; the lock goes when its holder closes the file or exits`, extra);
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
      return diag(kind, `never said hello${idle}${doing}${atText}`, startupHint(frames), extra);
    }
    case 'gil_held': {
      const busy = evidence.cpu_fraction;
      const doing = busy !== null && busy !== undefined && busy >= CPU_BUSY ? 'spinning in native code' : 'blocked in native code';
      const never = sawHello ? '' : ' (the worker loaded but never said hello)';
      return diag(kind, `beacon silent${idle} while the process lives${never}: the GIL is held, ${doing}${whereStage} at ${at}`,
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
      // Why a computing thread shows almost no CPU: it waited for a core the whole window.
      const starved = typeof cpu === 'number' && cpu < CPU_SOME ? ', always runnable: waiting for a free core' : '';
      return diag(kind, `computing without progress${idle} (CPU ${pct}${starved})${whereStage} at ${at}`,
        'busy on the CPU but not reporting progress: an infinite loop, or slow preprocessing; report progress inside it or profile the named frame', extra);
    }
    case 'io_wait': {
      extra.file = main.fd_target ?? null;
      const on = main.fd_target ? ` on ${main.fd_target}` : '';
      return diag(kind, `waiting for I/O${on}${idle}${whereStage} at ${at}`,
        'disk or filesystem is slow or stuck (network mount, full disk, a FIFO): check the path and the mount', extra);
    }
    case 'gpu_busy':
      return diag(kind, `the GPU is busy but the job reports no progress${idle}${whereStage} at ${at}`,
        'a long or stuck kernel: check nvidia-smi, lower the work per step, or run with CUDA_LAUNCH_BLOCKING=1 to find the kernel', extra);
    case 'stopped':
      return diag(kind, `the process is stopped (SIGSTOP or a debugger)${idle}${whereStage} at ${at}`,
        `resume it with kill -CONT ${evidence.pid ?? '<pid>'} or find who stopped it`, extra);
    default:
      return diag('unknown', `no progress${idle}${whereStage} at ${at}; cause not recognised`,
        'read the stacks in the report; py-spy dump --pid <pid> shows native frames', extra);
  }
}

/**
 * Name the progress bar that stopped (zero-code tqdm bars carry their description, e.g. a
 * huggingface_hub download's file name); as bridge/diagnosis_hang.py _stuck_bar.
 */
function stuckBar(progress) {
  const metrics = (progress && progress.metrics) || {};
  const { bar } = metrics;
  if (!bar) return '';
  const total = progress.total ?? null;
  const count = total !== null ? `${progress.step}/${total}` : `${progress.step}`;
  return ` (its bar '${bar}' stopped at ${count} ${metrics.unit || 'it'})`;
}

module.exports = { diagnoseHang, childStack };
