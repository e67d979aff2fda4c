/// <reference types="node" />
// Types of require('trainbridge/shell'): python-shell's surface under supervision.
// The modules are named without 'node:' so that the older @types/node of python-shell
// projects resolve them too.
import { SpawnOptions } from 'child_process';
import { EventEmitter } from 'events';
import { Readable, Transform, Writable } from 'stream';
import { Job, LaunchOptions, Outcome, Report } from '../index';

/**
 * python-shell's Options, spawn's options included (as python-shell's). Of those, the adapter
 * uses `cwd` and `env`; the job decides the rest (docs/CLIENT.md, "python-shell adapter").
 */
export interface Options extends SpawnOptions,
  Pick<LaunchOptions, 'timeouts' | 'logPath' | 'tailLines' | 'zeroCode' | 'pythonEnv'> {
  mode?: 'text' | 'json' | 'binary';
  formatter?: string | ((param: any) => any);
  parser?: string | ((param: string) => any);
  stderrParser?: string | ((param: string) => any);
  encoding?: BufferEncoding;
  pythonPath?: string;
  pythonOptions?: string[];
  scriptPath?: string;
  args?: string[];
  /**
   * The end callback gets an error (and run() / runString() reject) when the job's outcome is
   * failed, crashed or hung, also without a non-zero exit code (a segfault): `err.report` and
   * `err.outcome` say what happened. Default false: as python-shell, only a non-zero exit code
   * is an error.
   */
  rejectOnFailure?: boolean;
}

export class PythonShellError extends Error {
  traceback?: string | Buffer;
  exitCode?: number;
  executable?: string;
  options?: string[] | null;
  script?: string;
  args?: string[] | null;
  /** The supervised job's report (what the adapter adds). */
  report?: Report | null;
  /** With rejectOnFailure: the signal that ended the script (null: it exited). */
  exitSignal?: string | null;
  /** With rejectOnFailure: the job's outcome ('failed', 'crashed' or 'hung' when it is the error's cause). */
  outcome?: Outcome;
}
export class PythonShellErrorWithLogs extends PythonShellError {
  logs: any[];
}
export class NewlineTransformer extends Transform {}

export class PythonShell extends EventEmitter {
  constructor(scriptPath: string, options?: Options, stdoutSplitter?: Transform | null, stderrSplitter?: Transform | null);
  scriptPath: string;
  command: string[];
  mode: string;
  terminated: boolean;
  exitCode: number | null;
  exitSignal: string | null;
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** The supervised job (stages, progress, hangs, send()). */
  job: Job;
  /** The final report, once the script ended. */
  report: Report | null;
  send(message: string | object | Buffer): this;
  end(callback: (err: PythonShellError | Error | undefined, exitCode: number | null, exitSignal: string | null) => any): this;
  kill(signal?: NodeJS.Signals): this;
  terminate(signal?: NodeJS.Signals): this;
  static defaultPythonPath: string;
  static defaultOptions: Options;
  static format: { text: (data: any) => string; json: (data: any) => string };
  static parse: { text: (data: any) => string; json: (data: string) => any };
  static run(scriptPath: string, options?: Options): Promise<any[]>;
  static runString(code: string, options?: Options): Promise<any[]>;
  static getPythonPath(): string;
  static checkSyntax(code: string): Promise<{ stdout: string; stderr: string }>;
  static checkSyntaxFile(filePath: string): Promise<{ stdout: string; stderr: string }>;
  static getVersion(pythonPath?: string): Promise<{ stdout: string; stderr: string }>;
  static getVersionSync(pythonPath?: string): string;
}
