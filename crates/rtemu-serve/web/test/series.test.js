// The live figures: rates over the last second, a restarted counter, history, and which model
// and cut state a link shows.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { addSample, HISTORY, isCut, linkLabel, MAX_RATE_SPAN, modelOf, RATE_WINDOW } from '../series.js';

test('the rate is taken over the last second, not the last sample', () => {
  const all = new Map();
  // 1 MB/s delivered, sampled every 0.5 s.
  for (let i = 0; i <= 4; i++) addSample(all, 'l/a-b', i * 0.5, i * 500_000, i * 500, {});
  const last = all.get('l/a-b').samples.at(-1);
  assert.equal(last.bps, 8e6);
  assert.equal(last.pps, 1000);
  assert.equal(all.get('l/a-b').samples[0].bps, null, 'the first sample has no rate');
});

test('a counter that went back starts the series again', () => {
  const all = new Map();
  addSample(all, 'k', 0, 1000, 10, {});
  addSample(all, 'k', 1, 2000, 20, {});
  addSample(all, 'k', 2, 100, 1, {});
  const samples = all.get('k').samples;
  assert.equal(samples.length, 1);
  assert.equal(samples[0].bps, null);
});

test('samples older than the history are dropped', () => {
  const all = new Map();
  for (let t = 0; t <= HISTORY + 10; t++) addSample(all, 'k', t, t, t, {});
  const samples = all.get('k').samples;
  assert.ok(samples[0].t >= 10 - 1, `oldest ${samples[0].t}`);
  assert.equal(samples.at(-1).t, HISTORY + 10);
});

test('a series kept short holds a rate\u2019s worth of samples and still gives the rate', () => {
  const all = new Map();
  for (let i = 0; i <= 2 * HISTORY; i++) addSample(all, 'k', i * 0.5, i * 1000, i, {}, RATE_WINDOW);
  const samples = all.get('k').samples;
  assert.ok(samples.length <= 2 * (2 * RATE_WINDOW) + 1, `${samples.length} samples kept`);
  assert.equal(samples.at(-1).bps, 16000);
  // Kept long again (the row came onto the page), it grows from there.
  for (let i = 2 * HISTORY + 1; i <= 2 * HISTORY + 20; i++) addSample(all, 'k', i * 0.5, i * 1000, i, {});
  assert.ok(all.get('k').samples.length > 20);
});

test('after a gap in the samples there is no rate until the next sample', () => {
  const all = new Map();
  for (let i = 0; i <= 4; i++) addSample(all, 'k', i * 0.5, i * 1000, i, {});
  // 60 s without a sample (the row was off the page), 30 kB more meanwhile.
  const back = addSample(all, 'k', 62, 32_000, 40, {}).samples.at(-1);
  assert.equal(back.bps, null, 'no average over the gap');
  assert.equal(back.pps, null);
  const next = addSample(all, 'k', 63, 33_000, 41, {}).samples.at(-1);
  assert.equal(next.bps, 8000);
  // A sample just within the longest span still gives a rate.
  addSample(all, 'k', 63 + MAX_RATE_SPAN, 34_000, 42, {});
  assert.ok(all.get('k').samples.at(-1).bps > 0);
});

const LINK = { name: 'wan', a: 'r', b: 's', impaired: true, a_to_b: 'delay 10ms', b_to_a: 'delay 10ms' };

test('a link shows the lab\u2019s model until the engine speaks, then the engine\u2019s', () => {
  const all = new Map();
  assert.equal(linkLabel(all, LINK), 'delay 10ms');
  addSample(all, 'wan/a-b', 0, 0, 0, {}).last = { netem: 'delay 50ms', cut: false };
  assert.equal(modelOf(all, LINK, 'a-b'), 'delay 50ms');
  assert.equal(linkLabel(all, LINK), 'delay 50ms / delay 10ms');
  assert.equal(linkLabel(all, { ...LINK, impaired: false }), 'ideal');
  assert.equal(linkLabel(new Map(), { ...LINK, a_to_b: null, b_to_a: null }), 'trace');
});

test('a link is cut when either direction is', () => {
  const all = new Map();
  assert.equal(isCut(all, LINK), false);
  addSample(all, 'wan/b-a', 0, 0, 0, {}).last = { netem: 'x', cut: true };
  assert.equal(isCut(all, LINK), true);
});
