// rtemu's web view: a running lab's topology, its links' live statistics, and link changes,
// over the public HTTP API (docs/api.md) and nothing else. ES modules, no build step: rtemu
// serves these files as they are (docs/web.md). This module holds what the page shows and
// its loops; topology.js draws, table.js and details.js show figures, api.js talks.
//
// Data flow: the lab list is polled (GET /v1/labs): each lab counted, with its revision; the
// shown lab is fetched whole (GET /v1/labs/{lab}, If-None-Match its revision) only when the
// list gives a revision the page does not hold; the engine's stats arrive as Server-Sent Events read with fetch(); ideal links' kernel counters
// are polled (GET …/counters). Throughput is the change of the delivered byte and packet
// counters over the last second (series.js).

import { ApiError, Client, labPath, sseParser } from './api.js';
import { renderDetails, refreshDetails, findSelected } from './details.js';
import { $, h } from './dom.js';
import { fmtHostEngine, fmtThread } from './format.js';
import { addSample, HISTORY, RATE_WINDOW } from './series.js';
import { nodesToCount, PAGE, pageOf, pageText, refreshTable, renderTable } from './table.js';
import { refreshGraph, renderGraph } from './topology.js';

/** Seconds between stats events (the page updates at least once a second). */
const STREAM_INTERVAL = 0.5;
const LABS_EVERY_MS = 2000;
const COUNTERS_EVERY_MS = 1000;
const RECONNECT_MS = 1000;

const view = {
  client: new Client(null),
  /** The lab shown. */
  lab: null,
  /** The lab resource (nodes, links, lans, externals) while the lab is up. */
  topo: null,
  /** The name of the lab being fetched whole, while it is. */
  fetching: null,
  /** Its topology's signature, to see when a lab came back different. */
  signature: null,
  up: false,
  /** What the details panel shows: {kind, name}. */
  selected: null,
  /** Per `link/dir`: {last, samples: [{t, bytes, packets, bps, pps, p99}], kernel}. */
  series: new Map(),
  /** The last kernel counters, by `node/segment`. */
  counters: new Map(),
  engine: null,
  stream: null,
  lastEvent: 0,
  /** The table's filter and page; when the lab has more links than a page, the page's links
   * and the `link/dir` keys of their rows (null: every link is on it). */
  table: { query: '', page: 0, links: null, shown: null },
};

const graph = () => $('#graph');
const tbody = () => $('#links-table tbody');
const details = () => ({
  title: $('#details-title'),
  body: $('#details-body'),
  topo: view.topo,
  selected: view.selected,
  series: view.series,
  counters: view.counters,
  client: view.client,
  lab: view.lab,
});

// ---- the token and the lab from the address ------------------------------------------

/** Takes `token` and `lab` from the fragment, keeps the token for this tab only, and leaves
 * only `#lab=NAME` in the address bar (and in the history). */
function readFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get('token');
  if (token) sessionStorage.setItem('rtemu-token', token);
  view.client.token = sessionStorage.getItem('rtemu-token');
  if (params.get('lab')) view.lab = params.get('lab');
  rewriteAddress();
}

function rewriteAddress() {
  const hash = view.lab ? `#lab=${encodeURIComponent(view.lab)}` : '';
  history.replaceState(null, '', location.pathname + location.search + hash);
}

function status(text, kind = 'info') {
  const el = $('#status');
  el.textContent = text;
  el.dataset.kind = kind;
}

// ---- the lab list ----------------------------------------------------------------------

function signatureOf(lab) {
  return JSON.stringify([lab.nodes, lab.links, lab.lans, lab.externals]);
}

async function pollLabs() {
  try {
    const labs = await view.client.getJson('/v1/labs');
    renderLabList(labs);
    if (!view.lab && labs.length === 1) chooseLab(labs[0].name, labs);
    const current = labs.find((l) => l.name === view.lab);
    if (current) {
      await followLab(current);
    } else if (view.up) {
      labDown();
    } else if (!view.lab) {
      status(labs.length ? 'choose a lab' : 'no lab is running: waiting for one (rtemu up FILE)');
    } else {
      status(`lab ${view.lab} is not running: waiting for it to come up`, 'warn');
    }
  } catch (e) {
    reportError(e);
  }
  setTimeout(pollLabs, LABS_EVERY_MS);
}

/** The revision of lab `name` the page holds, or null. */
function heldRevision(name) {
  return view.topo && view.topo.name === name ? view.topo.revision : null;
}

/** Follows the shown lab as the list gives it (`summary`): fetched whole only when the page
 * does not hold its revision, drawn again only when its topology changed. */
async function followLab(summary) {
  const held = heldRevision(summary.name);
  if (view.up && held === summary.revision) {
    if (!view.stream) connectStream();
    return;
  }
  if (view.fetching === summary.name) return;
  view.fetching = summary.name;
  let lab;
  try {
    lab = await view.client.getJsonUnless(labPath(summary.name), held);
  } catch (e) {
    // A lab going down between the list and this request: the list will tell.
    if (e instanceof ApiError && e.status === 404) return;
    throw e;
  } finally {
    view.fetching = null;
  }
  if (summary.name !== view.lab) return;
  if (lab === null) {
    // Still the revision held (it changed and back, or the list was older than the lab).
    if (!view.up) labUp(view.topo);
  } else if (!view.up || signatureOf(lab) !== view.signature) {
    labUp(lab);
  } else {
    view.topo = lab;
    if (!view.stream) connectStream();
  }
}

function reportError(e) {
  if (e instanceof ApiError && e.status === 401) {
    status(
      'the API refused the token: open the address `rtemu view` (or `rtemu serve --listen`) printed',
      'error',
    );
  } else {
    status(`cannot reach rtemu: ${e.message}`, 'error');
  }
}

function renderLabList(labs) {
  const nav = $('#labs');
  const names = labs.map((l) => l.name);
  const missing = view.lab && !names.includes(view.lab);
  nav.hidden = labs.length < 2 && !missing;
  nav.replaceChildren(
    h('span', { class: 'nav-label' }, 'labs:'),
    ...labs.map((l) =>
      h(
        'button',
        {
          type: 'button',
          class: 'lab-button',
          'data-lab': l.name,
          'aria-pressed': l.name === view.lab ? 'true' : 'false',
          onclick: () => {
            chooseLab(l.name, labs);
            followLab(l).catch(reportError);
          },
        },
        l.name,
        l.status === 'up' ? '' : ` (${l.status})`,
      ),
    ),
  );
}

function chooseLab(name, labs) {
  if (name === view.lab && view.up) return;
  stopStream();
  view.lab = name;
  view.up = false;
  view.selected = null;
  view.table = { query: '', page: 0, links: null, shown: null };
  $('#links-filter').value = '';
  view.topo = null;
  rewriteAddress();
  renderLabList(labs);
}

/** The lab is (back) up: draw it, and follow its stats. */
function labUp(lab) {
  view.topo = lab;
  view.signature = signatureOf(lab);
  view.up = true;
  view.series.clear();
  view.counters.clear();
  view.engine = null;
  document.title = `rtemu: ${lab.name}`;
  const hosts = (lab.hosts || []).map((p) => (p.status === 'up' ? p.host : `${p.host} (${p.status})`));
  $('#lab-title').textContent = hosts.length ? `lab ${lab.name} across ${hosts.join(', ')}` : `lab ${lab.name}`;
  document.body.classList.remove('lab-down');
  renderGraph(graph(), lab, view.series, select);
  refreshGraph(graph(), lab, view.series, view.selected);
  showPage();
  if (view.selected && !findSelected(lab, view.selected)) view.selected = null;
  renderDetails(details());
  connectStream();
  status(`lab ${lab.name}: connecting…`);
}

function labDown() {
  view.up = false;
  stopStream();
  document.body.classList.add('lab-down');
  $('#engine').textContent = '';
  status(`lab ${view.lab} is down: waiting for it to come back`, 'warn');
}

function select(sel, fromKeyboard) {
  view.selected = sel;
  renderDetails(details());
  refreshGraph(graph(), view.topo, view.series, view.selected);
  if (fromKeyboard) $('#details-title').focus();
}

// ---- the table's pages ---------------------------------------------------------------

/** Draws the table's page of the lab's links and its pager (shown when the lab has more
 * links than a page). */
function showPage() {
  const topo = view.topo;
  const p = pageOf(topo, view.table.query, view.table.page);
  view.table.page = p.page;
  renderTable(tbody(), topo, p.links, select);
  const paged = topo.links.length > PAGE;
  $('#links-pager').hidden = !paged;
  $('#links-page').textContent = pageText(p, view.table.query);
  $('#links-prev').disabled = p.page === 0;
  $('#links-next').disabled = p.page >= p.pages - 1;
  view.table.links = paged ? p.links : null;
  view.table.shown = paged ? new Set(p.links.flatMap((l) => [`${l.name}/a-b`, `${l.name}/b-a`])) : null;
  refreshTable(tbody(), view.series);
}

/** Seconds of history kept for direction `key` (`link/dir`): the sparklines' for a row on the
 * table's page or the link selected, a rate's worth for the others, so a large lab's
 * thousands of directions hold a few samples each. */
function keepFor(key) {
  const shown = view.table.shown;
  const link = key.slice(0, key.lastIndexOf('/'));
  const selected = view.selected && view.selected.kind === 'link' && view.selected.name === link;
  return !shown || shown.has(key) || selected ? HISTORY : RATE_WINDOW;
}

$('#links-filter').addEventListener('input', (e) => {
  view.table.query = e.target.value;
  view.table.page = 0;
  if (view.topo) showPage();
});
for (const [id, step] of [
  ['#links-prev', -1],
  ['#links-next', 1],
]) {
  $(id).addEventListener('click', () => {
    view.table.page += step;
    if (view.topo) showPage();
  });
}

// ---- the stats stream ------------------------------------------------------------------

function stopStream() {
  if (view.stream) view.stream.abort();
  view.stream = null;
}

/** Reads the stats stream until it ends, then reconnects while the lab is up. */
async function connectStream() {
  stopStream();
  const control = new AbortController();
  view.stream = control;
  const lab = view.lab;
  try {
    const resp = await view.client.request(`${labPath(lab, 'stats', 'stream')}?interval=${STREAM_INTERVAL}`, {
      signal: control.signal,
      headers: { Accept: 'text/event-stream' },
    });
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = sseParser((event, data) => {
      if (event === 'stats' && view.lab === lab) onStats(JSON.parse(data));
    });
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser(value);
    }
  } catch (e) {
    if (control.signal.aborted) return;
    if (view.up) reportError(e);
  }
  if (view.stream !== control) return;
  view.stream = null;
  // The stream ended: the lab went down (the lab list will say so), or its engine stopped.
  setTimeout(() => {
    if (view.up && !view.stream && view.lab === lab) connectStream();
  }, RECONNECT_MS);
}

function onStats(stats) {
  // The engine's clock when it read the counters: rates do not wobble with delivery.
  const t = stats.monotonic_ns ? stats.monotonic_ns / 1e9 : performance.now() / 1000;
  view.lastEvent = performance.now() / 1000;
  for (const d of stats.directions || []) {
    const key = `${d.link}/${d.dir}`;
    const series = addSample(view.series, key, t, d.delivered_bytes, d.delivered, { p99: d.fidelity.released.p99_ns }, keepFor(key));
    series.last = d;
  }
  if (stats.engines) {
    // A lab across hosts: an engine on each engine host (their clocks differ: rates are timed
    // here), and the hosts whose stats are missing.
    const engines = stats.engines.map(fmtHostEngine);
    const missing = (stats.missing || []).map((m) => `no stats from ${m.host}: ${m.problem}`);
    $('#engine').textContent = [...engines, ...missing].join(' · ');
  } else if (stats.pid) {
    const prev = view.engine;
    let cpu = null;
    if (prev && prev.pid === stats.pid && stats.process_cpu_ns !== null && t > prev.t) {
      cpu = (stats.process_cpu_ns - prev.cpu) / 1e9 / (t - prev.t);
    }
    view.engine = { pid: stats.pid, cpu: stats.process_cpu_ns, t };
    const share = cpu === null ? '' : ` · CPU ${(cpu * 100).toFixed(1)} %`;
    const threads = (stats.threads || []).map((t) => ` · ${fmtThread(t)}`).join('');
    $('#engine').textContent = `engine pid ${stats.pid} · ${stats.io}${share}${threads}`;
  } else {
    $('#engine').textContent = 'no impaired links: no engine';
  }
  status(`lab ${view.lab}: live`, 'ok');
  refresh();
}

// ---- kernel counters of ideal links ----------------------------------------------------

/** The query of a counters request: every node's on a lab of one page, else only those the
 * page needs ([`nodesToCount`]; each of a large lab's nodes costs the server a namespace's
 * netlink: 2 s a request for 10,000); null when that is none. */
function countersQuery() {
  if (!view.table.links) return '';
  const nodes = nodesToCount(view.topo, view.table.links, view.selected);
  return nodes.length ? `?${new URLSearchParams(nodes.map((n) => ['node', n]))}` : null;
}

async function pollCounters() {
  const nodeShown = view.selected && view.selected.kind === 'node';
  const query = view.up && view.topo ? countersQuery() : null;
  if (query !== null && (nodeShown || view.topo.links.some((l) => !l.impaired))) {
    try {
      const list = await view.client.getJson(labPath(view.lab, 'counters') + query);
      const t = performance.now() / 1000;
      view.counters.clear();
      for (const c of list) view.counters.set(`${c.node}/${c.segment}`, c);
      for (const link of view.topo.links.filter((l) => !l.impaired)) {
        for (const [dir, from, to] of [
          ['a-b', link.a, link.b],
          ['b-a', link.b, link.a],
        ]) {
          const tx = view.counters.get(`${from}/${link.name}`);
          const rx = view.counters.get(`${to}/${link.name}`);
          if (!tx || !rx) continue;
          const key = `${link.name}/${dir}`;
          const series = addSample(view.series, key, t, rx.rx_bytes, rx.rx_packets, {}, keepFor(key));
          series.kernel = { tx, rx };
        }
      }
      refresh();
    } catch (e) {
      // A lab going down between the list and this request: the list will tell.
      if (!(e instanceof ApiError && e.status === 404)) reportError(e);
    }
  }
  setTimeout(pollCounters, COUNTERS_EVERY_MS);
}

// ---- the loop --------------------------------------------------------------------------

function refresh() {
  refreshTable(tbody(), view.series);
  if (view.topo) refreshGraph(graph(), view.topo, view.series, view.selected);
  refreshDetails(details());
}

/** Says so when the stream has been quiet for a while. */
function watchdog() {
  if (view.up && view.lastEvent && performance.now() / 1000 - view.lastEvent > 3 * STREAM_INTERVAL + 2) {
    status(`lab ${view.lab}: no stats for a while, reconnecting…`, 'warn');
  }
  setTimeout(watchdog, 1000);
}

document.addEventListener('keydown', (e) => {
  if (e.key !== 'Escape' || !view.selected) return;
  const sel = view.selected;
  const attr = { link: 'data-link', node: 'data-node', lan: 'data-lan', ext: 'data-external' }[sel.kind];
  const el = $(`#graph [${attr}="${CSS.escape(sel.name)}"]`);
  if (el) el.focus();
});

readFragment();
pollLabs();
pollCounters();
watchdog();
