'use strict';
/**
 * The dashboard's pure core: a job's view (what the page shows) built from the job's events,
 * and the delta a page needs since its last update. Values in, values out: no I/O, no clock
 * (every event carries its own time `t`, in ms since the epoch).
 *
 *   const view = createView({ id, title, command, spec, t });
 *   apply(view, { type: 'progress', data: body, t });
 *   const { message, cursor } = delta(view, previousCursor);
 */

const points = require('../src/points.js');

const LOG_KEEP = 1000; // lines kept for the page; the full log is a download
const ARTIFACTS_KEEP = 1000; // files listed (a worker says at most 1,000 itself)
const SERIES_MAX = 4000; // points per series before it is thinned to half (a spike kept: src/points.js)

/**
 * An event folded into a view: its type, its data (parsed JSON, or what src/feed_job.js made
 * of it: each field is checked or passed on where it is read) and its time in ms.
 * @typedef {{type: string, data: any, t: number}} ViewEvent
 */
/**
 * The end report (parsed JSON, src/feed_job.js Report): what endWith() reads of it is checked there.
 * @typedef {Record<string, any>} Report
 */
/**
 * A stage's bar, in seconds since the start; end_s null while it is open.
 * @typedef {{name: string, depth: number, start_s: number, end_s: number | null, status: string,
 *   budget_s?: number | null}} Stage
 */
/**
 * A line of the log as the page shows it: undecodable bytes as \xNN (encoding 'escaped');
 * after_cancel: a line of the cancel's traceback.
 * @typedef {{n: number, stream: string, text: string, encoding: string | null, after_cancel?: boolean}} LogLine
 */
/** @typedef {{n: number, path: string, name: string, kind: string, bytes: number | null, step: number | null, at_s: number}} Artifact */
/** @typedef {{epoch: number, names: string[], step: number[], values: Record<string, (number | null)[]>}} MetricSeries */
/**
 * @typedef {{epoch: number, t: number[], cpu: (number | null)[], rss_mb: (number | null)[],
 *   gpu_mem_mb: (number | null)[], gpu_util: (number | null)[], gpu: boolean, gpus: number | null}} ResourceSeries
 */
/**
 * The part of the report the page shows (endWith()).
 * @typedef {{outcome: string | null, exit_code: number | null, signal: string | null, stage: string | null,
 *   duration_s: number | null, summary: string, reason: string | null,
 *   diagnosis: {kind: string, summary: string, hint: string, frame: unknown, user_frame: unknown,
 *     thread: unknown, thread_ident: string | null} | null,
 *   error: {type: string, message: string, traceback: string} | null,
 *   hang: Record<string, unknown> | null, stacks: string | null, log_path: string | null}} ViewReport
 */
/**
 * A job's view: what the page shows (createView()).
 * @typedef {{id: string, title: string, command: string[], spec: unknown,
 *   submittedAt: number, startedAt: number | null, endedAt: number | null,
 *   state: string, outcome: string | null, pid: number | null,
 *   ranks: {rank: number | null, pid: number | null, host: string | null, local_rank: number | null, role: string}[],
 *   stages: Stage[],
 *   progress: {step: number, total: number | null, rate: number | null, eta_s: number | null,
 *     metrics: Record<string, unknown>, percent: number | null, age_s: number | null} | null,
 *   hang: {reason: unknown, stage: string | null} | null,
 *   stalled: {stage: string | null, idle_s: number | null} | null,
 *   signals: unknown[], cancel: {reason: string | null, at_s: number} | null,
 *   cancelTrace: [number, number] | null,
 *   health: {metric: string, step: number | null, text: string}[],
 *   looked: {event: string, why: string, at_s: number} | null,
 *   report: ViewReport | null, stacks: {at_s: number, text: string | null}[],
 *   metrics: MetricSeries, resources: ResourceSeries, log: {lines: LogLine[], count: number},
 *   artifacts: Artifact[], version: number}} View
 */
/**
 * A page's update (delta()): the head, and of the series, the log and the files what it lacks
 * (reset: a series whole, after a thinning).
 * @typedef {object} Delta
 * @property {ReturnType<typeof head>} head
 * @property {{reset: boolean, names: string[], step: number[], families: Record<string, string>,
 *   values: Record<string, (number | null)[]>}} [metrics]
 * @property {{reset: boolean, [series: string]: boolean | (number | null)[]}} [resources]
 * @property {{lines: LogLine[], skipped: number}} [log]
 * @property {Artifact[]} [artifacts]
 */
/**
 * What a page has seen (delta()): the view's version, each series' thinning epoch and length,
 * the last log line number and the number of files.
 * @typedef {{version: number, mEpoch: number, mLen: number, rEpoch: number, rLen: number, logN: number,
 *   artN: number}} Cursor
 */

/**
 * @param {{id: string, title?: string | null, command?: string[] | null, spec?: unknown, t: number,
 *   state?: string}} job
 * @returns {View}
 */
function createView({ id, title, command, spec = null, t, state = 'starting' }) {
  return {
    id, title: title || (command || []).join(' '), command: command || [], spec,
    submittedAt: t, startedAt: null, endedAt: null,
    state, outcome: null, pid: null,
    ranks: [], // {rank, pid, host} per worker hello
    stages: [], // {name, depth, start_s, end_s, status}
    progress: null, // {step, total, rate, eta_s, metrics, percent, age_s}: the last 'status' event
    hang: null, stalled: null, signals: [], cancel: null, // {reason, at_s} once asked
    cancelTrace: null, // [first, last] log line numbers of the cancel's traceback
    health: [], // {metric, step, text}: the supervisor's training-health entries (src/health.js)
    // What a deadline's look saw instead of a hang (bridge/look.py), in the judge's words, until the
    // job moves on: {event: 'starting' | 'starved' | 'computing', why, at_s}.
    looked: null,
    report: null, stacks: [], // {at_s, text}
    // Series: metrics over steps, resources over seconds since the start.
    metrics: { epoch: 0, names: [], step: [], values: {} },
    resources: { epoch: 0, t: [], cpu: [], rss_mb: [], gpu_mem_mb: [], gpu_util: [], gpu: false, gpus: null },
    log: { lines: [], count: 0 }, // lines: {n, stream, text, encoding}; count: lines ever seen
    artifacts: [], // {n, path, name, kind, bytes, step, at_s}: files the job made (worker/artifacts.py)
    version: 0,
  };
}

const ms = (/** @type {number} */ x) => Math.round(x * 1000) / 1000;
const since = (/** @type {View} */ view, /** @type {number | null | undefined} */ t) => ms(Math.max(0, ((t ?? view.submittedAt) - (view.startedAt ?? view.submittedAt)) / 1000));

/**
 * Halve series in place: the points src/points.js keeps of `values` (the metrics: a spike of
 * one step and the first NaN of a run stay), or every other one without them; the last
 * point always stays.
 * @param {unknown[][]} arrays
 * @param {Record<string, ReadonlyArray<number | null>> | null} [values]
 */
function thin(arrays, values = null) {
  const n = arrays[0].length;
  let keep = [];
  if (values) keep = points.keep(n, values, Math.floor(n / 2));
  else for (let i = 0; i < n; i += 2) keep.push(i);
  if (keep[keep.length - 1] !== n - 1) keep.push(n - 1);
  for (const a of arrays) {
    const copy = keep.map((i) => a[i]);
    a.length = 0;
    a.push(...copy);
  }
}

/**
 * A progress message's points: every call's metrics since the last message (its `points`,
 * PROTOCOL.md), or the latest value alone (a worker before them, zero-code's own source).
 * @param {View} view
 * @param {Record<string, any>} body the progress message's body (parsed JSON)
 */
function addProgress(view, body) {
  const p = body.points;
  if (p && Array.isArray(p.steps) && p.metrics && typeof p.metrics === 'object') {
    p.steps.forEach((/** @type {unknown} */ step, /** @type {number} */ i) => {
      /** @type {Record<string, unknown>} */
      const at = {};
      for (const [name, column] of Object.entries(p.metrics)) if (Array.isArray(column)) at[name] = column[i];
      addMetrics(view, Number(step), at);
    });
    const last = p.steps[p.steps.length - 1];
    // the latest is the last point, or older (a message queued behind a log): x keeps rising
    if (p.steps.length && !(typeof body.step === 'number' && typeof last === 'number' && body.step > last)) return;
  }
  addMetrics(view, Number(body.step), body.metrics);
}

/**
 * @param {View} view
 * @param {number} step
 * @param {Record<string, unknown> | null | undefined} metrics
 */
function addMetrics(view, step, metrics) {
  const m = view.metrics;
  const numeric = /** @type {[string, number][]} */ ( // the finite numbers
    Object.entries(metrics || {}).filter(([, v]) => typeof v === 'number' && Number.isFinite(v)));
  if (!numeric.length) return;
  for (const [name] of numeric) {
    if (!m.values[name]) {
      m.names.push(name);
      m.values[name] = m.step.map(() => null);
    }
  }
  m.step.push(step);
  for (const name of m.names) m.values[name].push(null);
  for (const [name, v] of numeric) m.values[name][m.step.length - 1] = v;
  if (m.step.length > SERIES_MAX) {
    thin([m.step, ...m.names.map((n) => m.values[n])], m.values);
    m.epoch += 1;
  }
}

/**
 * @param {View} view
 * @param {number} t
 * @param {Record<string, any>} sample a 'resources' event's sample (parsed JSON)
 */
function addResources(view, t, sample) {
  const r = view.resources;
  r.t.push(Number(since(view, t).toFixed(2)));
  r.cpu.push(sample.cpu_percent ?? null);
  r.rss_mb.push(sample.rss_bytes == null ? null : Math.round(sample.rss_bytes / 1048576 * 10) / 10);
  r.gpu_mem_mb.push(sample.gpu_mem_bytes == null ? null : Math.round(sample.gpu_mem_bytes / 1048576));
  r.gpu_util.push(sample.gpu_util ?? null);
  if (sample.gpu_mem_bytes != null || sample.gpu_util != null) r.gpu = true;
  if (typeof sample.gpus === 'number') r.gpus = sample.gpus; // devices on the machine (0: none)
  if (r.t.length > SERIES_MAX) {
    thin([r.t, r.cpu, r.rss_mb, r.gpu_mem_mb, r.gpu_util]);
    r.epoch += 1;
  }
}

/** A stage began inside its parents, so their bars hold it: each end arrives with its own
 * delay, and a child's start (its end as it arrived, less what the worker measured) could
 * show before its parent's ("import torch" left of the "config" it ran in), whichever of the
 * two closed first. Each start is an upper bound of the true one (it is measured back from
 * an arrival), so a parent moved back to its child's start still holds the truth.
 * @param {View} view
 * @param {Stage} stage
 */
function enclose(view, stage) {
  const at = view.stages.indexOf(stage);
  for (let i = at + 1; i < view.stages.length && view.stages[i].depth > stage.depth; i++) {
    if (view.stages[i].start_s < stage.start_s) stage.start_s = view.stages[i].start_s;
  }
  let depth = stage.depth;
  for (let i = at - 1; i >= 0 && depth > 0; i--) {
    const parent = view.stages[i];
    if (parent.depth !== depth - 1) continue;
    if (parent.start_s > stage.start_s) parent.start_s = stage.start_s;
    depth = parent.depth;
  }
}

/**
 * @param {View} view
 * @param {string} name
 * @returns {Stage | null}
 */
function openStage(view, name) {
  for (let i = view.stages.length - 1; i >= 0; i--) {
    if (view.stages[i].name === name && view.stages[i].end_s === null) return view.stages[i];
  }
  return null;
}

/**
 * The job's progress line: the supervisor's judged snapshot (the 'status' event, bridge/status.py)
 * as it is; rate and ETA are never computed here, so the page says what status() says.
 * @param {View} view
 * @param {Record<string, any>} snap the 'status' event's snapshot (parsed JSON)
 */
function status(view, snap) {
  const step = snap.step === null || snap.step === undefined ? null : Number(snap.step);
  const total = snap.total === null || snap.total === undefined ? null : Number(snap.total);
  if (step === null) return;
  view.progress = {
    step, total, rate: snap.rate ?? null, eta_s: snap.eta_s ?? null, metrics: snap.metrics || {},
    percent: total ? Math.min(100, Math.round((step / total) * 1000) / 10) : null,
    age_s: snap.progress_age_s ?? null,
  };
}

/**
 * Fold one event into the view; returns the view. Unknown events are ignored.
 * @param {View} view
 * @param {ViewEvent} event
 * @returns {View}
 */
function apply(view, { type, data, t }) {
  view.version += 1;
  switch (type) {
    case 'spawn':
      view.pid = data.pid ?? view.pid; // the start is the first state's time (a replay has it)
      break;
    case 'state':
      // "ended" comes with the report ('end'): a replayed events file may have the state line
      // a poll before the end line, and a page must not show an end without its outcome.
      if (data === 'ended') break;
      if (view.state === 'hung') break; // hung until it has ended
      if (data === 'running' || data === 'starting') view.stalled = null;
      if (view.looked && view.looked.event === 'starting' && data !== 'starting') view.looked = null;
      view.state = data;
      if (view.startedAt === null && data !== 'queued') view.startedAt = t;
      break;
    case 'hello': {
      // A distributed launcher (torchrun's own process) says hello too: it has no rank, and
      // is not rank 0 (the supervisor says so: sender.awaits_ranks). A plain process without
      // a rank is one row of its own, rank 0.
      const launcher = Boolean(data.sender && data.sender.awaits_ranks);
      view.ranks.push({ rank: launcher ? null : data.rank ?? 0, pid: data.pid ?? null, host: data.host ?? null,
        local_rank: data.local_rank ?? null, role: launcher ? 'launcher' : 'rank' });
      break;
    }
    case 'stage':
      if (data.event === 'begin') {
        view.stages.push({ name: String(data.name), depth: data.depth ?? 0, start_s: since(view, t),
          end_s: null, status: 'running', budget_s: data.budget_s ?? null });
      } else {
        const s = openStage(view, String(data.name));
        if (s) {
          // The worker measured the duration; the begin arrived when the link delivered it
          // (several at once after a slow start), so the bar ends now and is as long as measured.
          s.end_s = since(view, t);
          if (data.duration_s != null) s.start_s = ms(Math.max(0, s.end_s - Number(data.duration_s)));
          s.status = data.status || 'ok';
          enclose(view, s);
        }
      }
      break;
    case 'status': {
      const before = view.progress ? view.progress.step : null;
      status(view, data);
      // progress again: what the look said no longer holds
      if (view.looked && view.progress && view.progress.step !== before) view.looked = null;
      break;
    }
    case 'progress': // the lead's (both sources give only the lead's): points of the metric series
      addProgress(view, data);
      break;
    case 'log': {
      if (data.stream === 'worker' && !data.text) break;
      view.log.count += 1;
      // Undecodable bytes arrive as lone surrogates (U+DC80..U+DCFF, Python's surrogateescape)
      // with the feed's encoding 'escaped' (older events files have none): shown as \xNN.
      let encoding = data.encoding || null;
      const text = String(data.text).replace(/(?<![\ud800-\udbff])[\udc80-\udcff]/g, (c) => {
        encoding = 'escaped';
        return `\\x${(c.charCodeAt(0) - 0xdc00).toString(16).padStart(2, '0')}`;
      });
      /** @type {LogLine} */
      const line = { n: view.log.count, stream: data.stream, text, encoding };
      if (view.cancel && data.stream === 'stderr') line.after_cancel = true; // the cancel's traceback
      view.log.lines.push(line);
      if (view.log.lines.length > LOG_KEEP) view.log.lines.splice(0, view.log.lines.length - LOG_KEEP);
      break;
    }
    case 'stalled':
      view.stalled = { stage: data.stage ?? null, idle_s: data.idle_s ?? null };
      view.looked = null;
      break;
    case 'hang':
      view.hang = { reason: data.reason, stage: data.stage ?? null };
      view.state = 'hung';
      view.looked = null;
      break;
    case 'artifact': // a file the job made: the page lists it and serves it by its number
      if (view.artifacts.length < ARTIFACTS_KEEP && typeof data.path === 'string') {
        view.artifacts.push({ n: view.artifacts.length, path: data.path, name: String(data.name || data.path),
          kind: ['checkpoint', 'image', 'file'].includes(data.kind) ? data.kind : 'file',
          bytes: data.bytes ?? null, step: data.step ?? null, at_s: since(view, t) });
      }
      break;
    case 'cancel': // the user's (or the judge's) cancel: what the interrupted script prints is its doing
      if (!view.cancel) view.cancel = { reason: data.reason ?? null, at_s: since(view, t) };
      markCancelTrace(view);
      break;
    case 'signal':
      view.signals.push(data);
      break;
    case 'starting': // the deadline's look: not hung, and why (the CLI says the same words)
    case 'starved':
    case 'computing':
      view.looked = { event: type, why: data.why, at_s: since(view, t) };
      break;
    case 'health': // said by the judge; the page shows its words
      view.health.push({ metric: data.metric, step: data.step ?? null, text: data.text });
      break;
    case 'resources':
      addResources(view, t, data);
      break;
    case 'stacks':
      view.stacks.push({ at_s: since(view, t), text: data === null ? null : String(data) });
      break;
    case 'end':
      endWith(view, data, t);
      break;
    default:
      view.version -= 1;
  }
  return view;
}

/**
 * The cancel's KeyboardInterrupt traceback, which the script printed as the cancel stopped it,
 * often before the cancel's answer came (the interrupt goes first): the last stderr block
 * from "Traceback (most recent call last):" to "KeyboardInterrupt" among the latest lines.
 * Its lines are the cancel's (after_cancel), and `cancelTrace` names them for a page that has
 * them already.
 * @param {View} view
 */
function markCancelTrace(view) {
  const lines = view.log.lines;
  let end = -1;
  for (let i = lines.length - 1; i >= Math.max(0, lines.length - 200); i--) {
    if (lines[i].stream === 'stderr' && /^KeyboardInterrupt\b/.test(lines[i].text)) { end = i; break; }
  }
  if (end < 0) return;
  let start = end;
  while (start > 0 && !(lines[start].stream === 'stderr' && lines[start].text.startsWith('Traceback (most recent call last):'))) start -= 1;
  for (let i = start; i <= end; i++) if (lines[i].stream === 'stderr') lines[i].after_cancel = true;
  view.cancelTrace = [lines[start].n, lines[end].n];
}

/**
 * The part of the report the page shows (the whole report is at /api/jobs/:id/report).
 * @param {View} view
 * @param {Report} report
 * @param {number} t
 */
function endWith(view, report, t) {
  if (report.outcome === 'cancelled') markCancelTrace(view);
  view.state = 'ended';
  view.outcome = report.outcome;
  view.endedAt = t;
  view.stalled = null;
  view.looked = null;
  for (const s of view.stages) {
    if (s.end_s === null) {
      s.end_s = since(view, t);
      s.status = report.outcome === 'succeeded' ? 'ok' : report.outcome;
    }
  }
  if (!view.stages.length && Array.isArray(report.stages)) {
    let at = 0;
    for (const s of report.stages) {
      const d = s.duration_s ?? 0;
      view.stages.push({ name: s.name, depth: s.depth ?? 0, start_s: at, end_s: at + d, status: s.status });
      if (!s.depth) at += d;
    }
  }
  view.report = {
    outcome: report.outcome, exit_code: report.exit_code ?? null, signal: report.signal ?? null,
    stage: report.stage ?? null, duration_s: report.duration_s ?? null, summary: report.summary || '',
    reason: report.reason ?? null, // why, for the list: the judge's words (report_text reason)
    diagnosis: report.diagnosis ? {
      kind: report.diagnosis.kind, summary: report.diagnosis.summary, hint: report.diagnosis.hint,
      frame: (report.diagnosis.evidence || {}).frame ?? null,
      user_frame: (report.diagnosis.evidence || {}).user_frame ?? null,
      // the thread the judge's verdict is about (diagnosis.thread: the thread a hang waits
      // for, a crash's thread, the one an error was raised in), shown first; else null
      thread: report.diagnosis.thread ?? ((report.diagnosis.evidence || {}).waits_for || {}).thread ?? null,
      // a native crash's thread as faulthandler wrote it ("0x00007f..."): its block in the dump
      thread_ident: report.diagnosis.thread_ident ?? null,
    } : null,
    error: report.error ? { type: report.error.type, message: report.error.message,
      traceback: report.error.traceback || '' } : null,
    hang: report.hang || null,
    stacks: report.stacks || null,
    log_path: report.log_path || null,
  };
}

/**
 * A metric's family, so that each family gets an axis of its own (a learning rate of 3e-4
 * drawn on the loss axis is a flat line at zero): 'loss', 'lr', 'score' (accuracy and its
 * kin, 0..1 or %), or 'other'. By name only.
 * @param {string} name
 * @returns {'loss' | 'lr' | 'score' | 'other'}
 */
function familyOf(name) {
  const n = String(name).toLowerCase();
  if (/(^|[_\W])(lr|learning_rate|learningrate)($|[_\W])/.test(n) || n === 'lr') return 'lr';
  if (/loss|nll|ppl|perplexity|bpb|bpc|mse|mae|rmse/.test(n)) return 'loss';
  if (/acc|accuracy|f1|precision|recall|auc|iou|bleu|rouge|score/.test(n)) return 'score';
  return 'other';
}
const FAMILIES = ['loss', 'lr', 'score', 'other'];

/**
 * What the job list shows for a job.
 * @param {View} view
 */
function summaryOf(view) {
  return {
    id: view.id, title: view.title, state: view.state, outcome: view.outcome,
    stage: currentStage(view), percent: view.progress ? view.progress.percent : null,
    step: view.progress ? view.progress.step : null, total: view.progress ? view.progress.total : null,
    submittedAt: view.submittedAt, startedAt: view.startedAt,
    duration_s: view.report ? view.report.duration_s : null,
    reason: view.report ? view.report.reason ?? null : null, // the judge's (report_text.reason)
    version: view.version,
  };
}

/**
 * @param {View} view
 * @returns {string | null}
 */
function currentStage(view) {
  for (let i = view.stages.length - 1; i >= 0; i--) if (view.stages[i].end_s === null) return view.stages[i].name;
  return null;
}

/**
 * The scalar part of a view: everything except the series and the log.
 * @param {View} view
 */
function head(view) {
  const { metrics: _metrics, resources, log, artifacts: _artifacts, ...rest } = view;
  return { ...rest, stage: currentStage(view), log_count: log.count, gpu: resources.gpu, gpus: resources.gpus };
}

/**
 * What a page that has seen `cursor` needs to catch up (cursor null: everything). Series are
 * sent from the last point the page has, or whole (`reset`) after a thinning; log lines from
 * the last line number it has (lines no longer kept are counted as `skipped`).
 * @param {View} view
 * @param {Cursor | null} cursor
 * @returns {{message: Delta | null, cursor: Cursor}}
 */
function delta(view, cursor) {
  const c = cursor || { version: -1, mEpoch: -1, mLen: 0, rEpoch: -1, rLen: 0, logN: 0, artN: 0 };
  if (c.version === view.version) return { message: null, cursor: c };
  const m = view.metrics;
  const r = view.resources;
  /** @type {Delta} */
  const message = { head: head(view) };
  if (m.epoch !== c.mEpoch || m.step.length < c.mLen) {
    message.metrics = { reset: true, names: [...m.names], step: [...m.step],
      families: Object.fromEntries(m.names.map((n) => [n, familyOf(n)])),
      values: Object.fromEntries(m.names.map((n) => [n, [...m.values[n]]])) };
  } else if (m.step.length > c.mLen) {
    message.metrics = { reset: false, names: [...m.names], step: m.step.slice(c.mLen),
      families: Object.fromEntries(m.names.map((n) => [n, familyOf(n)])),
      values: Object.fromEntries(m.names.map((n) => [n, m.values[n].slice(c.mLen)])),
      // a metric first seen now has nulls before; the page pads its own copy
    };
  }
  /** @type {('t' | 'cpu' | 'rss_mb' | 'gpu_mem_mb' | 'gpu_util')[]} */
  const rkeys = ['t', 'cpu', 'rss_mb', 'gpu_mem_mb', 'gpu_util'];
  if (r.epoch !== c.rEpoch || r.t.length < c.rLen) {
    message.resources = { reset: true, ...Object.fromEntries(rkeys.map((k) => [k, [...r[k]]])) };
  } else if (r.t.length > c.rLen) {
    message.resources = { reset: false, ...Object.fromEntries(rkeys.map((k) => [k, r[k].slice(c.rLen)])) };
  }
  const fresh = view.log.lines.filter((l) => l.n > c.logN);
  if (fresh.length) {
    message.log = { lines: fresh, skipped: fresh[0].n - c.logN - 1 };
  }
  const seen = c.artN || 0;
  if (view.artifacts.length > seen) { // new files only (the page keeps the list)
    message.artifacts = view.artifacts.slice(seen).map((a) => ({ ...a }));
  }
  return {
    message,
    cursor: { version: view.version, mEpoch: m.epoch, mLen: m.step.length, rEpoch: r.epoch, rLen: r.t.length,
      logN: view.log.count, artN: view.artifacts.length },
  };
}

// The job events a view folds (each source listens to these on its jobs).
const FOLDED = ['state', 'hello', 'stage', 'progress', 'status', 'log', 'stalled', 'hang', 'signal', 'resources', 'health', 'starting', 'starved', 'computing', 'cancel', 'artifact'];

module.exports = { FOLDED, createView, apply, delta, summaryOf, head, currentStage, familyOf, FAMILIES, LOG_KEEP, SERIES_MAX };
