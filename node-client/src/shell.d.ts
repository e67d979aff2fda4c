/// <reference types="node" />
// Types of require('trainbridge/shell'): python-shell's surface under supervision.
import { EventEmitter } from 'node:events';
import { Readable, Transform, Writable } from 'node:stream';
import { Job, LaunchOptions, Report } from '../index';

export interface Options extends Pick<LaunchOptions, 'timeouts' | 'logPath' | 'tailLines' | 'zeroCode' | 'injectDir' | 'hub' | 'pythonEnv'> {
  mode?: 'text' | 'json' | 'binary';
  formatter?: string | ((param: any) => any);
  parser?: string | ((param: string) => any);
  stderrParser?: string | ((param: string) => any);
  encoding?: BufferEncoding;
  pythonPath?: string;
  pythonOptions?: string[];
  scriptPath?: string;
  args?: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
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
