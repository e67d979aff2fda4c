// Several runs' curves on one chart (#/compare/<id>,<id>,...): one metric at a time, one
// series per job, each job's steps as its own x (uPlot.join aligns them). The jobs' views are
// read from the server (GET /api/jobs/:id, the same view a job page starts from) and read
// again every 2 s while any of them runs. The page also follows the job list's stream, for
// what every page says about the server: while it does not answer the banner says so (and
// the reads stop failing one by one), and once it is back the runs are read again.
import uPlot from '/vendor/uPlot.esm.js';
import { h, tickText, valueText, COLORS, stream } from '/dom.js';

const REFRESH_MS = 2000;

export function comparePage(main, ids) {
  document.title = `Compare ${ids.length} runs - trainbridge dashboard`;
  const select = h('select', { id: 'compare-metric', 'aria-label': 'Metric' });
  const logScale = h('input', { type: 'checkbox', id: 'compare-log' });
  const chartEl = h('div', { class: 'chart', id: 'compare-chart' }, h('p', { class: 'empty', text: 'Reading the runs…' }));
  const problem = h('p', { class: 'error', role: 'alert', id: 'compare-error', hidden: true });
  const legend = h('ul', { class: 'compare-runs', id: 'compare-runs' });
  main.replaceChildren(
    h('nav', {}, h('a', { href: '#/', id: 'back', text: '← All jobs' })),
    h('section', { class: 'panel', 'aria-labelledby': 'compare-h' },
      h('div', { class: 'charthead' }, h('h1', { id: 'compare-h', text: `Compare ${ids.length} runs` }),
        h('span', {}, h('label', { for: 'compare-metric', class: 'muted', text: 'metric ' }), select, ' ',
          h('label', { class: 'muted', for: 'compare-log' }, logScale, ' log scale'))),
      problem, chartEl, legend));

  let views = [];
  let plot = null;
  let timer = null;
  let gone = false;

  async function read() {
    const answers = await Promise.all(ids.map(async (id) => {
      const res = await fetch(`/api/jobs/${encodeURIComponent(id)}`);
      if (!res.ok) return { id, error: (await res.json().catch(() => ({}))).error || `${res.status}` };
      return { id, view: await res.json() };
    }));
    if (gone) return;
    const missing = answers.filter((a) => a.error);
    problem.hidden = !missing.length;
    problem.textContent = missing.map((a) => `${a.id}: ${a.error}`).join('; ');
    views = answers.filter((a) => a.view).map((a) => a.view);
    const names = [...new Set(views.flatMap((v) => (v.metrics ? v.metrics.names : [])))];
    const chosen = select.value;
    select.replaceChildren(...names.map((n) => h('option', { value: n, text: n })));
    const lossy = names.find((n) => views.some((v) => v.metrics && v.metrics.families[n] === 'loss'));
    select.value = names.includes(chosen) ? chosen : (lossy || names[0] || '');
    draw();
    return views.some((v) => v.head.state !== 'ended');
  }

  // One read at a time; the next 2 s after it, while a run runs. A failed read is said under
  // the title unless the banner says it already (the server is down), and tried again.
  let reading = false;
  function poll() {
    clearTimeout(timer);
    if (reading || gone) return;
    reading = true;
    read().then((running) => running, (err) => {
      if (!document.body.classList.contains('stale')) {
        problem.hidden = false;
        problem.textContent = `Could not read the runs: ${err.message}`;
      }
      return true;
    }).then((again) => {
      reading = false;
      if (again && !gone) timer = setTimeout(poll, REFRESH_MS);
    });
  }

  function draw() {
    const metric = select.value;
    const runs = views.filter((v) => v.metrics && v.metrics.values[metric]);
    legend.replaceChildren(...views.map((v) => h('li', {}, h('code', { text: v.head.id }), ' ',
      h('a', { href: `#/jobs/${v.head.id}`, text: v.head.title }), ` (${v.head.state === 'ended' ? v.head.outcome : v.head.state})`,
      runs.includes(v) ? null : h('span', { class: 'muted', text: ` no ${metric || 'metric'}` }))));
    if (plot) { plot.destroy(); plot = null; }
    if (!runs.length) {
      chartEl.replaceChildren(h('p', { class: 'empty', text: 'None of these runs reported metrics yet.' }));
      return;
    }
    const data = uPlot.join(runs.map((v) => [v.metrics.step, v.metrics.values[metric]]));
    const positive = runs.every((v) => v.metrics.values[metric].every((y) => y === null || y > 0));
    chartEl.replaceChildren();
    plot = new uPlot({
      width: Math.max(200, chartEl.clientWidth), height: 240,
      legend: { live: true },
      scales: { x: { time: false }, y: logScale.checked && positive ? { distr: 3 } : {} },
      axes: [{ label: 'step' }, { label: metric, size: 60, values: (u, ticks) => ticks.map(tickText) }],
      series: [{ label: 'step', value: (u, x) => valueText(x) }, ...runs.map((v, i) => ({ label: v.head.id, // its title is in the list below
        stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, value: (u, y) => valueText(y) }))],
    }, data, chartEl);
    chartEl.dataset.runs = String(runs.length);
    chartEl.dataset.points = String(data[0].length);
  }

  select.addEventListener('change', draw);
  logScale.addEventListener('change', draw);
  // Live (first, and again after the server was down): read the runs now.
  const close = stream('/api/stream', { open: poll });
  return () => { gone = true; close(); clearTimeout(timer); if (plot) plot.destroy(); };
}
