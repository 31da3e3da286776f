// The live table: a row per link direction with its throughput, queue, drops, release error
// and sparklines, rewritten in place as figures arrive. `fill` also writes the details' cards.

import { focusable, h, s, setText } from './dom.js';
import { fmtBits, fmtCount, fmtInt, fmtNs, fmtNsTriple, fmtRate } from './format.js';
import { directionsOf, HISTORY } from './series.js';

/** The shortest span a sparkline is drawn over, seconds. */
const SPARK_MIN = 30;

/** Links per page of the table. A page (a row per direction: twice as many rows) is rewritten
 * whole on every tick. One table of a 10,000-link lab's 20,000 rows held the tab for 8 s when
 * it was built and its refresh could not keep up; as pages it is 100 of them, and the filter
 * finds a link by its name, its nodes or its hosts. */
export const PAGE = 100;

/** Per table body: its rows, for [`refreshTable`]. */
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

/** Page `page` (from 0, kept within the pages there are) of lab `topo`'s links whose name,
 * nodes or hosts contain `query` (any case; every link when it is blank): the page's links,
 * the page shown, how many pages there are, the index of its first link among the matches,
 * and how many links match. */
export function pageOf(topo, query, page, size = PAGE) {
  const q = query.trim().toLowerCase();
  const names = (l) => [l.name, l.a, l.b, linkHosts(topo, l) ?? ''];
  const matches = q ? topo.links.filter((l) => names(l).some((n) => n.toLowerCase().includes(q))) : topo.links;
  const pages = Math.max(1, Math.ceil(matches.length / size));
  const shown = Math.min(Math.max(0, page), pages - 1);
  const first = shown * size;
  return { links: matches.slice(first, first + size), page: shown, pages, first, total: matches.length };
}

/** What the pager says of page `p` ([`pageOf`]) for filter `query`: `links 101–200 of 9,999`,
 * `links 1–2 of 2 matching "n12"`, `no link matches "x"`. */
export function pageText(p, query) {
  const q = query.trim();
  if (!p.total) return q ? `no link matches "${q}"` : 'no links';
  const span = `links ${fmtInt(p.first + 1)}–${fmtInt(p.first + p.links.length)} of ${fmtInt(p.total)}`;
  return q ? `${span} matching "${q}"` : span;
}

/** The nodes whose kernel counters a page of lab `topo` needs: both ends of each ideal link
 * of `links` and of the link `selected` names, and the node it names; each once. */
export function nodesToCount(topo, links, selected) {
  const sel = selected && selected.kind === 'link' ? topo.links.filter((l) => l.name === selected.name) : [];
  const nodes = new Set(links.concat(sel).filter((l) => !l.impaired).flatMap((l) => [l.a, l.b]));
  if (selected && selected.kind === 'node') nodes.add(selected.name);
  return [...nodes];
}

/** Writes the rows of `links` (a page of lab `topo`'s links) into `tbody`; `onSelect` opens a
 * link. */
export function renderTable(tbody, topo, links, onSelect) {
  const rows = [];
  for (const link of links) {
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
  if (!rows.length) {
    const empty = topo.links.length ? 'No link matches the filter.' : 'This lab has no point-to-point links.';
    rows.push(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, empty)));
  }
  tables.set(tbody, rows);
  tbody.replaceChildren(...rows);
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

/** Updates the rows of `tbody` from the live figures `all`. */
export function refreshTable(tbody, all) {
  for (const row of tables.get(tbody) ?? []) refreshRow(row, all);
}

/** Rewrites one row from the live figures `all`. */
function refreshRow(row, all) {
  if (!row.dataset.link) return;
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
