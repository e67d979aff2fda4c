'use strict';
// The Node state machine runs the Python client's trace tables (vectors/machine.json):
// after every event the same state name, the same actions in order and the same deadline.

const test = require('node:test');
const assert = require('node:assert/strict');
const machine = require('../src/machine.js');
const { loadVectors } = require('../test-support/vectors.js');

const { cases } = loadVectors('machine.json');

function assertDeadline(got, want, where) {
  if (want === null) assert.equal(got, null, where);
  else assert.ok(got !== null && Math.abs(got - want) <= 1e-9, `${where}: deadline ${got}, want ${want}`);
}

test('machine.json traces', async (t) => {
  for (const c of cases) {
    await t.test(c.name, () => {
      let state = machine.initial(c.config, c.t0);
      assert.equal(state.state, c.initial.state);
      assertDeadline(machine.nextDeadline(state), c.initial.deadline, 'initial');
      c.steps.forEach((s, i) => {
        const before = JSON.stringify(state);
        const [next, actions] = machine.step(state, s.event);
        assert.equal(JSON.stringify(state), before, 'step() must not mutate its input');
        const where = `step ${i} (${s.event.type} at ${s.event.t})`;
        assert.equal(next.state, s.state, where);
        assert.deepEqual(actions, s.actions, where);
        assertDeadline(machine.nextDeadline(next), s.deadline, where);
        assert.equal(machine.liveLookDue(next), s.live_look, where);
        state = next;
      });
      assert.equal(state.outcome, c.outcome);
      assert.deepEqual(state.hang, c.hang);
    });
  }
});

test('unknown config keys and event types are refused', () => {
  assert.throws(() => machine.initial({ startup_timeot: 1 }), /startup_timeot/);
  assert.throws(() => machine.step(machine.initial(), { type: 'hullo', t: 0 }), /hullo/);
});

test('chooseLead and isLauncher follow vectors/lead.json', () => {
  const vectors = loadVectors('lead.json');
  for (const c of vectors.lead) assert.equal(machine.chooseLead(c.present, c.launched_pid, c.launched_loaded ?? false), c.lead, c.name);
  for (const c of vectors.launcher) assert.equal(machine.isLauncher({ argv: c.argv }), c.launcher, c.argv.join(' '));
});

test('the drain ends as vectors/drain.json says, one rule with bridge/machine.py', () => {
  for (const c of loadVectors('drain.json').cases) assert.equal(machine.drainWait(c.in), c.wait_s, c.name);
});
