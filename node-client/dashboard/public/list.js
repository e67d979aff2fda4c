// The job list (live states) and the form that starts a job: the page at #/.
import { h, badgeClass, post, splitCommand, stream } from '/dom.js';

const STAGES = ['config', 'data', 'model', 'optimizer', 'train', 'save'];

export function listPage(main) {
  document.title = 'Jobs - trainbridge dashboard';
  const tbody = h('tbody');
  const empty = h('p', { class: 'muted', text: 'No jobs yet: submit one with the form.' });
  const table = h('table', {},
    h('caption', { class: 'muted', style: 'text-align:left', text: 'Newest first; states update live.' }),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'Job' }), h('th', { scope: 'col', text: 'State' }),
      h('th', { scope: 'col', class: 'opt', text: 'Stage' }), h('th', { scope: 'col', text: 'Progress' }))),
    tbody);
  const rows = new Map();
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
          h('td', { class: 'title' }, h('a', { href: `#/jobs/${j.id}` })),
          h('td', {}, h('span', { 'data-testid': 'job-state' })),
          h('td', { class: 'opt' }),
          h('td', {}, h('span', { class: 'mini', 'aria-hidden': 'true' }, h('span')), h('span', { class: 'pct' })));
        rows.set(j.id, row);
      }
      const [titleCell, stateCell, stageCell, progressCell] = row.children;
      const word = j.state === 'ended' ? j.outcome : j.state;
      titleCell.firstChild.textContent = j.title;
      stateCell.firstChild.textContent = word;
      stateCell.firstChild.className = badgeClass(word);
      stageCell.textContent = j.stage || '';
      const pct = j.percent;
      progressCell.firstChild.hidden = pct === null;
      progressCell.firstChild.firstChild.style.width = `${pct ?? 0}%`;
      progressCell.lastChild.textContent = pct !== null ? ` ${Math.round(pct)}%` : (j.step !== null ? `step ${j.step}` : '');
      // Moved only when out of place: moving a node drops its focus.
      const want = before ? before : null;
      if (row.parentNode !== tbody || row.nextSibling !== want) tbody.insertBefore(row, want);
      before = row;
    }
    for (const [id, row] of rows) if (!seen.has(id)) { row.remove(); rows.delete(id); }
  }
  const formEl = submitForm();
  main.replaceChildren(h('div', { class: 'layout' },
    h('section', { class: 'panel', 'aria-labelledby': 'jobs-h' }, h('h1', { id: 'jobs-h', text: 'Jobs' }), empty, table),
    h('section', { class: 'panel', 'aria-labelledby': 'submit-h' }, h('h2', { id: 'submit-h', text: 'Submit a job' }), formEl)));
  table.hidden = true;
  return stream('/api/stream', { jobs: render });
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
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
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
    }
  });
  return form;
}

