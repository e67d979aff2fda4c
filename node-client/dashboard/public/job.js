// A job's page (#/jobs/<id>): verdict, progress, stages, charts, ranks, stacks, the live log.
import uPlot from '/vendor/uPlot.esm.js';
import { h, seconds, shown, badgeClass, post, stream, tickText, valueText, COLORS } from '/dom.js';

const LOG_VIEW = 500; // lines in the page; the full log is a download

function chart(el, opts, data) {
  let plot = null;
  const make = () => {
    const width = Math.max(200, el.clientWidth);
    plot = new uPlot({ ...opts, width, height: 210 }, data(), el);
  };
  const ro = new ResizeObserver(() => { if (plot) plot.setSize({ width: Math.max(200, el.clientWidth), height: 210 }); });
  ro.observe(el);
  return {
    update() {
      const d = data();
      if (!d[0].length) return;
      if (!plot) { el.replaceChildren(); make(); } else plot.setData(d);
      el.dataset.points = String(d[0].length);
      Object.assign(el, { uplot: plot }); // what is drawn, for a reader (the tests, devtools)
    },
    rebuild() { if (plot) { plot.destroy(); plot = null; } this.update(); },
    destroy() { ro.disconnect(); if (plot) plot.destroy(); },
  };
}


/**
 * A stack dump's threads, as the worker writes them (worker/errors.py all_stacks: a header
 * `Thread 0x... "name" (most recent call last):` then its frames) or faulthandler does (no
 * name): [{name (null: not named), text}]; text before the first header is a block of its own.
 */
function splitThreads(text) {
  const threads = [];
  for (const line of String(text).split('\n')) {
    const header = /^(?:Current thread|Thread) (0x[0-9a-fA-F]+)(?: "([^"]*)")?/.exec(line);
    if (header || !threads.length) threads.push({ name: header ? header[2] ?? null : null, ident: header ? header[1] : null, lines: [] });
    threads[threads.length - 1].lines.push(line);
  }
  return threads.map((t) => ({ name: t.name, ident: t.ident, text: t.lines.join('\n').replace(/\n+$/, '') })).filter((t) => t.text.trim());
}

export function jobPage(main, id) {
  document.title = `${id} - trainbridge dashboard`;
  const state = h('span', { class: 'badge', id: 'state', 'data-testid': 'state', role: 'status', 'aria-live': 'polite', text: '…' });
  const title = h('h1', { id: 'title', text: id });
  const where = h('span', { class: 'muted', id: 'where' });
  const cancel = h('button', { class: 'danger', id: 'cancel', type: 'button', text: 'Cancel' });
  const dump = h('button', { id: 'dump', type: 'button', text: 'Dump stacks' });
  const download = h('a', { class: 'button', id: 'download', href: `/api/jobs/${id}/log`, download: `${id}.log`, text: 'Download full log' });
  const reportLink = h('a', { class: 'button', id: 'report-link', href: `/api/jobs/${id}/report`, target: '_blank', rel: 'noopener', hidden: true, text: 'Report (JSON)' });
  const actionMsg = h('span', { class: 'muted', id: 'action-msg', role: 'status', 'aria-live': 'polite' });
  const verdict = h('section', { class: 'panel verdict', id: 'verdict', 'aria-live': 'polite', 'aria-labelledby': 'verdict-h' });
  const bar = h('div', { class: 'progress', id: 'progress', role: 'progressbar', 'aria-label': 'Training progress', 'aria-valuemin': '0', 'aria-valuemax': '100' }, h('div', { class: 'fill' }));
  const progressText = h('p', { class: 'progress-text', id: 'progress-text', text: 'no progress reported yet' });
  const stagesEl = h('ol', { class: 'stages', id: 'stages', 'aria-label': 'Stages' });
  const lossEl = h('div', { class: 'chart', id: 'metrics-chart' }, h('p', { class: 'empty', text: 'No metrics reported yet.' }));
  // A loss that falls over decades is flat after its first steps on a linear axis.
  const logScale = h('input', { type: 'checkbox', id: 'log-scale' });
  const logLabel = h('label', { class: 'muted', for: 'log-scale', title: 'Log scale for the loss and other positive metrics' }, logScale, ' log scale');
  const resEl = h('div', { class: 'chart', id: 'resources-chart' }, h('p', { class: 'empty', text: 'Sampled once a second while the job runs.' }));
  const gpuNote = h('p', { class: 'muted', id: 'gpu-note', hidden: true });
  const ranksSection = h('section', { class: 'panel', id: 'ranks', hidden: true }, h('h2', { text: 'Ranks' }));
  // Files the job made (worker.artifact; zero-code: torch.save, Image.save): sample images as
  // a gallery by step, checkpoints and other files to download.
  const gallery = h('div', { class: 'gallery', id: 'gallery', hidden: true });
  const filesBody = h('tbody');
  const filesTable = h('table', { id: 'files', hidden: true },
    h('thead', {}, h('tr', {}, ...['File', 'Kind', 'Size', 'Step', ''].map((t) => h('th', { scope: 'col', text: t })))), filesBody);
  const artifactsSection = h('section', { class: 'panel', id: 'artifacts', hidden: true, 'aria-labelledby': 'artifacts-h' },
    h('h2', { id: 'artifacts-h', text: 'Checkpoints and samples' }), gallery, filesTable);
  const stacksBox = h('div', { class: 'stacks', id: 'stacks', tabindex: '0', role: 'region', 'aria-label': 'Stacks' });
  const stacksSection = h('section', { class: 'panel', id: 'stacks-section', hidden: true, 'aria-labelledby': 'stacks-h' },
    h('h2', { id: 'stacks-h', text: 'Stacks' }), stacksBox);
  const logInfo = h('span', { class: 'muted', id: 'log-info' });
  const logEl = h('div', { class: 'log', id: 'log', role: 'log', tabindex: '0', 'aria-label': 'Job output, the latest lines' });

  main.replaceChildren(
    h('nav', {}, h('a', { href: '#/', id: 'back', text: '← All jobs' })),
    h('div', { class: 'jobhead' }, title, state, where, h('div', { class: 'actions' }, cancel, dump, download, reportLink, actionMsg)),
    verdict,
    h('section', { class: 'panel', 'aria-labelledby': 'progress-h' }, h('h2', { id: 'progress-h', text: 'Progress' }), bar, progressText),
    h('section', { class: 'panel', 'aria-labelledby': 'stages-h' }, h('h2', { id: 'stages-h', text: 'Stages' }), stagesEl),
    h('div', { class: 'grid2' },
      h('figure', { class: 'panel' }, h('figcaption', { class: 'charthead' }, h('h2', { text: 'Loss and metrics by step' }), logLabel), lossEl),
      h('figure', { class: 'panel' }, h('figcaption', {}, h('h2', { id: 'res-h', text: 'CPU and memory' })), resEl, gpuNote)),
    artifactsSection, ranksSection, stacksSection,
    h('section', { class: 'panel', 'aria-labelledby': 'log-h' }, h('div', { class: 'loghead' }, h('h2', { id: 'log-h', text: 'Log' }), logInfo), logEl));

  // Series as the page has them; the stream sends what is new.
  let head = null;
  let clockOffset = 0;
  const metrics = { names: [], step: [], values: {}, families: {} };
  const res = { t: [], cpu: [], rss_mb: [], gpu_mem_mb: [], gpu_util: [] };
  let lossChart = null;
  let resChart = null;
  let resGpu = false;
  let logShown = 0;

  // One axis per metric family (the server names them: model.familyOf): the first on the
  // left, the others on the right without their own grid. Hovering shows each value.
  const FAMILY_LABEL = { loss: 'loss', lr: 'learning rate', score: 'score', other: 'value' };
  function positive(family) {
    return metrics.names.filter((n) => metrics.families[n] === family)
      .every((n) => metrics.values[n].every((v) => v === null || v > 0));
  }
  function metricsChart() {
    const families = [...new Set(metrics.names.map((n) => metrics.families[n] || 'other'))];
    const scales = { x: { time: false } };
    for (const f of families) scales[f] = logScale.checked && f !== 'score' && positive(f) ? { distr: 3 } : {};
    return chart(lossEl, {
      legend: { live: true },
      scales,
      axes: [{ label: 'step' }, ...families.map((f, i) => ({ scale: f, label: FAMILY_LABEL[f], side: i ? 1 : 3,
        grid: { show: i === 0 }, size: 60, values: (u, ticks) => ticks.map(tickText) }))],
      series: [{ label: 'step', value: (u, v) => valueText(v) }, ...metrics.names.map((n, i) => ({ label: n, scale: metrics.families[n] || 'other',
        stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, value: (u, v) => valueText(v) }))],
    }, () => [metrics.step, ...metrics.names.map((n) => metrics.values[n])]);
  }
  logScale.addEventListener('change', () => { if (lossChart) { lossChart.destroy(); lossChart = null; takeMetrics(null); } });
  function resourcesChart() {
    const series = [{ label: 's' }, { label: 'CPU %', stroke: COLORS[0], width: 2, scale: '%' },
      { label: 'RSS MB', stroke: COLORS[1], width: 2, scale: 'MB' }];
    if (resGpu) series.push({ label: 'GPU mem MB', stroke: COLORS[2], width: 2, scale: 'MB' },
      { label: 'GPU util %', stroke: COLORS[3], width: 2, scale: '%' });
    return chart(resEl, {
      legend: { live: false },
      scales: { x: { time: false }, '%': { range: (u, lo, hi) => [0, Math.max(100, hi)] }, MB: { range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] } },
      axes: [{ label: 'seconds' }, { scale: '%', label: '%' }, { scale: 'MB', side: 1, label: 'MB', grid: { show: false } }],
      series,
    }, () => [res.t, res.cpu, res.rss_mb, ...(resGpu ? [res.gpu_mem_mb, res.gpu_util] : [])]);
  }

  function takeMetrics(m) {
    const before = metrics.names.length;
    if (m) { // null: draw again what the page has (the scale changed)
      if (m.reset) { metrics.names = []; metrics.step = []; metrics.values = {}; }
      Object.assign(metrics.families, m.families || {});
      for (const n of m.names) if (!metrics.values[n]) { metrics.names.push(n); metrics.values[n] = metrics.step.map(() => null); }
      metrics.step.push(...m.step);
      for (const n of metrics.names) metrics.values[n].push(...(m.values[n] || m.step.map(() => null)));
    }
    if (!metrics.step.length) return;
    if (lossChart && metrics.names.length !== before) { lossChart.destroy(); lossChart = null; } // a new series
    if (!lossChart) lossChart = metricsChart();
    lossChart.update();
  }
  function takeResources(r, gpu) {
    for (const k of Object.keys(res)) { if (r.reset) res[k] = []; res[k].push(...r[k]); }
    if (gpu && !resGpu) {
      resGpu = true;
      document.getElementById('res-h').textContent = 'CPU, memory and GPU';
      if (resChart) { resChart.destroy(); resChart = null; }
    }
    if (!resChart) resChart = resourcesChart();
    resChart.update();
  }

  const size = (b) => (b === null || b === undefined ? '' : b < 1024 ? `${b} B` : b < 1048576 ? `${(b / 1024).toFixed(1)} KiB`
    : b < 1073741824 ? `${(b / 1048576).toFixed(1)} MiB` : `${(b / 1073741824).toFixed(2)} GiB`);
  const shownFiles = new Set(); // a fresh snapshot (a reconnect) sends the list again
  function takeArtifacts(list) {
    for (const a of list) {
      if (shownFiles.has(a.n)) continue;
      shownFiles.add(a.n);
      const href = `/api/jobs/${id}/artifacts/${a.n}`;
      const at = a.step === null ? '' : `step ${a.step}`;
      if (a.kind === 'image') {
        gallery.append(h('figure', { class: 'sample', 'data-n': String(a.n) },
          h('a', { href, target: '_blank', rel: 'noopener' }, h('img', { src: href, loading: 'lazy', alt: `${a.name}${at ? ` at ${at}` : ''}` })),
          h('figcaption', { text: [at, a.name].filter(Boolean).join(' · ') })));
        gallery.hidden = false;
      } else {
        filesBody.append(h('tr', { 'data-n': String(a.n) },
          h('td', { title: a.path }, h('code', { text: a.name })), h('td', { text: a.kind }), h('td', { text: size(a.bytes) }),
          h('td', { text: a.step === null ? '' : String(a.step) }),
          h('td', {}, h('a', { href, download: a.name, text: 'Download', 'aria-label': `Download ${a.name}` }))));
        filesTable.hidden = false;
      }
    }
    artifactsSection.hidden = false;
  }

  function takeLog(l) {
    const nearBottom = logEl.scrollHeight - logEl.scrollTop - logEl.clientHeight < 40;
    const frag = document.createDocumentFragment();
    for (const line of l.lines.slice(-LOG_VIEW)) {
      // After the user's cancel, the interrupted script's traceback is the cancel's, not an error.
      const row = h('div', { class: line.after_cancel ? `${line.stream} after-cancel` : line.stream, 'data-n': String(line.n) });
      if (line.encoding && line.encoding !== 'utf-8') {
        row.append(h('span', { class: 'enc', title: line.encoding === 'gbk' ? 'decoded as GBK' : 'not valid UTF-8 or GBK: bytes shown as \\x escapes', text: line.encoding }));
      }
      row.append(line.text);
      frag.append(row);
    }
    logEl.append(frag);
    while (logEl.childElementCount > LOG_VIEW) logEl.firstElementChild.remove();
    logShown = logEl.childElementCount;
    if (nearBottom) logEl.scrollTop = logEl.scrollHeight;
  }

  function renderHead() {
    const word = shown(head);
    state.textContent = word;
    state.className = badgeClass(word);
    title.textContent = head.title;
    title.title = head.command.join(' ');
    const bits = [];
    if (head.stage && head.state !== 'ended') bits.push(`stage ${head.stage}`);
    if (head.pid) bits.push(`pid ${head.pid}`);
    where.textContent = bits.join(' · ');
    cancel.disabled = head.state === 'ended';
    reportLink.hidden = head.state !== 'ended';
    if (head.state === 'ended' && /…$/.test(actionMsg.textContent)) actionMsg.textContent = '';
    dump.disabled = head.state === 'ended';
    renderVerdict();
    renderProgress();
    renderStages();
    renderRanks();
    renderStacks();
    const total = head.log_count;
    logInfo.textContent = total > logShown ? `the last ${logShown} of ${total} lines (all: download)` : `${total} lines`;
  }

  function renderVerdict() {
    const parts = [h('h2', { id: 'verdict-h', class: 'outcome', 'data-testid': 'verdict-outcome', text: verdictTitle() })];
    if (head.health && head.health.length) { // the judge's words, while it runs and after
      parts.push(h('p', { id: 'health', class: 'health', 'data-testid': 'health', role: 'alert' },
        h('strong', { text: 'Training health: ' }), head.health.map((e) => e.text).join('; ')));
    }
    const r = head.report;
    if (r) {
      // The report's paragraph ends with its diagnosis and hint, which follow here apart.
      const cut = r.diagnosis ? r.summary.indexOf(' Diagnosis (') : -1;
      parts.push(h('p', { id: 'summary', text: cut > 0 ? r.summary.slice(0, cut) : r.summary }));
      if (r.diagnosis) {
        const d = r.diagnosis;
        parts.push(h('p', { id: 'diagnosis' }, h('strong', { text: `Diagnosis (${d.kind}): ` }), d.summary));
        if (d.frame) parts.push(h('p', {}, 'Blocking frame: ', h('code', { class: 'frame', id: 'frame', text: d.frame }),
          d.user_frame && d.user_frame !== d.frame ? h('span', {}, ' from ', h('code', { class: 'frame', text: d.user_frame })) : null));
        if (d.hint) parts.push(h('p', { id: 'hint' }, h('strong', { text: 'Try: ' }), d.hint));
        // What the paragraph says after them (lines after the hang's verdict, what the record
        // misses: bridge/report_text.py summary) is shown too, not cut off with them.
        const said = d.hint || d.summary;
        const at = said ? r.summary.indexOf(said, cut) : -1;
        const rest = at >= 0 ? r.summary.slice(at + said.length).replace(/^\.?\s*/, '') : '';
        if (rest) parts.push(h('p', { id: 'record-notes', 'data-testid': 'record-notes', text: rest }));
      }
    } else if (head.state === 'hung') {
      parts.push(h('p', { text: `Declared hung (${head.hang ? head.hang.reason : 'no progress'})${head.hang && head.hang.stage ? ` in stage ${head.hang.stage}` : ''}: collecting stacks, then stopping it.` }));
    } else if (head.looked) { // the judge's look at a deadline: not hung, and why
      const said = { starting: 'Still starting, not hung', starved: 'Silent but not hung', computing: 'No progress but not hung' };
      parts.push(h('p', { id: 'looked', 'data-testid': 'looked', 'data-look': head.looked.event },
        h('strong', { text: `${said[head.looked.event]} ` }), `(at ${Math.round(head.looked.at_s)} s): ${head.looked.why}.`));
    } else if (head.stalled) {
      parts.push(h('p', { text: `No progress for ${head.stalled.idle_s ?? '?'} s in stage ${head.stalled.stage ?? '?'}. It may recover; a stall timeout declares it hung.` }));
    } else {
      parts.push(h('p', { class: 'muted', text: 'The verdict and the diagnosis appear here when the job ends.' }));
    }
    verdict.replaceChildren(...parts);
  }
  function verdictTitle() {
    if (head.report) return `Outcome: ${head.outcome}`;
    return { queued: 'Queued', starting: 'Starting', running: 'Running', stalled: 'Stalled', hung: 'Hung' }[head.state] || head.state;
  }

  // The judge's rate (the 'status' event) as the CLI prints it: two decimals.
  function rate(value) {
    return value.toFixed(2);
  }

  function renderProgress() {
    const p = head.progress;
    const live = head.state !== 'ended';
    if (!p || p.total === null) {
      bar.classList.toggle('indeterminate', live && head.state !== 'starting');
      bar.removeAttribute('aria-valuenow');
      bar.firstElementChild.style.width = live ? '' : (head.outcome === 'succeeded' ? '100%' : '0');
      progressText.textContent = p ? `step ${p.step} (total unknown)${live && p.rate ? ` · ${rate(p.rate)} steps/s` : ''}` : 'no progress reported';
      return;
    }
    bar.classList.remove('indeterminate');
    bar.setAttribute('aria-valuenow', String(p.percent));
    bar.setAttribute('aria-valuetext', `${p.percent}%, step ${p.step} of ${p.total}`);
    bar.firstElementChild.style.width = `${p.percent}%`;
    const bits = [`${p.percent}%`, `step ${p.step} / ${p.total}`];
    if (live && p.rate) bits.push(`${rate(p.rate)} steps/s`);
    if (live && p.eta_s !== null) bits.push(`ETA ${seconds(p.eta_s)}`);
    const loss = p.metrics && typeof p.metrics.loss === 'number' ? ` · loss ${p.metrics.loss.toFixed(4)}` : '';
    progressText.textContent = bits.join(' · ') + loss;
  }

  function elapsed() {
    if (!head.startedAt) return 0;
    const end = head.endedAt ?? (Date.now() + clockOffset);
    return Math.max(0.001, (end - head.startedAt) / 1000);
  }
  function renderStages() {
    const span = Math.max(elapsed(), ...head.stages.map((s) => s.end_s ?? 0));
    const rows = head.stages.map((s) => {
      const open = s.end_s === null;
      const end = open ? elapsed() : s.end_s;
      const left = (100 * s.start_s) / span;
      const width = Math.max(0.2, (100 * (end - s.start_s)) / span);
      return h('li', { class: `${open ? 'open' : ''} ${s.status}`, 'aria-current': open ? 'step' : null },
        h('span', { class: 'name', style: `padding-left:${s.depth}rem`, title: s.name, text: s.name }),
        h('span', { class: 'track', 'aria-hidden': 'true' }, h('span', { class: 'bar', style: `left:${left}%;width:${width}%` })),
        h('span', { class: 'dur', text: open ? `${seconds(end - s.start_s)}…` : seconds(end - s.start_s) }));
    });
    if (!rows.length) rows.push(h('li', { class: 'muted', text: 'No stages yet.' }));
    stagesEl.replaceChildren(...rows);
  }

  function renderRanks() {
    ranksSection.hidden = head.ranks.length < 2;
    if (ranksSection.hidden) return;
    ranksSection.replaceChildren(h('h2', { text: 'Ranks' }), h('table', {},
      h('thead', {}, h('tr', {}, ...['rank', 'local rank', 'pid', 'host'].map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', {}, ...head.ranks.map((r) => h('tr', {}, h('td', { text: r.rank ?? r.role ?? '' }), h('td', { text: r.local_rank ?? '' }),
        h('td', { text: r.pid ?? '' }), h('td', { text: r.host ?? '' }))))));
  }

  // Each dump as its threads: the one the diagnosis names as blocking first (the judge's
  // `thread`; without one, the worker's own order: the main thread, the script's threads),
  // and trainbridge's own threads (trainbridge-*) folded away, for they are not the script.
  let stacksShown = null;
  function renderStacks() {
    const dumps = head.stacks.map((d) => [`dump at ${seconds(d.at_s)}`, d.text]);
    if (head.report && head.report.stacks) { // its parts, each under "--- where it came from ---" (bridge/report.py join_stacks)
      const parts = head.report.stacks.split(/^--- (.*) ---$/m);
      if (parts[0].trim()) dumps.push(['stacks in the report', parts[0]]);
      for (let i = 1; i < parts.length; i += 2) dumps.push([`stacks in the report: ${parts[i]}`, parts[i + 1]]);
    }
    stacksSection.hidden = dumps.length === 0;
    const blocking = head.report && head.report.diagnosis ? head.report.diagnosis.thread : null;
    const ident = head.report && head.report.diagnosis ? head.report.diagnosis.thread_ident ?? null : null;
    // what the verdict says of its thread: a hang's blocks, a crash's crashed, an error's raised
    const verb = { hung: 'blocking', crashed: 'crashed here' }[head.report ? head.report.outcome : ''] ?? 'raised here';
    const key = JSON.stringify([dumps, blocking, ident]);
    if (key === stacksShown) return;
    stacksShown = key;
    stacksBox.replaceChildren(...dumps.map(([heading, text]) => {
      const box = h('div', { class: 'dump' }, h('h3', { text: heading }));
      if (text === null || text === undefined) {
        box.append(h('p', { class: 'muted', text: '(no answer from the worker in time)' }));
        return box;
      }
      const threads = splitThreads(text);
      // the verdict's thread by name, or by the ident the judge read from the crash dump
      const first = threads.filter((t) => (blocking && t.name === blocking) || (ident && t.ident === ident));
      const own = threads.filter((t) => t.name !== null && t.name.startsWith('trainbridge-'));
      const rest = threads.filter((t) => !first.includes(t) && !own.includes(t));
      const pre = (t, blocks) => h('pre', { class: blocks ? 'thread blocking' : 'thread', 'data-thread': t.name ?? '' },
        blocks ? h('strong', { text: `${t.text.split('\n')[0]}  (${verb}, the diagnosis says)\n` }) : null,
        blocks ? t.text.slice(t.text.indexOf('\n') + 1) : t.text);
      box.append(...first.map((t) => pre(t, true)), ...rest.map((t) => pre(t, false)));
      if (own.length) {
        box.append(h('details', { class: 'internal' },
          h('summary', { text: `trainbridge's own threads (${own.length})` }), ...own.map((t) => pre(t, false))));
      }
      return box;
    }));
  }

  let reset = false;
  const close = stream(`/api/jobs/${id}/stream`, {
    open() { reset = true; },
    update(msg) {
      if (reset) { logEl.replaceChildren(); reset = false; }
      head = msg.head;
      clockOffset = head.now - Date.now();
      if (msg.metrics) takeMetrics(msg.metrics);
      if (msg.resources) takeResources(msg.resources, head.gpu);
      // Said plainly: no GPU on this machine, or GPUs the job has not used (yet).
      gpuNote.hidden = head.gpu || head.gpus === null || head.gpus === undefined;
      gpuNote.textContent = head.gpus === 0 ? 'No GPU: nvidia-smi sees none on this machine (or is not installed).'
        : `GPU: none used by this job so far (${head.gpus} on this machine).`;
      if (msg.log) takeLog(msg.log);
      if (msg.artifacts) takeArtifacts(msg.artifacts);
      if (head.cancelTrace) { // lines the page had before the cancel said they were its
        const [first, last] = head.cancelTrace;
        for (const row of logEl.querySelectorAll('div.stderr:not(.after-cancel)')) {
          const n = Number(row.dataset.n);
          if (n >= first && n <= last) row.classList.add('after-cancel');
        }
      }
      renderHead();
    },
  });
  // A job this dashboard does not know (an old link, another store): say so instead of
  // reconnecting forever.
  fetch(`/api/jobs/${id}`).then(async (answer) => {
    if (answer.status !== 404) return;
    close();
    const why = (await answer.json().catch(() => ({}))).error || `no job ${id}`;
    main.replaceChildren(h('nav', {}, h('a', { href: '#/', id: 'back', text: '← All jobs' })),
      h('section', { class: 'panel verdict', role: 'alert' }, h('h1', { id: 'title', text: `No job ${id} here` }),
        h('p', { id: 'not-found', text: `${why}. A job run by a dashboard started with --memory ends with it; a stored job is in the store it was submitted to.` })));
  }).catch(() => undefined);
  // The open stages grow with the clock, but not while the server is down (body.stale): their
  // end is not known then, and a growing bar would say the job is fine.
  const tick = setInterval(() => { if (head && head.state !== 'ended' && !document.body.classList.contains('stale')) renderStages(); }, 500);

  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    actionMsg.textContent = 'Cancelling…';
    try { await post(`/api/jobs/${id}/cancel`); } catch (err) { actionMsg.textContent = `Cancel failed: ${err.message}`; cancel.disabled = false; }
  });
  dump.addEventListener('click', async () => {
    dump.disabled = true;
    actionMsg.textContent = 'Asking the worker for its stacks…';
    try {
      const r = await post(`/api/jobs/${id}/stacks`);
      actionMsg.textContent = r.stacks ? 'Stacks received (below).' : 'The worker did not answer in time.';
      stacksSection.hidden = false;
      document.getElementById('stacks').focus();
    } catch (err) {
      actionMsg.textContent = `Dump failed: ${err.message}`;
    } finally {
      dump.disabled = head && head.state === 'ended';
    }
  });
  return () => { close(); clearInterval(tick); if (lossChart) lossChart.destroy(); if (resChart) resChart.destroy(); };
}

