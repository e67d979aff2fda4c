'use strict';
/**
 * Diagnosis, part 1: reading Python stacks and text (pure). As bridge/diagnosis_stack.py:
 * the three stack formats (traceback, faulthandler, py-spy) into frames, the user's frame,
 * the module being imported, the last traceback printed in output lines, and the small text
 * helpers every verdict uses. The verdicts are in diagnosis_end.js and diagnosis_hang.js;
 * diagnosis.js is the one name the rest of the client requires.
 */

// --- Python stack text ----------------------------------------------------------------
// Three formats: traceback ('File "x.py", line 3, in f', innermost last), faulthandler
// ('File "x.py", line 3 in f', innermost first) and py-spy ('f (x.py:3)', innermost first).
// Every parser returns frames innermost LAST, like the protocol's error.frames.
const TB_FRAME = /^\s*File "(?<file>[^"]*)", line (?<line>\d+), in (?<func>.+?)\s*$/;
const FH_FRAME = /^\s*File "(?<file>[^"]*)", line (?<line>\d+) in (?<func>.+?)\s*$/;
const PYSPY_FRAME = /^\s+(?<func>\S[^()]*?) \((?<file>[^()]+?):(?<line>\d+)\)\s*$/;
const HEADER = /^(?:Current thread|Thread|Traceback|Stack|Process|#|---|===)|:\s*$/;

// The line breaks Python's str.splitlines() knows (FS, GS, RS among them), so both clients
// split a dump alike.
// eslint-disable-next-line no-control-regex -- these control characters are line breaks
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

/** [header, frames innermost last] of every thread of a stack dump that has frames. */
function threadStacks(text) {
  if (!text) return [];
  return splitBlocks(text).map(([h, ls]) => [h, framesOfBlock(h, ls)]).filter(([, f]) => f.length);
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

// --- text -----------------------------------------------------------------------------
const TB_LAST_LINE = /^(?<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning)|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(?<msg>.*))?$/;

// Terminal escapes (ECMA-48: CSI, OSC, two-byte), as bridge/diagnosis_stack.py _ANSI: a
// person reading a report needs the words, not the escapes (the log keeps the raw bytes).
// eslint-disable-next-line no-control-regex -- ESC and BEL are what a terminal escape is
const ANSI = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-_])|\x9b[0-?]*[ -/]*[@-~]/g;
const SUMMARY_MAX = 900; // characters of a diagnosis summary
const MESSAGE_MAX = 600; // characters of an error message quoted in a summary

const stripAnsi = (text) => String(text ?? '').replace(ANSI, '');

function oneLine(text, limit = 200) {
  const s = stripAnsi(text).split(/\s+/).filter(Boolean).join(' ');
  return s.length <= limit ? s : `${s.slice(0, limit - 3)}...`;
}

// A line of a long message that names an error: what a cut message must still show.
const ERROR_LINE = /(Error|error|Exception)\s*:/;
const HEAD_SHARE = 3; // a cut message's first line keeps at least 1/HEAD_SHARE of the room

/**
 * An error message for a summary: one line, at most `limit` characters. One that is too long
 * keeps its first line and the later lines that name an error, then the other lines that still
 * fit, in order; " ... " marks what was left out (torch.load's "WeightsUnpickler error: ..."
 * after 500 characters of advice). bridge/diagnosis_stack.py quote.
 */
function quote(text, limit = MESSAGE_MAX) {
  const whole = oneLine(text, 2 ** 30);
  if (whole.length <= limit) return whole;
  const lines = stripAnsi(text).split(/\r\n|\r|\n/).map((line) => oneLine(line, 2 ** 30)).filter(Boolean);
  const named = [];
  for (let i = 1; i < lines.length; i += 1) if (ERROR_LINE.test(lines[i])) named.push(i);
  if (!named.length) return oneLine(text, limit);
  const kept = new Set([0, ...named]);
  if (joined(lines, kept).length > limit) { // even those do not fit: cut both
    const errors = named.map((i) => lines[i]).join(' ... ');
    const head = oneLine(lines[0], Math.max(Math.floor(limit / HEAD_SHARE), limit - 5 - errors.length));
    return `${head} ... ${oneLine(errors, limit - 5 - head.length)}`;
  }
  for (let i = 1; i < lines.length; i += 1) {
    if (!kept.has(i) && joined(lines, new Set([...kept, i])).length <= limit) kept.add(i);
  }
  return joined(lines, kept);
}

/** The kept lines in order: " " between neighbours, " ... " where lines were left out (after the last one too). */
function joined(lines, kept) {
  let out = '';
  let last = -1;
  for (const i of [...kept].sort((x, y) => x - y)) {
    out += (last < 0 ? '' : i === last + 1 ? ' ' : ' ... ') + lines[i];
    last = i;
  }
  return out + (last < lines.length - 1 ? ' ...' : '');
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

const inStage = (stage) => (stage ? ` in stage '${stage}'` : '');

function diag(kind, summary, hint, evidence) {
  return { kind, summary: oneLine(summary, SUMMARY_MAX), hint: oneLine(hint, 300), evidence };
}

module.exports = {
  TB_FRAME, parseStack, shortPath, formatFrame, isLibraryFrame, userFrame, where, frameFields, moduleName,
  importingModule, oneLine, quote, lastLine, threadStacks, tracebackInText, inStage, diag, stripAnsi, MESSAGE_MAX,
};
