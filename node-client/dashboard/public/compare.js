// Several runs' curves on one chart (#/compare/<id>,<id>,...): one metric at a time, one
// series per job, each job's steps as its own x (uPlot.join aligns them). The jobs' views are
// read from the server (GET /api/jobs/:id, the same view a job page starts from) and read
// again every 2 s while any of them runs.
import uPlot from '/vendor/uPlot.esm.js';
import { h, tickText, COLORS } from '/dom.js';

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
    if (views.some((v) => v.head.state !== 'ended')) timer = setTimeout(() => read().catch(showError), REFRESH_MS);
  }

  function showError(err) {
    problem.hidden = false;
    problem.textContent = `Could not read the runs: ${err.message}`;
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
      series: [{ label: 'step' }, ...runs.map((v, i) => ({ label: v.head.id, // its title is in the list below
        stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true }))],
    }, data, chartEl);
    chartEl.dataset.runs = String(runs.length);
  }

  select.addEventListener('change', draw);
  logScale.addEventListener('change', draw);
  read().catch(showError);
  return () => { gone = true; clearTimeout(timer); if (plot) plot.destroy(); };
}
