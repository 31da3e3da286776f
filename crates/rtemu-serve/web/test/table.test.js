// The live table's pure parts: drops by reason and the sparklines' geometry.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { dropsText, linkHosts, rowsToRefresh, sparkPoints, sparkSpan } from '../table.js';

test('drops list the non-zero reasons, or 0', () => {
  assert.equal(dropsText({ dropped: { loss: 12, 'queue-full': 0, 'link-down': 30000 } }), 'loss 12, link-down 30.0 k');
  assert.equal(dropsText({ dropped: { loss: 0 } }), '0');
});

test('a sparkline spans at least 30 s and at most the history', () => {
  assert.equal(sparkSpan([{ t: 100 }, { t: 105 }]), 30);
  assert.equal(sparkSpan([{ t: 0 }, { t: 100 }]), 100);
  assert.equal(sparkSpan([{ t: 0 }, { t: 1000 }]), 300);
});

test('the newest point is at the right edge, the largest at the top, unknown values left out', () => {
  const samples = [
    { t: 0, bps: null },
    { t: 10, bps: 5 },
    { t: 20, bps: 10 },
    { t: 30, bps: 0 },
  ];
  assert.equal(sparkPoints(samples, 'bps', 30, 90, 26), '30.0,13.0 60.0,2.0 90.0,24.0');
  assert.equal(sparkPoints(samples.slice(0, 2), 'bps', 30, 90, 26), null, 'one point is no line');
});

test('a small table is refreshed whole on every tick', () => {
  assert.deepEqual(rowsToRefresh(5, new Set([3]), 2, 200), { rows: [0, 1, 2, 3, 4], cursor: 0 });
});

test('a large table refreshes the rows on screen and a rotating few, reaching every row', () => {
  const count = 20000;
  const budget = 200;
  const shown = new Set([7000, 7001, 7002]);
  const first = rowsToRefresh(count, shown, 0, budget);
  assert.equal(first.rows.length, budget + shown.size);
  assert.ok(first.rows.includes(7001) && first.rows.includes(0) && first.rows.includes(199));
  assert.equal(first.cursor, budget);
  // Over count / budget ticks every row has been refreshed at least once.
  const seen = new Set();
  let cursor = 0;
  for (let tick = 0; tick < count / budget; tick++) {
    const next = rowsToRefresh(count, shown, cursor, budget);
    assert.ok(next.rows.length <= budget + shown.size);
    next.rows.forEach((i) => seen.add(i));
    cursor = next.cursor;
  }
  assert.equal(seen.size, count);
  // The rotation wraps at the end.
  assert.deepEqual(rowsToRefresh(250, new Set(), 200, 100).rows, [...Array(50).keys()].map((k) => k + 200).concat([...Array(50).keys()]).sort((a, b) => a - b));
  assert.equal(rowsToRefresh(250, new Set(), 200, 100).cursor, 50);
});

test('a link of a lab across hosts names the hosts it joins; on one machine none', () => {
  const nodes = [
    { name: 'b', host: 'h1' },
    { name: 'a', host: 'h1' },
    { name: 'c', host: 'h2' },
  ];
  assert.equal(linkHosts({ nodes }, { a: 'b', b: 'c' }), 'h1 ↔ h2');
  assert.equal(linkHosts({ nodes }, { a: 'a', b: 'b' }), 'on h1');
  assert.equal(linkHosts({ nodes: [{ name: 'a' }, { name: 'b' }] }, { a: 'a', b: 'b' }), null);
});
