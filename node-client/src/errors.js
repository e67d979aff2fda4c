'use strict';
/** The error types a user of trainbridge meets. */

class ProtocolError extends Error {
  /**
   * A frame that is not a valid v1 message. `reason` is a stable short code (PROTOCOL.md 8).
   * @param {string} reason
   */
  constructor(reason, detail = '') {
    super(detail ? `${reason}: ${detail}` : reason);
    this.name = 'ProtocolError';
    this.reason = reason;
    this.detail = detail;
  }
}

/**
 * An exception raised in the Python child, as a JavaScript Error: `name` is the Python type
 * (e.g. "RuntimeError"), `message` its message, `stack` the Python traceback. The fields of
 * the protocol's error message stay available: frames, chain, stage, fatal, kind, thread.
 */
class PythonError extends Error {
  /** @param {Record<string, any>} body the protocol's error message (parsed JSON) */
  constructor(body) {
    super(String(body.message ?? ''));
    this.pythonType = String(body.type ?? 'Exception');
    Object.defineProperty(this, 'name', { value: this.pythonType, enumerable: false, writable: true, configurable: true });
    const tb = String(body.traceback || '');
    // The Python traceback is the stack; it already names the type and message on its last line.
    this.stack = tb ? tb.replace(/\n$/, '') : `${this.pythonType}: ${this.message}`;
    this.traceback = tb;
    this.frames = body.frames || [];
    this.chain = body.chain || [];
    this.stage = body.stage ?? null;
    this.fatal = Boolean(body.fatal);
    this.kind = body.kind || 'exception';
    this.thread = body.thread || null;
    this.exitCode = body.exit_code ?? null;
    this.sender = body.sender ?? null; // the process that raised it (rank, host, pid, role, lead)
  }
}

/**
 * The job store cannot be used (bridge/store_errors.py): `kind` is corrupt, read_only, full,
 * access, missing, too_new or failed; `message` one sentence with the cause and the fix.
 */
class StoreError extends Error {
  /** @param {string} message */
  constructor(message, kind = 'failed') {
    super(message);
    this.name = 'StoreError';
    this.kind = kind;
  }
}

module.exports = { ProtocolError, PythonError, StoreError };
