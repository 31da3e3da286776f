// The details panel: what is known of the selected node, link, LAN or host interface, and for
// a link the forms that change, cut, restore or capture it through the API. Every function
// takes a context: {title, body} (the panel's elements), {topo, selected, series, counters}
// (what the page knows) and {client, lab} (where to send changes).

import { labPath } from './api.js';
import { h, s, setText } from './dom.js';
import { fmtBytes, fmtContainer, fmtCount, fmtEdge, fmtNs } from './format.js';
import { directionsOf, isCut, modelOf } from './series.js';
import { fill } from './table.js';

/** The object URL of the last capture, revoked when the next one replaces it. */
let blobUrl = null;

/** The selected object of `topo`, or null when there is none (or it is gone). */
export function findSelected(topo, selected) {
  if (!selected || !topo) return null;
  const lists = { link: topo.links, node: topo.nodes, lan: topo.lans, ext: topo.externals };
  return (lists[selected.kind] || []).find((x) => x.name === selected.name) || null;
}

/** Draws the panel for the selection afresh. */
export function renderDetails(ctx) {
  const { title, body } = ctx;
  const item = findSelected(ctx.topo, ctx.selected);
  if (!item) {
    title.textContent = 'Details';
    body.replaceChildren(
      h('p', { class: 'muted' }, 'Select a node or a link in the picture or the table (click, or Tab and Enter).'),
    );
    return;
  }
  const kind = ctx.selected.kind;
  if (kind === 'link') linkDetails(item, ctx);
  else if (kind === 'node') nodeDetails(item, ctx);
  else if (kind === 'lan') {
    title.textContent = `LAN ${item.name}`;
    body.replaceChildren(
      h('dl', { class: 'facts' },
        h('dt', {}, 'subnets'), h('dd', {}, [item.ipv4, item.ipv6].filter(Boolean).join(', ') || 'none'),
        h('dt', {}, 'members'), h('dd', {}, item.members.join(', '))),
      h('p', { class: 'muted' }, 'A bridge: its members\u2019 kernel counters are in each node\u2019s details.'),
    );
  } else {
    title.textContent = `Host interface ${item.host}`;
    body.replaceChildren(
      h('dl', { class: 'facts' },
        h('dt', {}, 'node'), h('dd', {}, item.node),
        h('dt', {}, 'mode'), h('dd', {}, item.mode === 'move' ? 'moved into the node' : 'macvlan on the host interface')),
    );
  }
  refreshDetails(ctx);
}

function nodeDetails(node, ctx) {
  const { title, body } = ctx;
  title.textContent = `Node ${node.name}`;
  const container = node.container
    ? [h('dt', {}, 'container'), h('dd', { 'data-field': 'container' }, fmtContainer(node.container))]
    : [];
  body.replaceChildren(
    h('dl', { class: 'facts' },
      h('dt', {}, 'namespace'), h('dd', {}, h('code', {}, node.netns)),
      ...container,
      h('dt', {}, 'loopback'), h('dd', {}, node.loopback.join(', ') || 'none')),
    h('table', { class: 'ifaces' },
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'interface'),
        h('th', { scope: 'col' }, 'addresses'),
        h('th', { scope: 'col', class: 'num' }, 'packets rx / tx', h('br'), 'drops rx / tx'))),
      h('tbody', {}, node.interfaces.map((i) =>
        h('tr', { 'data-if': `${node.name}/${i.segment}` },
          h('th', { scope: 'row' }, i.name, h('span', { class: 'muted' }, ` on ${i.segment}`), h('div', { class: 'muted small' }, i.mac)),
          h('td', { class: 'small' }, i.addresses.map((a) => h('div', {}, a))),
          h('td', { class: 'num' }, h('div', { 'data-field': 'packets' }, '—'), h('div', { class: 'muted', 'data-field': 'ifdrops' }, '—')))))),
    h('p', { class: 'muted small' }, 'The kernel\u2019s counters, every second.'),
    logsBox(node, ctx),
  );
}

/** The last lines of a node's output (its container's, or its start-up commands'), fetched
 * when asked for and shown as text. */
function logsBox(node, { client, lab }) {
  const out = h('pre', { class: 'logs small', 'data-field': 'logs' });
  const button = h('button', { type: 'button', 'data-action': 'logs' }, 'Show its output (last 200 lines)');
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const reply = await client.getJson(`${labPath(lab, 'nodes', node.name, 'logs')}?tail=200`);
      out.textContent = `${reply.stdout}${reply.stderr}` || '(no output)';
    } catch (e) {
      out.textContent = e.message;
    } finally {
      button.disabled = false;
    }
  });
  return h('div', {}, button, out);
}

function linkDetails(link, ctx) {
  ctx.title.textContent = `Link ${link.name}`;
  const parts = [
    h('p', { class: 'subtitle' },
      `${link.a} ⇄ ${link.b} · `,
      h('span', { class: `tag ${link.impaired ? 'impaired' : 'ideal'}` }, link.impaired ? 'impaired' : 'ideal'),
      h('span', { class: 'tag cut', 'data-field': 'cut', hidden: true }, '✕ cut')),
  ];
  // One line says what the buttons below the form did.
  const note = h('p', { class: 'form-status', role: 'status', 'data-field': 'action-status' });
  if (link.impaired) {
    parts.push(setForm(link, ctx), h('div', { class: 'actions' }, cutButtons(link, note, ctx), captureBox(link, note, ctx)), note);
  } else {
    parts.push(h('p', { class: 'muted' }, 'An ideal link is a plain veth pair: the kernel carries it, so only its counters show, and it cannot be changed.'));
    parts.push(h('div', { class: 'actions' }, captureBox(link, note, ctx)), note);
  }
  for (const d of directionsOf(link)) parts.push(directionCard(link, d, ctx.series));
  ctx.body.replaceChildren(...parts);
}

function directionCard(link, d, series) {
  const fig = (label, field, title, wide) =>
    h('div', { class: wide ? 'fig wide' : 'fig', title: title || null }, h('dt', {}, label), h('dd', { 'data-field': field }, '—'));
  const figures = link.impaired
    ? [
        fig('throughput', 'bps', null, true),
        fig('packets/s', 'pps'),
        fig('queue', 'queue', 'copies waiting for their release time'),
        fig('drops', 'drops', 'by reason', true),
        fig('duplicates', 'dups'),
        fig('corrupted', 'corrupted'),
        fig('marked CE', 'marked', 'ECN-capable copies a queue marked congestion experienced instead of dropping'),
        fig('error p50', 'p50', 'release error: when the frame left − when the model said it should'),
        fig('error p99', 'p99'),
        fig('error max', 'max'),
        fig('late / early', 'lateearly', 'late: released past the late threshold; early: released before their time (never)'),
      ]
    : [fig('throughput', 'bps', null, true), fig('packets/s', 'pps'), fig('drops', 'drops', 'sender tx + receiver rx drops')];
  return h('section', { class: 'dir-card', 'data-dir': d.dir, 'aria-label': `${d.from} to ${d.to}` },
    h('h3', {}, `${d.from} → ${d.to}`, h('span', { class: 'muted small' }, ` ${d.dir}`)),
    link.impaired ? h('p', { class: 'model' }, h('span', { class: 'muted' }, 'model '), h('code', { 'data-field': 'netem' }, modelOf(series, link, d.dir) || 'trace')) : null,
    h('dl', { class: 'figures' }, figures),
    link.impaired ? h('div', { class: 'histogram', 'data-field-hist': '' }) : null,
    link.impaired ? h('p', { class: 'hist-caption', 'data-field': 'hist-caption' }) : null,
  );
}

function setForm(link, { client, lab, series }) {
  const errorId = 'netem-error';
  const input = h('input', {
    id: 'netem-input', name: 'netem', type: 'text', autocomplete: 'off', spellcheck: 'false',
    value: modelOf(series, link, 'a-b') || '', 'aria-describedby': errorId,
  });
  const dir = h('select', { id: 'netem-dir', name: 'dir', 'aria-label': 'directions' },
    h('option', { value: 'both' }, 'both directions'),
    h('option', { value: 'a-b' }, `${link.a} → ${link.b}`),
    h('option', { value: 'b-a' }, `${link.b} → ${link.a}`));
  const error = h('div', { id: errorId, class: 'field-error', role: 'alert', hidden: true });
  const done = h('p', { class: 'form-status', role: 'status', 'data-field': 'set-status' });
  const form = h('form', { class: 'set-form', 'data-form': 'set', novalidate: true },
    h('label', { for: 'netem-input' }, 'New model (netem syntax)'),
    h('div', { class: 'row' }, input, dir, h('button', { type: 'submit' }, 'Apply')),
    error, done);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const netem = input.value.trim();
    error.hidden = true;
    input.removeAttribute('aria-invalid');
    done.textContent = 'applying…';
    try {
      await client.postJson(labPath(lab, 'links', link.name, 'set'), { netem, dir: dir.value });
      done.textContent = `applied: ${netem} (${dir.options[dir.selectedIndex].text})`;
    } catch (err) {
      done.textContent = '';
      showFieldError(input, error, err.message);
    }
  });
  return form;
}

/** Where an error `message` that names a column points: {column, start, end}, the word there
 * as offsets into `value` (the field's text), or null. The column counts from the start of the
 * text sent, which was `value` trimmed. */
export function errorPlace(message, value) {
  const m = /\(column (\d+)\)/.exec(message);
  if (!m) return null;
  const column = Number(m[1]);
  const sent = value.trim();
  const start = value.indexOf(sent) + column - 1;
  let end = start;
  while (end < value.length && !/\s/.test(value[end])) end++;
  return { column, start, end: Math.max(end, start + 1) };
}

/** Shows the server's error under the field; when it names a column, points at it and
 * selects the word there. */
function showFieldError(input, box, message) {
  input.setAttribute('aria-invalid', 'true');
  const parts = [h('p', { class: 'error-text', 'data-field': 'error' }, message)];
  const place = errorPlace(message, input.value);
  if (place) {
    const col = place.column;
    parts.push(h('pre', { class: 'caret', 'aria-hidden': 'true' }, `${input.value.trim()}\n${' '.repeat(Math.max(col - 1, 0))}^ column ${col}`));
    input.focus();
    input.setSelectionRange(place.start, place.end);
  }
  box.replaceChildren(...parts);
  box.hidden = false;
}

function cutButtons(link, note, { client, lab }) {
  const act = (what) => async () => {
    note.textContent = what === 'down' ? 'cutting…' : 'restoring…';
    try {
      await client.postJson(labPath(lab, 'links', link.name, what), {});
      note.textContent = what === 'down' ? 'cut: the link carries nothing' : 'restored';
    } catch (err) {
      note.textContent = err.message;
    }
  };
  return h('div', { class: 'cut-buttons' },
    h('button', { type: 'button', 'data-action': 'down', onclick: act('down') }, '✕ Cut'),
    h('button', { type: 'button', 'data-action': 'up', onclick: act('up') }, 'Restore'));
}

function captureBox(link, out, { client, lab }) {
  const seconds = h('select', { id: 'capture-seconds', 'aria-label': 'capture length' },
    [2, 5, 10, 30].map((n) => h('option', { value: n, selected: n === 5 }, `${n} s`)));
  const button = h('button', { type: 'button', 'data-action': 'capture', 'aria-label': `capture ${link.name} as pcapng` }, 'Start');
  button.addEventListener('click', async () => {
    const n = Number(seconds.value);
    button.disabled = true;
    out.replaceChildren(`capturing both ends of ${link.name} for ${n} s…`);
    try {
      const resp = await client.request(`${labPath(lab, 'capture')}?target=${encodeURIComponent(link.name)}&duration=${n}&count=1000000`);
      const blob = await resp.blob();
      if (blobUrl) URL.revokeObjectURL(blobUrl);
      blobUrl = URL.createObjectURL(blob);
      const name = `${lab}-${link.name}.pcapng`;
      out.replaceChildren(h('a', { href: blobUrl, download: name, 'data-download': '' }, `Download ${name}`), ` (${fmtBytes(blob.size)})`);
    } catch (err) {
      out.replaceChildren(`capture failed: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  });
  return h('div', { class: 'capture' },
    h('span', { class: 'label' }, 'Capture pcapng'), seconds, button);
}

/** Updates the panel's figures from what the page knows now. */
export function refreshDetails(ctx) {
  const item = findSelected(ctx.topo, ctx.selected);
  if (!item) return;
  const body = ctx.body;
  if (ctx.selected.kind === 'node') {
    for (const row of body.querySelectorAll('tr[data-if]')) {
      const c = ctx.counters.get(row.dataset.if);
      if (!c) continue;
      setText(row, 'packets', `${fmtCount(c.rx_packets)} / ${fmtCount(c.tx_packets)}`);
      setText(row, 'ifdrops', `${fmtCount(c.rx_dropped)} / ${fmtCount(c.tx_dropped)}`);
    }
    return;
  }
  if (ctx.selected.kind !== 'link') return;
  const link = item;
  const cutTag = body.querySelector('[data-field="cut"]');
  if (cutTag) cutTag.hidden = !isCut(ctx.series, link);
  for (const card of body.querySelectorAll('.dir-card')) {
    const series = ctx.series.get(`${link.name}/${card.dataset.dir}`);
    if (!series || !series.samples.length) continue;
    fill(card, series);
    const d = series.last;
    const hist = card.querySelector('[data-field-hist]');
    if (d && hist) {
      hist.replaceChildren(histogram(d.fidelity));
      setText(card, 'hist-caption', `release error of ${fmtCount(d.fidelity.count)} copies since the lab came up · hatched: late (over ${fmtNs(d.fidelity.late_after_ns)})`);
    }
  }
}

/** The buckets of a fidelity's release-error histogram: {from, to (null for the last), n,
 * share (of all copies), late (the bucket lies past the late threshold)}. */
export function buckets(f) {
  const { counts, edges_ns: edges } = f.released_histogram;
  const total = counts.reduce((a, b) => a + b, 0);
  return counts.map((n, i) => {
    const from = i === 0 ? 0 : edges[i - 1];
    const to = i < edges.length ? edges[i] : null;
    const late = to === null ? from >= f.late_after_ns : to > f.late_after_ns;
    return { from, to, n, share: total ? n / total : 0, late };
  });
}

/** The release error's histogram: one bar per bucket (its share of the copies), hatched
 * where the bucket lies past the late threshold. */
function histogram(f) {
  const all = buckets(f);
  const W = 440;
  const H = 72;
  const top = 12;
  const base = H - 17;
  const bw = W / all.length;
  const total = all.reduce((a, b) => a + b.n, 0);
  const bars = all.map(({ from, to, n, share, late }, i) => {
    const hgt = n ? Math.max(2, share * (base - top)) : 0;
    const range = to === null ? `${fmtNs(from)} and more` : `${fmtNs(from)} to ${fmtNs(to)}`;
    const title = `${range}: ${n} copies (${(share * 100).toFixed(1)} %)`;
    return s('g', { class: 'bucket' },
      s('title', {}, title),
      s('rect', { x: i * bw + 2, y: base - hgt, width: bw - 4, height: hgt, class: late ? 'bar late' : 'bar' }),
      share >= 0.005 ? s('text', { x: i * bw + bw / 2, y: base - hgt - 3, class: 'bar-value' }, `${Math.round(share * 100)}%`) : null,
      i === 0 || String(from).startsWith('1')
        ? s('text', { x: i * bw, y: H - 4, class: i === 0 ? 'bar-label first' : 'bar-label' }, i === 0 ? '0' : fmtEdge(from))
        : null,
      s('line', { x1: i * bw, y1: base, x2: i * bw, y2: base + 4, class: 'tick' }));
  });
  return s('svg', {
    viewBox: `0 0 ${W} ${H}`, class: 'hist', role: 'img',
    'aria-label': `Release error histogram of ${total} copies`,
  },
  s('line', { x1: 0, y1: base, x2: W, y2: base, class: 'baseline' }),
  bars);
}
