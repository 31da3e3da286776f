// The details panel's pure parts: the histogram's buckets and where an error points.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { buckets, errorPlace, findSelected } from '../details.js';

test('buckets run from 0 to each edge and on past the last; late ones lie past the threshold', () => {
  const f = {
    late_after_ns: 100_000,
    released_histogram: { edges_ns: [1000, 100_000, 1_000_000], counts: [1, 2, 3, 4] },
  };
  assert.deepEqual(buckets(f), [
    { from: 0, to: 1000, n: 1, share: 0.1, late: false },
    { from: 1000, to: 100_000, n: 2, share: 0.2, late: false },
    { from: 100_000, to: 1_000_000, n: 3, share: 0.3, late: true },
    { from: 1_000_000, to: null, n: 4, share: 0.4, late: true },
  ]);
  const none = buckets({ late_after_ns: 1, released_histogram: { edges_ns: [5], counts: [0, 0] } });
  assert.deepEqual(none.map((b) => b.share), [0, 0]);
});

test('an error naming a column selects the word there, counted in the trimmed text', () => {
  const value = '  delay 10ms lossy 1%';
  const place = errorPlace("unknown keyword 'lossy' (column 12)", value);
  assert.deepEqual(place, { column: 12, start: 13, end: 18 });
  assert.equal(value.slice(place.start, place.end), 'lossy');
  assert.equal(errorPlace('no lab named x', value), null);
});

test('the selection is found by kind and name, and is gone with its object', () => {
  const topo = { links: [{ name: 'wan' }], nodes: [{ name: 'wan' }], lans: [], externals: [] };
  assert.equal(findSelected(topo, { kind: 'node', name: 'wan' }), topo.nodes[0]);
  assert.equal(findSelected(topo, { kind: 'lan', name: 'wan' }), null);
  assert.equal(findSelected(topo, null), null);
});
