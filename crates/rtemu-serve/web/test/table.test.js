// The live table's pure parts: drops by reason and the sparklines' geometry.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { dropsText, sparkPoints, sparkSpan } from '../table.js';

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
