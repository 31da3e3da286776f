// The topology's layout: every vertex and edge placed, from the topology alone, in layers that
// follow the links, without overlaps.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { band, layout } from '../topology.js';

const node = (name) => ({ name, netns: `rtemu-x-${name}`, loopback: [], interfaces: [] });
const TOPO = {
  name: 'x',
  nodes: ['client', 'router', 'server', 'monitor', 'lonely'].map(node),
  links: [
    { name: 'access', a: 'client', b: 'router', impaired: true },
    { name: 'wan', a: 'router', b: 'server', impaired: true },
    { name: 'mgmt', a: 'router', b: 'monitor', impaired: false },
  ],
  lans: [{ name: 'office', members: ['client', 'monitor'] }],
  externals: [{ name: 'up', node: 'server', host: 'eth1', mode: 'macvlan' }],
};

test('every node, LAN and host interface is a vertex; every link and membership an edge', () => {
  const g = layout(TOPO);
  assert.deepEqual(
    g.vertices.map((v) => v.id),
    ['node:client', 'node:router', 'node:server', 'node:monitor', 'node:lonely', 'lan:office', 'ext:up'],
  );
  assert.deepEqual(
    g.edges.map((e) => e.kind),
    ['impaired', 'impaired', 'ideal', 'member', 'member', 'host'],
  );
});

test('columns follow the links from the first node; components stack', () => {
  const g = layout(TOPO);
  const at = Object.fromEntries(g.vertices.map((v) => [v.id, v]));
  const col = (id) => at[id].x;
  assert.ok(col('node:client') < col('node:router'));
  assert.ok(col('node:router') < col('node:server'));
  assert.ok(col('node:server') < col('ext:up'));
  assert.equal(col('node:router'), col('lan:office'), 'both one hop from the client');
  // The unconnected node starts its own component below the first.
  const firstBottom = Math.max(...g.vertices.filter((v) => v.id !== 'node:lonely').map((v) => v.y));
  assert.ok(at['node:lonely'].y > firstBottom);
  assert.ok(g.width > 0 && g.height > at['node:lonely'].y);
});

test('no two vertices share a place, and the same topology draws the same picture', () => {
  const g = layout(TOPO);
  const places = new Set(g.vertices.map((v) => `${v.x},${v.y}`));
  assert.equal(places.size, g.vertices.length);
  const again = layout(structuredClone(TOPO));
  assert.deepEqual(again.vertices.map((v) => [v.x, v.y]), g.vertices.map((v) => [v.x, v.y]));
});

test('an edge to a node the topology lacks is left out', () => {
  const g = layout({ ...TOPO, links: [...TOPO.links, { name: 'ghost', a: 'client', b: 'nobody', impaired: false }] });
  assert.equal(g.edges.filter((e) => e.link && e.link.name === 'ghost').length, 0);
});

test('a link\u2019s band lies half its width on each side of the line', () => {
  assert.equal(band({ x: 0, y: 0 }, { x: 10, y: 0 }, 2), '0.0,2.0 10.0,2.0 10.0,-2.0 0.0,-2.0');
});

/** A chain of `n` nodes: as many layers as nodes, the layout's worst case. */
function chain(n) {
  const nodes = Array.from({ length: n }, (_, i) => node(`n${i}`));
  const links = Array.from({ length: n - 1 }, (_, i) => ({
    name: `l${i}`,
    a: `n${i}`,
    b: `n${i + 1}`,
    impaired: false,
  }));
  return { name: 'chain', nodes, links, lans: [], externals: [] };
}

test('laying out grows linearly with the lab: ten times the nodes, far less than a hundred times the time', () => {
  // The fastest of five runs: the least disturbed by the collector and by other work.
  const fastest = (topo) =>
    Math.min(
      ...[0, 1, 2, 3, 4].map(() => {
        const t = performance.now();
        layout(topo);
        return performance.now() - t;
      }),
    );
  const [small, large] = [chain(2000), chain(20000)];
  fastest(small); // warm up the JIT
  const ratio = fastest(large) / fastest(small);
  // Linear is 10 (measured 5-31 on a shared machine); the quadratic sweep this replaced
  // measured 52-112 from 1,000 to 10,000 nodes.
  assert.ok(ratio < 50, `20,000 nodes took ${ratio.toFixed(1)} times as long as 2,000`);
  const g = layout(chain(10000));
  assert.equal(new Set(g.vertices.map((v) => v.x)).size, 10000, 'one column per node of a chain');
});
