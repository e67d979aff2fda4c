// The job list (live states) and the form that starts a job: the page at #/.
import { h, badgeClass, post, seconds, splitCommand, stream } from '/dom.js';

const STAGES = ['config', 'data', 'model', 'optimizer', 'train', 'save'];

export function listPage(main) {
  document.title = 'Jobs - trainbridge dashboard';
  const tbody = h('tbody');
  const empty = h('p', { class: 'muted', text: 'No jobs yet: submit one with the form.' });
  const table = h('table', {},
    h('caption', { class: 'muted', style: 'text-align:left', text: 'Newest first; states update live.' }),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'Job' }), h('th', { scope: 'col', text: 'State' }),
      h('th', { scope: 'col', class: 'opt', text: 'Stage' }), h('th', { scope: 'col', text: 'Progress' }),
      h('th', { scope: 'col', class: 'opt', text: 'Started' }), h('th', { scope: 'col', class: 'opt', text: 'Took' }),
      h('th', { scope: 'col', text: 'Why' }), h('th', { scope: 'col', text: 'Actions' }))),
    tbody);
  const rows = new Map();
  const problem = h('p', { class: 'error', role: 'alert', id: 'list-error', hidden: true });
  const act = async (what, fn) => {
    problem.hidden = true;
    try {
      await fn();
    } catch (err) {
      problem.textContent = `${what}: ${err.message}`;
      problem.hidden = false;
    }
  };
  // The queue (the job store's; none in --memory mode): paused or running, for every process.
  const queueButton = h('button', { type: 'button', id: 'queue-button', hidden: true });
  const queueWords = h('span', { class: 'muted', id: 'queue-state' });
  let paused = null;
  let queueSeq = 0;
  function renderQueue({ queue }) {
    // The stream and a click's answer come on two connections: an older state is not drawn.
    if (queue && queue.seq < queueSeq) return;
    if (queue) queueSeq = queue.seq;
    paused = queue ? queue.paused : null;
    queueButton.hidden = queue === null;
    queueButton.textContent = paused ? 'Resume queue' : 'Pause queue';
    queueWords.textContent = queue === null ? '' : (paused ? ' The queue is paused: no queued job starts.' : '');
  }
  queueButton.addEventListener('click', () => act('Queue', async () => {
    queueButton.disabled = true;
    try { renderQueue(await post('/api/queue', { paused: !paused })); } finally { queueButton.disabled = false; }
  }));
  function render(jobs) {
    empty.hidden = jobs.length > 0;
    table.hidden = jobs.length === 0;
    const seen = new Set();
    let before = null;
    for (const j of [...jobs].reverse()) { // newest first: insert each before the previous
      seen.add(j.id);
      let row = rows.get(j.id);
      if (!row) {
        // Cells are updated in place: a row a user has focused keeps its focus.
        row = h('tr', { 'data-job': j.id },
          h('td', { class: 'title' }, h('input', { type: 'checkbox', class: 'pick', 'data-compare': j.id, 'aria-label': `Compare ${j.title}`,
            onchange: renderCompare }), ' ', h('a', { href: `#/jobs/${j.id}` })),
          h('td', {}, h('span', { 'data-testid': 'job-state' })),
          h('td', { class: 'opt' }),
          h('td', {}, h('span', { class: 'mini', 'aria-hidden': 'true' }, h('span')), h('span', { class: 'pct' })),
          h('td', { class: 'opt when' }), h('td', { class: 'opt when' }), h('td', { class: 'why' }),
          h('td', { class: 'row-actions' },
            h('button', { type: 'button', 'data-action': 'rerun', text: 'Re-run', 'aria-label': `Re-run ${j.title}`,
              onclick: () => act('Re-run', async () => { const { id } = await post(`/api/jobs/${j.id}/rerun`); location.hash = `#/jobs/${id}`; }) }),
            h('button', { type: 'button', class: 'danger', 'data-action': 'delete', text: 'Delete', 'aria-label': `Delete ${j.title}`,
              onclick: () => act('Delete', async () => {
                if (!window.confirm(`Delete ${j.title} (${j.id}) with its log and report?`)) return;
                await post(`/api/jobs/${j.id}/forget`, { confirm: true });
              }) })));
        rows.set(j.id, row);
      }
      const [titleCell, stateCell, stageCell, progressCell, startedCell, tookCell, whyCell, actionsCell] = row.children;
      const word = j.state === 'ended' ? j.outcome : j.state;
      titleCell.lastChild.textContent = j.title;
      stateCell.firstChild.textContent = word;
      stateCell.firstChild.className = badgeClass(word);
      stageCell.textContent = j.stage || '';
      const pct = j.percent;
      progressCell.firstChild.hidden = pct === null;
      progressCell.firstChild.firstChild.style.width = `${pct ?? 0}%`;
      progressCell.lastChild.textContent = pct !== null ? ` ${Math.round(pct)}%` : (j.step !== null ? `step ${j.step}` : '');
      startedCell.textContent = j.startedAt ? new Date(j.startedAt).toLocaleTimeString([], { hour12: false }) : '';
      tookCell.textContent = seconds(j.duration_s);
      whyCell.textContent = j.reason || '';
      for (const button of actionsCell.children) button.disabled = j.state !== 'ended'; // cancel first
      // Moved only when out of place: moving a node drops its focus.
      const want = before ? before : null;
      if (row.parentNode !== tbody || row.nextSibling !== want) tbody.insertBefore(row, want);
      before = row;
    }
    for (const [id, row] of rows) if (!seen.has(id)) { row.remove(); rows.delete(id); }
    renderCompare();
  }
  // Several runs' curves on one chart: pick two or more, then Compare (#/compare/a,b).
  const compareButton = h('button', { type: 'button', id: 'compare-button', disabled: true, text: 'Compare curves',
    onclick: () => { location.hash = `#/compare/${picked().join(',')}`; } });
  function picked() {
    return [...tbody.querySelectorAll('input.pick:checked')].map((box) => box.dataset.compare);
  }
  function renderCompare() {
    const n = picked().length;
    compareButton.disabled = n < 2;
    compareButton.textContent = n >= 2 ? `Compare ${n} runs' curves` : 'Compare curves (pick two or more)';
  }
  const formEl = submitForm();
  main.replaceChildren(h('div', { class: 'layout' },
    h('section', { class: 'panel', 'aria-labelledby': 'jobs-h' }, h('h1', { id: 'jobs-h', text: 'Jobs' }),
      h('p', { class: 'queue' }, queueButton, queueWords, ' ', compareButton), problem, empty, h('div', { class: 'scroll' }, table)),
    h('section', { class: 'panel', 'aria-labelledby': 'submit-h' }, h('h2', { id: 'submit-h', text: 'Submit a job' }), formEl)));
  table.hidden = true;
  return stream('/api/stream', { jobs: render, queue: renderQueue });
}

function field(label, input) {
  const id = input.id;
  return h('div', { class: 'field' }, h('label', { for: id, text: label }), input);
}

function submitForm() {
  const stageSelect = (id) => h('select', { id, name: id }, h('option', { value: '', text: 'no' }),
    ...STAGES.map((s) => h('option', { value: s, text: s })));
  const demo = h('fieldset', { id: 'demo-fields' }, h('legend', { text: 'Demo training (examples/demo_train.py)' }),
    field('Steps', h('input', { id: 'steps', name: 'steps', type: 'number', min: '1', value: '300', inputmode: 'numeric' })),
    field('Fail at stage', stageSelect('failAt')),
    field('Hang at stage', stageSelect('hangAt')),
    field('Crash at stage', stageSelect('crashAt')),
    field('Stall timeout (s)', h('input', { id: 'stallTimeout', name: 'stallTimeout', type: 'number', min: '0', step: 'any', placeholder: 'off' })));
  const command = h('fieldset', { id: 'command-fields', hidden: true }, h('legend', { text: 'Any command' }),
    field('Command', h('input', { id: 'argv', name: 'argv', type: 'text', placeholder: 'python train.py --epochs 3', autocomplete: 'off', spellcheck: 'false' })),
    field('Working directory', h('input', { id: 'cwd', name: 'cwd', type: 'text', placeholder: 'the repository' })),
    field('Startup timeout (s)', h('input', { id: 'startupTimeout', type: 'number', min: '0', step: 'any', placeholder: '120' })),
    field('Heartbeat timeout (s)', h('input', { id: 'heartbeatTimeout', type: 'number', min: '0', step: 'any', placeholder: '30' })),
    field('Stall timeout (s)', h('input', { id: 'cmdStallTimeout', type: 'number', min: '0', step: 'any', placeholder: 'off' })));
  const kind = (value, label, checked) => h('label', {}, h('input', { type: 'radio', name: 'kind', value, checked }), ` ${label}`);
  const error = h('p', { class: 'error', role: 'alert', id: 'submit-error' });
  const form = h('form', { id: 'submit', novalidate: true },
    h('div', { class: 'choice', role: 'radiogroup', 'aria-label': 'What to run' }, kind('demo', 'Demo training', true), kind('command', 'A command')),
    demo, command,
    h('button', { type: 'submit', class: 'primary', id: 'submit-button', text: 'Start' }), error);
  form.addEventListener('change', (e) => {
    if (e.target.name !== 'kind') return;
    demo.hidden = e.target.value !== 'demo';
    command.hidden = e.target.value !== 'command';
  });
  const start = form.querySelector('#submit-button');
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (start.disabled) return; // a double click starts one job, not two
    start.disabled = true;
    error.textContent = '';
    const v = (id) => form.querySelector(`#${id}`).value.trim();
    let spec;
    try {
      if (form.querySelector('input[name=kind]:checked').value === 'demo') {
        spec = { kind: 'demo', steps: v('steps'), failAt: v('failAt'), hangAt: v('hangAt'), crashAt: v('crashAt'), stallTimeout: v('stallTimeout') };
      } else {
        spec = { kind: 'command', argv: splitCommand(v('argv')), cwd: v('cwd') || undefined,
          timeouts: { startupTimeout: v('startupTimeout'), heartbeatTimeout: v('heartbeatTimeout'), stallTimeout: v('cmdStallTimeout') } };
      }
      const { id } = await post('/api/jobs', spec);
      location.hash = `#/jobs/${id}`;
    } catch (err) {
      error.textContent = `Not started: ${err.message}`;
    } finally {
      start.disabled = false;
    }
  });
  return form;
}

