// The live table's pure parts: drops by reason and the sparklines' geometry.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { dropsText, linkHosts, nodesToCount, PAGE, pageOf, pageText, sparkPoints, sparkSpan } from '../table.js';

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

/** A chain of `n` links: link `l{i}` from `n{i}` to `n{i+1}`, nodes on hosts h0 and h1 by halves. */
function chain(n) {
  const nodes = [...Array(n + 1).keys()].map((i) => ({ name: `n${i}`, host: i <= n / 2 ? 'h0' : 'h1' }));
  const links = [...Array(n).keys()].map((i) => ({ name: `l${i}`, a: `n${i}`, b: `n${i + 1}` }));
  return { nodes, links };
}

test('the pages of a large lab hold every link once, in order, a page at a time', () => {
  const topo = chain(10001);
  const first = pageOf(topo, '', 0);
  assert.equal(first.pages, Math.ceil(10001 / PAGE));
  assert.equal(first.total, 10001);
  const seen = [];
  for (let page = 0; page < first.pages; page++) {
    const p = pageOf(topo, '', page);
    assert.equal(p.page, page);
    assert.equal(p.first, page * PAGE);
    assert.ok(p.links.length <= PAGE && p.links.length > 0);
    seen.push(...p.links.map((l) => l.name));
  }
  assert.deepEqual(seen, topo.links.map((l) => l.name));
  // Out of range is the nearest page, so a shrinking match list never shows an empty page.
  assert.equal(pageOf(topo, '', 10 ** 6).page, first.pages - 1);
  assert.equal(pageOf(topo, '', -3).page, 0);
  assert.equal(pageOf({ nodes: [], links: [] }, '', 4).pages, 1);
});

test('the filter finds links by their name, their nodes or their hosts, in any case', () => {
  const topo = chain(300);
  assert.deepEqual(pageOf(topo, 'L29', 0).links.map((l) => l.name), ['l29', 'l290', 'l291', 'l292', 'l293', 'l294', 'l295', 'l296', 'l297', 'l298', 'l299']);
  // n7 is an end of l6 and l7 (and n70.. of others).
  assert.ok(['l6', 'l7'].every((n) => pageOf(topo, ' n7 ', 0).links.some((l) => l.name === n)));
  // Links within h0, within h1, and the one between: `h0 ↔ h1` names both.
  const between = pageOf(topo, '↔', 0);
  assert.deepEqual(between.links.map((l) => l.name), ['l150']);
  assert.equal(pageOf(topo, 'h1', 0).total, 150);
  assert.equal(pageOf(topo, 'nothing-like-it', 0).total, 0);
});

test('the pager says which links the page shows, of how many, and the filter', () => {
  const topo = chain(9999);
  assert.equal(pageText(pageOf(topo, '', 1), ''), 'links 101–200 of 9,999');
  assert.equal(pageText(pageOf(topo, '', 99), ''), `links 9,901–9,999 of 9,999`);
  assert.equal(pageText(pageOf(topo, 'l999', 0), ' l999'), 'links 1–10 of 10 matching "l999"', 'l999 and l9990 to l9998');
  assert.equal(pageText(pageOf(topo, 'x', 0), 'x'), 'no link matches "x"');
  assert.equal(pageText(pageOf({ nodes: [], links: [] }, '', 0), ''), 'no links');
});

test('a page asks for the counters of its ideal links\u2019 ends and of what is selected, once each', () => {
  const topo = chain(300);
  topo.links[1].impaired = true;
  const page = pageOf(topo, '', 0, 3).links;
  assert.deepEqual(nodesToCount(topo, page, null), ['n0', 'n1', 'n2', 'n3']);
  assert.deepEqual(nodesToCount(topo, page, { kind: 'link', name: 'l250' }), ['n0', 'n1', 'n2', 'n3', 'n250', 'n251']);
  assert.deepEqual(nodesToCount(topo, page, { kind: 'node', name: 'n2' }), ['n0', 'n1', 'n2', 'n3']);
  // A page of impaired links only, nothing selected: no node (the engine has their figures).
  assert.deepEqual(nodesToCount(topo, [topo.links[1]], null), []);
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
