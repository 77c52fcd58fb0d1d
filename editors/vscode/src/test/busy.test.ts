import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BusyTracker } from '../busy';

test('busy while a command is in flight', () => {
  const b = new BusyTracker(1000);
  assert.equal(b.busy(0), false);
  b.begin();
  assert.equal(b.busy(99_999), true);
  assert.equal(b.idleIn(99_999), undefined);
  b.end();
  assert.equal(b.busy(99_999), false);
});

test('updates alone keep it busy for the quiet period', () => {
  const b = new BusyTracker(1000);
  b.activity(5000);
  assert.equal(b.busy(5500), true);
  assert.equal(b.idleIn(5500), 500);
  assert.equal(b.busy(6000), false);
  assert.equal(b.idleIn(6000), undefined);
});

test('the last command ending means idle at once, despite recent updates', () => {
  const b = new BusyTracker(1000);
  b.begin();
  b.activity(10);
  b.end();
  assert.equal(b.busy(11), false);
  b.end(); // an extra end does not go negative
  b.begin();
  assert.equal(b.busy(12), true);
});
