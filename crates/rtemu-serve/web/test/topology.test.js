// The topology's layout: every vertex and edge placed, from the topology alone, in layers that
// follow the links, without overlaps.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DRAW_MAX, band, drawable, layout } from '../topology.js';

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

test('laying out grows linearly with the lab: ten times the nodes, far less than a hundred times the CPU time', () => {
  // The least CPU time of a few runs: CPU time, not wall time, so other work on the machine
  // (other test files run beside this one) does not count; the least, to leave out the
  // collector's work as far as possible.
  const cpu = () => {
    const { user, system } = process.cpuUsage();
    return user + system;
  };
  const fastest = (topo, runs) =>
    Math.min(
      ...Array.from({ length: runs }, () => {
        const t = cpu();
        layout(topo);
        return cpu() - t;
      }),
    );
  const [small, large] = [chain(3000), chain(30000)];
  fastest(small, 3); // warm up the JIT
  const ratio = fastest(large, 5) / fastest(small, 5);
  // Linear is 10 (CPU time measured 6-19 with builds beside it; wall time, used before,
  // measured 5-143 and failed once in six runs beside other test files); the quadratic sweep
  // this replaced measured 52-112 from 1,000 to 10,000 nodes.
  assert.ok(ratio < 50, `30,000 nodes took ${ratio.toFixed(1)} times the CPU time of 3,000`);
  const g = layout(chain(10000));
  assert.equal(new Set(g.vertices.map((v) => v.x)).size, 10000, 'one column per node of a chain');
});

test('the page draws labs of up to DRAW_MAX vertices, LANs and host interfaces counted', () => {
  assert.equal(drawable(chain(DRAW_MAX)), true);
  assert.equal(drawable(chain(DRAW_MAX + 1)), false);
  const lans = [{ name: 'lan0', members: ['n0'] }];
  assert.equal(drawable({ ...chain(DRAW_MAX), lans }), false, 'a LAN is a vertex too');
});
