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

test('leadPriority ranks hellos as bridge/machine.py lead_priority does', () => {
  const ranked = [
    [{ pid: 10, rank: 0, world_size: 2 }, 5, 2], // torchrun's rank 0 leads
    [{ pid: 11, rank: 1, world_size: 2 }, 5, 0], // other ranks never lead
    [{ pid: 5, rank: null, world_size: null }, 5, 1], // the launched process
    [{ pid: 5, rank: 0, world_size: null }, 5, 1], // RANK=0 alone is not distributed
    [{ pid: 12, rank: null, world_size: null }, 5, 0], // a subprocess of the script
    [{ pid: 12 }, null, 0],
  ];
  for (const [hello, launched, priority] of ranked) assert.equal(machine.leadPriority(hello, launched), priority);
});
