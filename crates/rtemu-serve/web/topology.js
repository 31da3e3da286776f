// The topology drawing: the lab as `rtemu graph` draws it (nodes; LANs and host interfaces as
// vertices of their own; point-to-point links as edges), laid out from the topology alone, so
// a reload draws the same picture. `layout` is pure; the rest builds and updates the SVG.

import { focusable, h, s, setText } from './dom.js';
import { truncate } from './format.js';
import { isCut, linkLabel } from './series.js';

const NODE_W = 150;
const COL = 270;
const ROW = 112;
const MARGIN = 24;
const MAX_IF_LINES = 3;

/** Where each vertex goes: layers from the first vertex of each connected component (a
 * breadth-first search gives each vertex its column), a few barycentre sweeps give its row.
 * Returns {vertices: [{id, kind, name, data, adj, x, y}], edges: [{from, to, kind, …}],
 * width, height}. */
export function layout(topo) {
  const vertices = [];
  const index = new Map();
  const add = (id, v) => {
    index.set(id, vertices.length);
    vertices.push({ id, ...v, adj: [] });
  };
  for (const n of topo.nodes) add(`node:${n.name}`, { kind: 'node', name: n.name, data: n });
  for (const l of topo.lans) add(`lan:${l.name}`, { kind: 'lan', name: l.name, data: l });
  for (const x of topo.externals) add(`ext:${x.name}`, { kind: 'ext', name: x.name, data: x });
  const edges = [];
  const join = (a, b, e) => {
    const ia = index.get(a);
    const ib = index.get(b);
    if (ia === undefined || ib === undefined) return;
    edges.push({ from: ia, to: ib, ...e });
    vertices[ia].adj.push(ib);
    vertices[ib].adj.push(ia);
  };
  for (const l of topo.links) {
    join(`node:${l.a}`, `node:${l.b}`, { kind: l.impaired ? 'impaired' : 'ideal', link: l });
  }
  for (const l of topo.lans) {
    for (const m of l.members) join(`node:${m}`, `lan:${l.name}`, { kind: 'member', lan: l });
  }
  for (const x of topo.externals) join(`node:${x.node}`, `ext:${x.name}`, { kind: 'host', ext: x });
  for (const v of vertices) v.adj.sort((a, b) => a - b);

  // Columns: breadth-first from the first vertex of each component.
  const column = new Array(vertices.length).fill(-1);
  const components = [];
  for (let root = 0; root < vertices.length; root++) {
    if (column[root] >= 0) continue;
    const members = [root];
    column[root] = 0;
    for (let i = 0; i < members.length; i++) {
      for (const next of vertices[members[i]].adj) {
        if (column[next] < 0) {
          column[next] = column[members[i]] + 1;
          members.push(next);
        }
      }
    }
    components.push(members);
  }
  // Rows: discovery order, then barycentre sweeps (ties keep their order).
  let top = MARGIN;
  let width = 0;
  for (const members of components) {
    const layers = [];
    for (const v of members) (layers[column[v]] ||= []).push(v);
    const row = new Map();
    // A sweep moves one layer at a time: only its rows change (placing every layer after
    // each took 10 s for a 10,000-node chain, whose every layer is one vertex).
    const place = (layer) => layer.forEach((v, i) => row.set(v, i));
    layers.forEach(place);
    const bary = (v, side) => {
      const near = vertices[v].adj.filter((u) => column[u] === column[v] + side);
      if (!near.length) return row.get(v);
      return near.reduce((sum, u) => sum + row.get(u), 0) / near.length;
    };
    for (let sweep = 0; sweep < 4; sweep++) {
      const side = sweep % 2 ? 1 : -1;
      const order = sweep % 2 ? [...layers.keys()].reverse() : [...layers.keys()];
      for (const c of order) {
        const keyed = layers[c].map((v, i) => [bary(v, side), i, v]);
        keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        layers[c] = keyed.map((k) => k[2]);
        place(layers[c]);
      }
    }
    const tallest = Math.max(...layers.map((l) => l.length));
    layers.forEach((layer, c) => {
      const offset = ((tallest - layer.length) * ROW) / 2;
      layer.forEach((v, i) => {
        vertices[v].x = MARGIN + NODE_W / 2 + c * COL;
        vertices[v].y = top + offset + i * ROW + ROW / 2;
      });
    });
    width = Math.max(width, MARGIN * 2 + NODE_W + (layers.length - 1) * COL);
    top += tallest * ROW;
  }
  return { vertices, edges, width, height: top + MARGIN };
}

/** The corners of a band `half` wide on each side of the segment from `a` to `b`: a link's
 * area to click and to show focus on (a line alone has no area). */
export function band(a, b, half) {
  const len = Math.hypot(b.x - a.x, b.y - a.y) || 1;
  const nx = (-(b.y - a.y) / len) * half;
  const ny = ((b.x - a.x) / len) * half;
  return [
    [a.x + nx, a.y + ny],
    [b.x + nx, b.y + ny],
    [b.x - nx, b.y - ny],
    [a.x - nx, a.y - ny],
  ]
    .map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`)
    .join(' ');
}

function interfacesOf(node) {
  return node.interfaces.map((i) => `${i.name} ${i.addresses[0] || ''}`.trim());
}

/** Draws lab `topo` into `container`; `onSelect({kind, name}, fromKeyboard)` opens a vertex
 * or link. `series` (the live figures) gives the links' models. */
export function renderGraph(container, topo, series, onSelect) {
  pictures.delete(container);
  if (!drawable(topo)) {
    const count = topo.nodes.length + topo.lans.length + topo.externals.length;
    container.replaceChildren(
      h(
        'p',
        { class: 'muted too-large' },
        `Lab ${topo.name} has ${count} nodes, LANs and host interfaces: more than the ${DRAW_MAX} this page draws (a picture of them all would hold the tab for minutes). The table below has every link; \`rtemu graph ${topo.name} --format svg\` draws the whole lab.`,
      ),
    );
    return;
  }
  const g = layout(topo);
  const svg = s('svg', {
    viewBox: `0 0 ${g.width} ${g.height}`,
    class: 'topology',
    role: 'group',
    'aria-label': `Topology of lab ${topo.name}: ${topo.nodes.length} nodes, ${topo.links.length} links, ${topo.lans.length} LANs`,
    'data-width': g.width,
  });
  svg.style.maxWidth = `${Math.max(g.width, 480)}px`;
  svg.append(
    s(
      'defs',
      {},
      s(
        'pattern',
        { id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
        s('rect', { width: 6, height: 6, fill: '#fbe3cf' }),
        s('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#D55E00', 'stroke-width': 2.5 }),
      ),
    ),
  );
  const drawn = { links: new Map(), vertices: [] };
  const edgeLayer = s('g', { class: 'edges' });
  const labelLayer = s('g', { class: 'edge-labels' });
  const vertexLayer = s('g', { class: 'vertices' });
  for (const e of g.edges) {
    const a = g.vertices[e.from];
    const b = g.vertices[e.to];
    const line = { x1: a.x, y1: a.y, x2: b.x, y2: b.y };
    if (e.link) {
      const link = e.link;
      const label = `link ${link.name}: ${link.a} to ${link.b}, ${link.impaired ? 'impaired' : 'ideal'}`;
      const group = s(
        'g',
        focusable(
          { class: `edge link ${e.kind}`, 'data-link': link.name, 'aria-label': label },
          (kbd) => onSelect({ kind: 'link', name: link.name }, kbd),
        ),
        s('title', {}, label),
        s('polygon', { points: band(a, b, 11), class: 'hit' }),
        s('line', { ...line, class: 'stroke' }),
      );
      edgeLayer.append(group);
      const mx = (a.x + b.x) / 2;
      const my = (a.y + b.y) / 2;
      const tag = s(
        'g',
        { class: 'edge-label', 'data-link-label': link.name, 'aria-hidden': 'true' },
        s('text', { x: mx, y: my - 9, class: 'link-name' }, link.name),
        s('text', { x: mx, y: my + 17, class: 'link-model', 'data-field': 'model' }, truncate(linkLabel(series, link), 30)),
      );
      labelLayer.append(tag);
      drawn.links.set(link.name, { edge: group, label: tag });
    } else {
      edgeLayer.append(s('line', { ...line, class: `edge ${e.kind}` }));
    }
  }
  for (const v of g.vertices) {
    const shape = vertexShape(v, onSelect);
    vertexLayer.append(shape);
    drawn.vertices.push({ el: shape, kind: v.kind, name: v.name });
  }
  svg.append(edgeLayer, vertexLayer, labelLayer);
  container.replaceChildren(svg);
  pictures.set(container, drawn);
}

/** The most vertices the page draws. A browser holds a picture of 10,000 nodes and their
 * live labels only with minutes of style and layout work, freezing the tab. */
export const DRAW_MAX = 1000;

/** Whether the page draws `topo` ([`DRAW_MAX`]). */
export function drawable(topo) {
  return topo.nodes.length + topo.lans.length + topo.externals.length <= DRAW_MAX;
}

/** Per container, the elements its picture draws each link and vertex with: a refresh finds
 * them at once (looking each link up by selector scanned the whole picture: quadratic). */
const pictures = new WeakMap();

function vertexShape(v, onSelect) {
  const { x, y } = v;
  if (v.kind === 'node') {
    const n = v.data;
    const lines = interfacesOf(n);
    const shown = lines.slice(0, MAX_IF_LINES);
    if (lines.length > shown.length) shown[MAX_IF_LINES - 1] = `+${lines.length - MAX_IF_LINES + 1} more`;
    const hgt = 30 + shown.length * 14;
    const addrs = n.interfaces.flatMap((i) => i.addresses);
    const label = `node ${n.name}${addrs.length ? `, addresses ${addrs.join(', ')}` : ''}`;
    return s(
      'g',
      focusable({ class: 'vertex node', 'data-node': n.name, 'aria-label': label }, (kbd) =>
        onSelect({ kind: 'node', name: n.name }, kbd),
      ),
      s('title', {}, label),
      s('rect', { x: x - NODE_W / 2, y: y - hgt / 2, width: NODE_W, height: hgt, rx: 6, class: 'shape' }),
      s('text', { x, y: y - hgt / 2 + 19, class: 'node-name' }, n.name),
      shown.map((line, i) =>
        s('text', { x, y: y - hgt / 2 + 35 + i * 14, class: 'node-if' }, truncate(line, 24)),
      ),
    );
  }
  if (v.kind === 'lan') {
    const l = v.data;
    const subnet = [l.ipv4, l.ipv6].filter(Boolean).join(' ');
    const label = `LAN ${l.name}${subnet ? ` ${subnet}` : ''}, members ${l.members.join(', ')}`;
    return s(
      'g',
      focusable({ class: 'vertex lan', 'data-lan': l.name, 'aria-label': label }, (kbd) =>
        onSelect({ kind: 'lan', name: l.name }, kbd),
      ),
      s('title', {}, label),
      s('rect', { x: x - 70, y: y - 22, width: 140, height: 44, rx: 22, class: 'shape' }),
      s('text', { x, y: y - 3, class: 'node-name' }, `LAN ${l.name}`),
      s('text', { x, y: y + 13, class: 'node-if' }, truncate(l.ipv4 || l.ipv6 || '', 22)),
    );
  }
  const x0 = v.data;
  const label = `host interface ${x0.host} (${x0.mode}) of node ${x0.node}`;
  return s(
    'g',
    focusable({ class: 'vertex ext', 'data-external': x0.name, 'aria-label': label }, (kbd) =>
      onSelect({ kind: 'ext', name: x0.name }, kbd),
    ),
    s('title', {}, label),
    s('polygon', {
      points: [
        [x - 62, y + 18],
        [x - 50, y - 18],
        [x + 62, y - 18],
        [x + 50, y + 18],
      ].join(' '),
      class: 'shape',
    }),
    s('text', { x, y: y - 1, class: 'node-name' }, `host ${x0.host}`),
    s('text', { x, y: y + 13, class: 'node-if' }, x0.mode),
  );
}

/** Updates what changes in the picture in `container`: models, cuts, the selection. */
export function refreshGraph(container, topo, series, selected) {
  const drawn = pictures.get(container);
  if (!drawn) return;
  for (const link of topo.links) {
    const { edge, label } = drawn.links.get(link.name) ?? {};
    if (!edge || !label) continue;
    const cut = isCut(series, link);
    edge.classList.toggle('cut', cut);
    const text = cut ? `✕ cut · ${linkLabel(series, link)}` : linkLabel(series, link);
    setText(label, 'model', truncate(text, 30));
    const chosen = selected && selected.kind === 'link' && selected.name === link.name;
    edge.classList.toggle('selected', !!chosen);
    edge.setAttribute(
      'aria-label',
      `link ${link.name}: ${link.a} to ${link.b}, ${link.impaired ? 'impaired' : 'ideal'}${cut ? ', cut' : ''}, ${linkLabel(series, link)}`,
    );
  }
  for (const { el, kind, name } of drawn.vertices) {
    el.classList.toggle('selected', !!selected && selected.kind === kind && selected.name === name);
  }
}
