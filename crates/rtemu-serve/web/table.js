// The live table: a row per link direction with its throughput, queue, drops, release error
// and sparklines, rewritten in place as figures arrive. `fill` also writes the details' cards.

import { focusable, h, s, setText } from './dom.js';
import { fmtBits, fmtCount, fmtNs, fmtNsTriple, fmtRate } from './format.js';
import { directionsOf, HISTORY } from './series.js';

/** The shortest span a sparkline is drawn over, seconds. */
const SPARK_MIN = 30;

/** How many rows off screen each refresh rewrites, besides the rows on screen. A table of up
 * to this many rows is rewritten whole on every tick; a large lab's (20,000 rows for 10,000
 * links) is not, yet each of its rows is at most rows / ROTATE ticks old, and a row is
 * rewritten as soon as it scrolls into view. */
export const ROTATE = 200;

/** Per table body: its rows, which of them are on screen, where the rotation is, the last
 * figures (for a row scrolling into view) and the observer that watches the rows. */
const tables = new WeakMap();

/** Each lab's node → host map, for [`linkHosts`]. */
const hostMaps = new WeakMap();

/** The hosts link `link` of lab `topo` joins, for a lab across hosts: `h1 ↔ h2` between two,
 * `on h1` within one; null on one machine (its nodes name no host). */
export function linkHosts(topo, link) {
  // A map per lab, made once: a search of the nodes per link grew with the square of the lab.
  let hosts = hostMaps.get(topo);
  if (!hosts) {
    hosts = new Map(topo.nodes.map((n) => [n.name, n.host]));
    hostMaps.set(topo, hosts);
  }
  const [a, b] = [hosts.get(link.a), hosts.get(link.b)];
  if (!a || !b) return null;
  return a === b ? `on ${a}` : `${a} ↔ ${b}`;
}

/** Writes the rows of lab `topo`'s links into `tbody`; `onSelect` opens a link. */
export function renderTable(tbody, topo, onSelect) {
  const rows = [];
  for (const link of topo.links) {
    for (const d of directionsOf(link)) {
      const label = `link ${link.name}, ${d.from} to ${d.to}`;
      rows.push(
        h(
          'tr',
          focusable(
            {
              'data-link': link.name,
              'data-dir': d.dir,
              class: link.impaired ? 'impaired' : 'ideal',
              'aria-label': label,
              role: 'row',
            },
            (kbd) => onSelect({ kind: 'link', name: link.name }, kbd),
          ),
          d.dir === 'a-b'
            ? h(
                'th',
                { scope: 'rowgroup', rowspan: 2, class: 'link-cell' },
                h('div', {}, link.name),
                linkHosts(topo, link) && h('div', { class: 'hosts muted small', 'data-hosts': '' }, linkHosts(topo, link)),
                h('span', { class: `tag ${link.impaired ? 'impaired' : 'ideal'}` }, link.impaired ? 'impaired' : 'ideal'),
              )
            : null,
          h('td', { class: 'way' }, `${d.from} → ${d.to}`),
          h(
            'td',
            { class: 'num rate' },
            h('div', { class: 'bps', 'data-field': 'bps' }, '—'),
            h('div', { class: 'pps' }, h('span', { 'data-field': 'pps' }, '—'), ' pkt/s'),
          ),
          h('td', { class: 'num', 'data-field': 'queue' }, '—'),
          h('td', { class: 'num', 'data-field': 'dropsum' }, '—'),
          h('td', { class: 'num', 'data-field': 'marked' }, '—'),
          h('td', { class: 'num', 'data-field': 'dupcor' }, '—'),
          h('td', { class: 'num', 'data-field': 'error' }, link.impaired ? '—' : 'kernel counters'),
          h('td', { class: 'num', 'data-field': 'lateearly' }, '—'),
          h('td', { class: 'spark', 'data-field-spark': '' }),
        ),
      );
    }
  }
  const table = { rows, shown: new Set(), cursor: 0, all: null, observer: null };
  tables.get(tbody)?.observer?.disconnect();
  tables.set(tbody, table);
  if (!rows.length) {
    rows.push(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'This lab has no point-to-point links.')));
  }
  tbody.replaceChildren(...rows);
  if (typeof IntersectionObserver === 'function' && table.rows.length > ROTATE) {
    const index = new Map(table.rows.map((row, i) => [row, i]));
    // Half a screen beyond each edge: rows about to be scrolled to are already current.
    table.observer = new IntersectionObserver(
      (entries) => {
        for (const e of entries) {
          const i = index.get(e.target);
          if (!e.isIntersecting) {
            table.shown.delete(i);
          } else if (!table.shown.has(i)) {
            table.shown.add(i);
            if (table.all) refreshRow(e.target, table.all);
          }
        }
      },
      { rootMargin: '50% 0px' },
    );
    for (const row of table.rows) table.observer.observe(row);
  }
}

/** Which of `count` rows a refresh rewrites: every one when there are at most `budget`;
 * otherwise those `shown` (indices) and the next `budget` from `cursor` on, wrapping. Returns
 * the indices in ascending order and where the next refresh's rotation starts. */
export function rowsToRefresh(count, shown, cursor, budget) {
  if (count <= budget) return { rows: [...Array(count).keys()], cursor: 0 };
  const picked = new Set(shown);
  const start = cursor % count;
  for (let k = 0; k < budget; k++) picked.add((start + k) % count);
  return { rows: [...picked].sort((a, b) => a - b), cursor: (start + budget) % count };
}

/** A direction's drops by reason, the non-zero ones: `loss 12, queue-full 3`, or `0`. */
export function dropsText(d) {
  const parts = Object.entries(d.dropped)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${fmtCount(n)}`);
  return parts.length ? parts.join(', ') : '0';
}

/** Writes a direction's figures into the elements of `root` that show them (a table row
 * shows some, a details card others; each names its figures with `data-field`). */
export function fill(root, series) {
  const latest = series.samples[series.samples.length - 1];
  setText(root, 'bps', fmtBits(latest.bps));
  setText(root, 'pps', fmtRate(latest.pps));
  const d = series.last;
  if (d) {
    const f = d.fidelity;
    const r = f.released;
    const measured = f.count > 0;
    const dropped = Object.values(d.dropped).reduce((a, b) => a + b, 0);
    setText(root, 'netem', d.netem || 'trace');
    setText(root, 'queue', fmtCount(d.in_flight));
    setText(root, 'drops', dropsText(d));
    setText(root, 'dropsum', fmtCount(dropped));
    setText(root, 'dups', fmtCount(d.duplicates));
    setText(root, 'corrupted', fmtCount(d.corrupted));
    setText(root, 'marked', fmtCount(d.marked ?? 0));
    setText(root, 'dupcor', `${fmtCount(d.duplicates)} / ${fmtCount(d.corrupted)}`);
    setText(root, 'error', measured ? fmtNsTriple(r.p50_ns, r.p99_ns, r.max_ns) : '—');
    setText(root, 'p50', measured ? fmtNs(r.p50_ns) : '—');
    setText(root, 'p99', measured ? fmtNs(r.p99_ns) : '—');
    setText(root, 'max', measured ? fmtNs(r.max_ns) : '—');
    setText(root, 'lateearly', `${fmtCount(f.late)} / ${fmtCount(f.early)}`);
    root.classList.toggle('early', f.early > 0);
  } else if (series.kernel) {
    const { tx, rx } = series.kernel;
    const dropped = fmtCount(tx.tx_dropped + rx.rx_dropped);
    setText(root, 'drops', dropped);
    setText(root, 'dropsum', dropped);
  }
}

/** Updates the rows of `tbody` on screen, and a few more in turn ([`rowsToRefresh`]), from
 * the live figures `all`. */
export function refreshTable(tbody, all) {
  const table = tables.get(tbody);
  if (!table) return;
  table.all = all;
  const { rows, cursor } = rowsToRefresh(table.rows.length, table.shown, table.cursor, ROTATE);
  table.cursor = cursor;
  for (const i of rows) refreshRow(table.rows[i], all);
}

/** Rewrites one row from the live figures `all`. */
function refreshRow(row, all) {
  const series = all.get(`${row.dataset.link}/${row.dataset.dir}`);
  if (!series || !series.samples.length) return;
  fill(row, series);
  if (series.last) row.querySelector('[data-field="dropsum"]').title = `dropped: ${dropsText(series.last)}`;
  const cell = row.querySelector('[data-field-spark]');
  cell.replaceChildren(sparkline(series.samples, !!series.last));
}

/** The span a sparkline of `samples` covers, seconds: up to HISTORY; a younger series is
 * spread over at least SPARK_MIN. */
export function sparkSpan(samples) {
  const now = samples[samples.length - 1].t;
  return Math.min(HISTORY, Math.max(SPARK_MIN, now - samples[0].t));
}

/** The polyline points of figure `key` of `samples` in a `w`×`ht` box over the last `span`
 * seconds, scaled to its largest value; null with fewer than two known values. */
export function sparkPoints(samples, key, span, w, ht) {
  const now = samples[samples.length - 1].t;
  const pts = samples.filter((p) => p[key] !== null && p[key] !== undefined);
  if (pts.length < 2) return null;
  const max = Math.max(...pts.map((p) => p[key])) || 1;
  const x = (t) => w - ((now - t) / span) * w;
  return pts.map((p) => `${x(p.t).toFixed(1)},${(ht - 2 - (p[key] / max) * (ht - 4)).toFixed(1)}`).join(' ');
}

/** Throughput (solid) and, for impaired links, the p99 release error (dashed) over the last
 * HISTORY seconds, each scaled to its own largest value. */
function sparkline(samples, withError) {
  const W = 90;
  const H = 26;
  const span = sparkSpan(samples);
  const bps = sparkPoints(samples, 'bps', span, W, H);
  const p99 = withError ? sparkPoints(samples, 'p99', span, W, H) : null;
  const latest = samples[samples.length - 1];
  const title = `throughput ${fmtBits(latest.bps)}${withError ? `, p99 release error ${fmtNs(latest.p99)}` : ''} (the last ${Math.round(span)} s)`;
  return s(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'sparkline', role: 'img', 'aria-label': title },
    s('title', {}, title),
    s('line', { x1: 0, y1: H - 1, x2: W, y2: H - 1, class: 'baseline' }),
    bps && s('polyline', { points: bps, class: 'spark-bps' }),
    p99 && s('polyline', { points: p99, class: 'spark-p99' }),
  );
}
