// rtemu's web view: a running lab's topology, its links' live statistics, and link changes,
// over the public HTTP API (docs/api.md) and nothing else. Plain JavaScript, no build step:
// rtemu serves this file as it is (docs/web.md).
//
// Data flow: the lab list is polled (GET /v1/labs) and carries each lab's topology; the
// engine's stats arrive as Server-Sent Events read with fetch(), which, unlike EventSource,
// can send the token; ideal links' kernel counters are polled (GET …/counters). Throughput is
// the change of the delivered byte and packet counters over the last second.
'use strict';

(() => {
  const SVGNS = 'http://www.w3.org/2000/svg';
  /** Seconds between stats events (the page updates at least once a second). */
  const STREAM_INTERVAL = 0.5;
  /** Seconds of history the sparklines show. */
  const HISTORY = 300;
  /** The shortest span a sparkline is drawn over, seconds. */
  const SPARK_MIN = 30;
  /** Seconds a throughput is averaged over. */
  const RATE_WINDOW = 1.0;
  const LABS_EVERY_MS = 2000;
  const COUNTERS_EVERY_MS = 1000;
  const RECONNECT_MS = 1000;

  const $ = (sel, root = document) => root.querySelector(sel);

  const view = {
    token: null,
    /** The lab shown. */
    lab: null,
    /** The lab resource (nodes, links, lans, externals) while the lab is up. */
    topo: null,
    /** Its topology's signature, to see when a lab came back different. */
    signature: null,
    up: false,
    /** What the details panel shows: {kind, name}. */
    selected: null,
    /** Per `link/dir`: {last, samples: [{t, bytes, packets, bps, pps, p99}], kernel}. */
    series: new Map(),
    /** The last kernel counters, by `node/interface`. */
    counters: new Map(),
    engine: null,
    stream: null,
    lastEvent: 0,
    blobUrl: null,
  };

  // ---- the API -------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** A request to the API with the token; an error reply becomes an ApiError with its text. */
  async function api(path, options = {}) {
    const headers = new Headers(options.headers || {});
    if (view.token) headers.set('Authorization', `Bearer ${view.token}`);
    const resp = await fetch(path, { ...options, headers, cache: 'no-store' });
    if (!resp.ok) {
      let message = `${resp.status} ${resp.statusText}`;
      try {
        const body = await resp.json();
        if (body && typeof body.error === 'string') message = body.error;
      } catch (_) {
        // Not JSON: the status line says enough.
      }
      throw new ApiError(resp.status, message);
    }
    return resp;
  }

  const getJson = async (path) => (await api(path)).json();

  const postJson = (path, body) =>
    api(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });

  const labPath = (...rest) =>
    ['/v1/labs', view.lab, ...rest].map((p, i) => (i ? encodeURIComponent(p) : p)).join('/');

  // ---- the token and the lab from the address ------------------------------------------

  /** Takes `token` and `lab` from the fragment, keeps the token for this tab only, and leaves
   * only `#lab=NAME` in the address bar (and in the history). */
  function readFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    const token = params.get('token');
    if (token) sessionStorage.setItem('rtemu-token', token);
    view.token = sessionStorage.getItem('rtemu-token');
    if (params.get('lab')) view.lab = params.get('lab');
    rewriteAddress();
  }

  function rewriteAddress() {
    const hash = view.lab ? `#lab=${encodeURIComponent(view.lab)}` : '';
    history.replaceState(null, '', location.pathname + location.search + hash);
  }

  // ---- formatting ----------------------------------------------------------------------

  function fmtBits(bps) {
    if (bps === null || bps === undefined || !isFinite(bps)) return '—';
    if (bps >= 1e9) return `${(bps / 1e9).toFixed(2)} Gbit/s`;
    if (bps >= 1e6) return `${(bps / 1e6).toFixed(2)} Mbit/s`;
    if (bps >= 1e3) return `${(bps / 1e3).toFixed(1)} kbit/s`;
    return `${Math.round(bps)} bit/s`;
  }

  function fmtRate(pps) {
    if (pps === null || pps === undefined || !isFinite(pps)) return '—';
    if (pps >= 1e6) return `${(pps / 1e6).toFixed(2)} M`;
    if (pps >= 1e4) return `${(pps / 1e3).toFixed(1)} k`;
    return pps >= 100 ? `${Math.round(pps)}` : pps.toFixed(1);
  }

  function fmtNs(ns) {
    if (ns === null || ns === undefined) return '—';
    if (ns < 1e3) return `${ns} ns`;
    if (ns < 1e6) return `${(ns / 1e3).toFixed(1)} µs`;
    if (ns < 1e9) return `${(ns / 1e6).toFixed(2)} ms`;
    return `${(ns / 1e9).toFixed(2)} s`;
  }

  /** Three times in the unit of the largest, about three digits each: `13.0 / 22.2 / 981 µs`. */
  function fmtNsTriple(...ns) {
    const max = Math.max(...ns);
    const [div, unit] = max < 1e3 ? [1, 'ns'] : max < 1e6 ? [1e3, 'µs'] : max < 1e9 ? [1e6, 'ms'] : [1e9, 's'];
    const digits = (x) => (x >= 100 || div === 1 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
    return `${ns.map((n) => digits(n / div)).join(' / ')} ${unit}`;
  }

  function fmtCount(n) {
    if (n === null || n === undefined) return '—';
    if (n >= 1e9) return `${(n / 1e9).toFixed(2)} G`;
    if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
    if (n >= 1e4) return `${(n / 1e3).toFixed(1)} k`;
    return String(n);
  }

  function fmtBytes(n) {
    if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
    if (n >= 1e6) return `${(n / 1e6).toFixed(2)} MB`;
    if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
    return `${n} B`;
  }

  /** A bucket edge, short: 1 µs, 10 µs, 1 ms. */
  function fmtEdge(ns) {
    if (ns >= 1e6) return `${ns / 1e6} ms`;
    return `${ns / 1e3} µs`;
  }

  function truncate(text, n) {
    return text.length > n ? `${text.slice(0, n - 1)}…` : text;
  }

  // ---- small DOM helpers -----------------------------------------------------------------

  /** An HTML element with attributes and children (strings become text). */
  function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
    return el;
  }

  /** An SVG element with attributes and children. */
  function s(tag, attrs = {}, ...children) {
    const el = document.createElementNS(SVGNS, tag);
    setAttrs(el, attrs);
    el.append(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
    return el;
  }

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function setText(root, field, text) {
    for (const el of root.querySelectorAll(`[data-field="${field}"]`)) {
      if (el.textContent !== text) el.textContent = text;
    }
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
      const labs = await getJson('/v1/labs');
      renderLabList(labs);
      if (!view.lab && labs.length === 1) chooseLab(labs[0].name, labs);
      const current = labs.find((l) => l.name === view.lab);
      if (current && (!view.up || signatureOf(current) !== view.signature)) {
        labUp(current);
      } else if (current) {
        view.topo = current;
        if (!view.stream) connectStream();
      } else if (view.up) {
        labDown();
      } else if (!view.lab) {
        status(
          labs.length ? 'choose a lab' : 'no lab is running: waiting for one (rtemu up FILE)',
        );
      } else {
        status(`lab ${view.lab} is not running: waiting for it to come up`, 'warn');
      }
    } catch (e) {
      reportError(e);
    }
    setTimeout(pollLabs, LABS_EVERY_MS);
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
            onclick: () => chooseLab(l.name, labs),
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
    rewriteAddress();
    renderLabList(labs);
    const lab = labs.find((l) => l.name === name);
    if (lab) labUp(lab);
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
    $('#lab-title').textContent = `lab ${lab.name}`;
    document.body.classList.remove('lab-down');
    renderGraph();
    renderTable();
    if (view.selected && !findSelected()) view.selected = null;
    renderDetails();
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
      const resp = await api(labPath('stats', 'stream') + `?interval=${STREAM_INTERVAL}`, {
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

  /** A Server-Sent Events parser fed chunks of text; calls `emit(event, data)` per event. */
  function sseParser(emit) {
    let buffer = '';
    let event = 'message';
    let data = [];
    return (chunk) => {
      buffer += chunk;
      let end;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A lone \r at the end may be half of \r\n: wait for the next chunk.
        if (buffer[end] === '\r' && end === buffer.length - 1) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (data.length) emit(event, data.join('\n'));
          event = 'message';
          data = [];
        } else if (!line.startsWith(':')) {
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          let value = colon < 0 ? '' : line.slice(colon + 1);
          if (value.startsWith(' ')) value = value.slice(1);
          if (field === 'event') event = value;
          else if (field === 'data') data.push(value);
        }
      }
    };
  }

  /** Adds a sample to the series of `key`; returns the series. A counter that went back (the
   * engine restarted with the lab) starts the series again. */
  function addSample(key, t, bytes, packets, extra) {
    let series = view.series.get(key);
    if (!series) {
      series = { samples: [], last: null };
      view.series.set(key, series);
    }
    const samples = series.samples;
    const prev = samples[samples.length - 1];
    if (prev && (bytes < prev.bytes || packets < prev.packets)) samples.length = 0;
    // The rate over the last second: from the latest sample at least RATE_WINDOW old.
    let base = null;
    for (let i = samples.length - 1; i >= 0; i--) {
      if (t - samples[i].t >= RATE_WINDOW * 0.95) {
        base = samples[i];
        break;
      }
    }
    if (!base && samples.length) base = samples[0];
    const dt = base ? t - base.t : 0;
    const sample = {
      t,
      bytes,
      packets,
      bps: dt > 0 ? ((bytes - base.bytes) * 8) / dt : null,
      pps: dt > 0 ? (packets - base.packets) / dt : null,
      ...extra,
    };
    samples.push(sample);
    while (samples.length && samples[0].t < t - HISTORY - RATE_WINDOW) samples.shift();
    return series;
  }

  function onStats(stats) {
    // The engine's clock when it read the counters: rates do not wobble with delivery.
    const t = stats.monotonic_ns ? stats.monotonic_ns / 1e9 : performance.now() / 1000;
    view.lastEvent = performance.now() / 1000;
    for (const d of stats.directions || []) {
      const series = addSample(`${d.link}/${d.dir}`, t, d.delivered_bytes, d.delivered, {
        p99: d.fidelity.released.p99_ns,
      });
      series.last = d;
    }
    if (stats.pid) {
      const prev = view.engine;
      let cpu = null;
      if (prev && prev.pid === stats.pid && stats.process_cpu_ns !== null && t > prev.t) {
        cpu = (stats.process_cpu_ns - prev.cpu) / 1e9 / (t - prev.t);
      }
      view.engine = { pid: stats.pid, cpu: stats.process_cpu_ns, t };
      const share = cpu === null ? '' : ` · CPU ${(cpu * 100).toFixed(1)} %`;
      $('#engine').textContent = `engine pid ${stats.pid} · ${stats.io}${share}`;
    } else {
      $('#engine').textContent = 'no impaired links: no engine';
    }
    status(`lab ${view.lab}: live`, 'ok');
    refresh();
  }

  // ---- kernel counters of ideal links ----------------------------------------------------

  async function pollCounters() {
    const nodeShown = view.selected && view.selected.kind === 'node';
    if (view.up && view.topo && (nodeShown || view.topo.links.some((l) => !l.impaired))) {
      try {
        const list = await getJson(labPath('counters'));
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
            const series = addSample(`${link.name}/${dir}`, t, rx.rx_bytes, rx.rx_packets, {});
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

  // ---- layout ----------------------------------------------------------------------------

  const NODE_W = 150;
  const COL = 270;
  const ROW = 112;
  const MARGIN = 24;
  const MAX_IF_LINES = 3;

  /** The graph `rtemu graph` draws (nodes; LANs and host interfaces as vertices of their own;
   * point-to-point links as edges), laid out in layers from the first node: a breadth-first
   * search gives each vertex its column, a few barycentre sweeps its row. Only the topology
   * decides, so a reload draws the same picture. */
  function layout(topo) {
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
      const place = () => layers.forEach((layer) => layer.forEach((v, i) => row.set(v, i)));
      place();
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
          place();
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

  // ---- the picture -----------------------------------------------------------------------

  function interfacesOf(node) {
    return node.interfaces.map((i) => `${i.name} ${i.addresses[0] || ''}`.trim());
  }

  function linkLabel(link) {
    if (!link.impaired) return 'ideal';
    const ab = modelOf(link, 'a-b');
    const ba = modelOf(link, 'b-a');
    if (ab === ba) return ab || 'trace';
    return `${ab || 'trace'} / ${ba || 'trace'}`;
  }

  /** The netem text a direction runs now: the engine's word once it spoke, else the lab's. */
  function modelOf(link, dir) {
    const series = view.series.get(`${link.name}/${dir}`);
    if (series && series.last) return series.last.netem;
    return dir === 'a-b' ? link.a_to_b : link.b_to_a;
  }

  function isCut(link) {
    return ['a-b', 'b-a'].some((dir) => {
      const series = view.series.get(`${link.name}/${dir}`);
      return series && series.last && series.last.cut;
    });
  }

  function focusable(attrs, onOpen) {
    return {
      tabindex: 0,
      role: 'button',
      ...attrs,
      onclick: () => onOpen(false),
      onkeydown: (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          onOpen(true);
        }
      },
    };
  }

  function renderGraph() {
    const topo = view.topo;
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
            (kbd) => select({ kind: 'link', name: link.name }, kbd),
          ),
          s('title', {}, label),
          s('polygon', { points: band(a, b, 11), class: 'hit' }),
          s('line', { ...line, class: 'stroke' }),
        );
        edgeLayer.append(group);
        const mx = (a.x + b.x) / 2;
        const my = (a.y + b.y) / 2;
        labelLayer.append(
          s(
            'g',
            { class: 'edge-label', 'data-link-label': link.name, 'aria-hidden': 'true' },
            s('text', { x: mx, y: my - 9, class: 'link-name' }, link.name),
            s('text', { x: mx, y: my + 17, class: 'link-model', 'data-field': 'model' }, truncate(linkLabel(link), 30)),
          ),
        );
      } else {
        edgeLayer.append(s('line', { ...line, class: `edge ${e.kind}` }));
      }
    }
    for (const v of g.vertices) vertexLayer.append(vertexShape(v));
    svg.append(edgeLayer, vertexLayer, labelLayer);
    $('#graph').replaceChildren(svg);
    refreshGraph();
  }

  /** The corners of a band `half` wide on each side of the segment from `a` to `b`: a link's
   * area to click and to show focus on (a line alone has no area). */
  function band(a, b, half) {
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

  function vertexShape(v) {
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
          select({ kind: 'node', name: n.name }, kbd),
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
          select({ kind: 'lan', name: l.name }, kbd),
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
        select({ kind: 'ext', name: x0.name }, kbd),
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

  /** Updates what changes in the picture: models, cuts, the selection. */
  function refreshGraph() {
    if (!view.topo) return;
    for (const link of view.topo.links) {
      const edge = $(`#graph [data-link="${CSS.escape(link.name)}"]`);
      const label = $(`#graph [data-link-label="${CSS.escape(link.name)}"]`);
      if (!edge || !label) continue;
      const cut = isCut(link);
      edge.classList.toggle('cut', cut);
      const text = cut ? `✕ cut · ${linkLabel(link)}` : linkLabel(link);
      setText(label, 'model', truncate(text, 30));
      const selected = view.selected && view.selected.kind === 'link' && view.selected.name === link.name;
      edge.classList.toggle('selected', !!selected);
      edge.setAttribute(
        'aria-label',
        `link ${link.name}: ${link.a} to ${link.b}, ${link.impaired ? 'impaired' : 'ideal'}${cut ? ', cut' : ''}, ${linkLabel(link)}`,
      );
    }
    for (const el of document.querySelectorAll('#graph .vertex')) {
      const sel = view.selected;
      const name = el.dataset.node || el.dataset.lan || el.dataset.external;
      const kind = el.dataset.node ? 'node' : el.dataset.lan ? 'lan' : 'ext';
      el.classList.toggle('selected', !!sel && sel.kind === kind && sel.name === name);
    }
  }

  // ---- the table -------------------------------------------------------------------------

  function directionsOf(link) {
    return [
      { dir: 'a-b', from: link.a, to: link.b },
      { dir: 'b-a', from: link.b, to: link.a },
    ];
  }

  function renderTable() {
    const body = $('#links-table tbody');
    const rows = [];
    for (const link of view.topo.links) {
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
              (kbd) => select({ kind: 'link', name: link.name }, kbd),
            ),
            d.dir === 'a-b'
              ? h(
                  'th',
                  { scope: 'rowgroup', rowspan: 2, class: 'link-cell' },
                  h('div', {}, link.name),
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
            h('td', { class: 'num', 'data-field': 'dupcor' }, '—'),
            h('td', { class: 'num', 'data-field': 'error' }, link.impaired ? '—' : 'kernel counters'),
            h('td', { class: 'num', 'data-field': 'lateearly' }, '—'),
            h('td', { class: 'spark', 'data-field-spark': '' }),
          ),
        );
      }
    }
    if (!rows.length) {
      rows.push(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'This lab has no point-to-point links.')));
    }
    body.replaceChildren(...rows);
  }

  function dropsText(d) {
    const parts = Object.entries(d.dropped)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${fmtCount(n)}`);
    return parts.length ? parts.join(', ') : '0';
  }

  /** Writes a direction's figures into the elements of `root` that show them (a table row
   * shows some, a details card others; each names its figures with `data-field`). */
  function fill(root, series) {
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

  function refreshTable() {
    for (const row of document.querySelectorAll('#links-table tbody tr[data-link]')) {
      const series = view.series.get(`${row.dataset.link}/${row.dataset.dir}`);
      if (!series || !series.samples.length) continue;
      fill(row, series);
      if (series.last) row.querySelector('[data-field="dropsum"]').title = `dropped: ${dropsText(series.last)}`;
      const cell = row.querySelector('[data-field-spark]');
      cell.replaceChildren(sparkline(series.samples, !!series.last));
    }
  }

  /** Throughput (solid) and, for impaired links, the p99 release error (dashed) over the last
   * HISTORY seconds, each scaled to its own largest value. */
  function sparkline(samples, withError) {
    const W = 90;
    const H = 26;
    const now = samples[samples.length - 1].t;
    // Up to HISTORY seconds; a younger series is spread over at least SPARK_MIN seconds.
    const span = Math.min(HISTORY, Math.max(SPARK_MIN, now - samples[0].t));
    const x = (t) => W - ((now - t) / span) * W;
    const path = (key) => {
      const pts = samples.filter((p) => p[key] !== null && p[key] !== undefined);
      if (pts.length < 2) return null;
      const max = Math.max(...pts.map((p) => p[key])) || 1;
      return pts.map((p) => `${x(p.t).toFixed(1)},${(H - 2 - (p[key] / max) * (H - 4)).toFixed(1)}`).join(' ');
    };
    const bps = path('bps');
    const p99 = withError ? path('p99') : null;
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

  // ---- details ---------------------------------------------------------------------------

  function findSelected() {
    const sel = view.selected;
    if (!sel || !view.topo) return null;
    const lists = { link: view.topo.links, node: view.topo.nodes, lan: view.topo.lans, ext: view.topo.externals };
    return (lists[sel.kind] || []).find((x) => x.name === sel.name) || null;
  }

  function select(sel, fromKeyboard) {
    view.selected = sel;
    renderDetails();
    refreshGraph();
    if (fromKeyboard) $('#details-title').focus();
  }

  function renderDetails() {
    const body = $('#details-body');
    const item = findSelected();
    if (!item) {
      $('#details-title').textContent = 'Details';
      body.replaceChildren(
        h('p', { class: 'muted' }, 'Select a node or a link in the picture or the table (click, or Tab and Enter).'),
      );
      return;
    }
    const kind = view.selected.kind;
    if (kind === 'link') linkDetails(item, body);
    else if (kind === 'node') nodeDetails(item, body);
    else if (kind === 'lan') {
      $('#details-title').textContent = `LAN ${item.name}`;
      body.replaceChildren(
        h('dl', { class: 'facts' },
          h('dt', {}, 'subnets'), h('dd', {}, [item.ipv4, item.ipv6].filter(Boolean).join(', ') || 'none'),
          h('dt', {}, 'members'), h('dd', {}, item.members.join(', '))),
        h('p', { class: 'muted' }, 'A bridge: its members\u2019 kernel counters are in each node\u2019s details.'),
      );
    } else {
      $('#details-title').textContent = `Host interface ${item.host}`;
      body.replaceChildren(
        h('dl', { class: 'facts' },
          h('dt', {}, 'node'), h('dd', {}, item.node),
          h('dt', {}, 'mode'), h('dd', {}, item.mode === 'move' ? 'moved into the node' : 'macvlan on the host interface')),
      );
    }
    refreshDetails();
  }

  function nodeDetails(node, body) {
    $('#details-title').textContent = `Node ${node.name}`;
    body.replaceChildren(
      h('dl', { class: 'facts' },
        h('dt', {}, 'namespace'), h('dd', {}, h('code', {}, node.netns)),
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
    );
  }

  function linkDetails(link, body) {
    $('#details-title').textContent = `Link ${link.name}`;
    const parts = [
      h('p', { class: 'subtitle' },
        `${link.a} ⇄ ${link.b} · `,
        h('span', { class: `tag ${link.impaired ? 'impaired' : 'ideal'}` }, link.impaired ? 'impaired' : 'ideal'),
        h('span', { class: 'tag cut', 'data-field': 'cut', hidden: true }, '✕ cut')),
    ];
    // One line says what the buttons below the form did.
    const note = h('p', { class: 'form-status', role: 'status', 'data-field': 'action-status' });
    if (link.impaired) {
      parts.push(setForm(link), h('div', { class: 'actions' }, cutButtons(link, note), captureBox(link, note)), note);
    } else {
      parts.push(h('p', { class: 'muted' }, 'An ideal link is a plain veth pair: the kernel carries it, so only its counters show, and it cannot be changed.'));
      parts.push(h('div', { class: 'actions' }, captureBox(link, note)), note);
    }
    for (const d of directionsOf(link)) parts.push(directionCard(link, d));
    body.replaceChildren(...parts);
  }

  function directionCard(link, d) {
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
          fig('error p50', 'p50', 'release error: when the frame left − when the model said it should'),
          fig('error p99', 'p99'),
          fig('error max', 'max'),
          fig('late / early', 'lateearly', 'late: released past the late threshold; early: released before their time (never)'),
        ]
      : [fig('throughput', 'bps', null, true), fig('packets/s', 'pps'), fig('drops', 'drops', 'sender tx + receiver rx drops')];
    return h('section', { class: 'dir-card', 'data-dir': d.dir, 'aria-label': `${d.from} to ${d.to}` },
      h('h3', {}, `${d.from} → ${d.to}`, h('span', { class: 'muted small' }, ` ${d.dir}`)),
      link.impaired ? h('p', { class: 'model' }, h('span', { class: 'muted' }, 'model '), h('code', { 'data-field': 'netem' }, modelOf(link, d.dir) || 'trace')) : null,
      h('dl', { class: 'figures' }, figures),
      link.impaired ? h('div', { class: 'histogram', 'data-field-hist': '' }) : null,
      link.impaired ? h('p', { class: 'hist-caption', 'data-field': 'hist-caption' }) : null,
    );
  }

  function setForm(link) {
    const errorId = 'netem-error';
    const input = h('input', {
      id: 'netem-input', name: 'netem', type: 'text', autocomplete: 'off', spellcheck: 'false',
      value: modelOf(link, 'a-b') || '', 'aria-describedby': errorId,
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
        await postJson(labPath('links', link.name, 'set'), { netem, dir: dir.value });
        done.textContent = `applied: ${netem} (${dir.options[dir.selectedIndex].text})`;
      } catch (err) {
        done.textContent = '';
        showFieldError(input, error, err.message);
      }
    });
    return form;
  }

  /** Shows the server's error under the field; when it names a column, points at it and
   * selects the word there. */
  function showFieldError(input, box, message) {
    input.setAttribute('aria-invalid', 'true');
    const parts = [h('p', { class: 'error-text', 'data-field': 'error' }, message)];
    const m = /\(column (\d+)\)/.exec(message);
    // The column counts from the start of the text sent, which was trimmed.
    const text = input.value.trim();
    if (m) {
      const col = Number(m[1]);
      parts.push(h('pre', { class: 'caret', 'aria-hidden': 'true' }, `${text}\n${' '.repeat(Math.max(col - 1, 0))}^ column ${col}`));
      const start = input.value.indexOf(text) + col - 1;
      let end = start;
      while (end < input.value.length && !/\s/.test(input.value[end])) end++;
      input.focus();
      input.setSelectionRange(start, Math.max(end, start + 1));
    }
    box.replaceChildren(...parts);
    box.hidden = false;
  }

  function cutButtons(link, note) {
    const act = (what) => async () => {
      note.textContent = what === 'down' ? 'cutting…' : 'restoring…';
      try {
        await postJson(labPath('links', link.name, what), {});
        note.textContent = what === 'down' ? 'cut: the link carries nothing' : 'restored';
      } catch (err) {
        note.textContent = err.message;
      }
    };
    return h('div', { class: 'cut-buttons' },
      h('button', { type: 'button', 'data-action': 'down', onclick: act('down') }, '✕ Cut'),
      h('button', { type: 'button', 'data-action': 'up', onclick: act('up') }, 'Restore'));
  }

  function captureBox(link, out) {
    const seconds = h('select', { id: 'capture-seconds', 'aria-label': 'capture length' },
      [2, 5, 10, 30].map((n) => h('option', { value: n, selected: n === 5 }, `${n} s`)));
    const button = h('button', { type: 'button', 'data-action': 'capture', 'aria-label': `capture ${link.name} as pcapng` }, 'Start');
    button.addEventListener('click', async () => {
      const n = Number(seconds.value);
      button.disabled = true;
      out.replaceChildren(`capturing both ends of ${link.name} for ${n} s…`);
      try {
        const resp = await api(`${labPath('capture')}?target=${encodeURIComponent(link.name)}&duration=${n}&count=1000000`);
        const blob = await resp.blob();
        if (view.blobUrl) URL.revokeObjectURL(view.blobUrl);
        view.blobUrl = URL.createObjectURL(blob);
        const name = `${view.lab}-${link.name}.pcapng`;
        out.replaceChildren(h('a', { href: view.blobUrl, download: name, 'data-download': '' }, `Download ${name}`), ` (${fmtBytes(blob.size)})`);
      } catch (err) {
        out.replaceChildren(`capture failed: ${err.message}`);
      } finally {
        button.disabled = false;
      }
    });
    return h('div', { class: 'capture' },
      h('span', { class: 'label' }, 'Capture pcapng'), seconds, button);
  }

  function refreshDetails() {
    const item = findSelected();
    if (!item) return;
    const body = $('#details-body');
    if (view.selected.kind === 'node') {
      for (const row of body.querySelectorAll('tr[data-if]')) {
        const c = view.counters.get(row.dataset.if);
        if (!c) continue;
        setText(row, 'packets', `${fmtCount(c.rx_packets)} / ${fmtCount(c.tx_packets)}`);
        setText(row, 'ifdrops', `${fmtCount(c.rx_dropped)} / ${fmtCount(c.tx_dropped)}`);
      }
      return;
    }
    if (view.selected.kind !== 'link') return;
    const link = item;
    const cutTag = body.querySelector('[data-field="cut"]');
    if (cutTag) cutTag.hidden = !isCut(link);
    for (const card of body.querySelectorAll('.dir-card')) {
      const series = view.series.get(`${link.name}/${card.dataset.dir}`);
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

  /** The release error's histogram: one bar per bucket (its share of the copies), hatched
   * where the bucket lies past the late threshold. */
  function histogram(f) {
    const { counts, edges_ns: edges } = f.released_histogram;
    const W = 440;
    const H = 72;
    const top = 12;
    const base = H - 17;
    const bw = W / counts.length;
    const total = counts.reduce((a, b) => a + b, 0);
    const bars = [];
    counts.forEach((n, i) => {
      const from = i === 0 ? 0 : edges[i - 1];
      const to = i < edges.length ? edges[i] : null;
      const share = total ? n / total : 0;
      const hgt = n ? Math.max(2, share * (base - top)) : 0;
      const late = to === null ? from >= f.late_after_ns : to > f.late_after_ns;
      const range = to === null ? `${fmtNs(from)} and more` : `${fmtNs(from)} to ${fmtNs(to)}`;
      const title = `${range}: ${n} copies (${(share * 100).toFixed(1)} %)`;
      bars.push(
        s('g', { class: 'bucket' },
          s('title', {}, title),
          s('rect', { x: i * bw + 2, y: base - hgt, width: bw - 4, height: hgt, class: late ? 'bar late' : 'bar' }),
          share >= 0.005 ? s('text', { x: i * bw + bw / 2, y: base - hgt - 3, class: 'bar-value' }, `${Math.round(share * 100)}%`) : null,
          i === 0 || String(from).startsWith('1')
            ? s('text', { x: i * bw, y: H - 4, class: i === 0 ? 'bar-label first' : 'bar-label' }, i === 0 ? '0' : fmtEdge(from))
            : null,
          s('line', { x1: i * bw, y1: base, x2: i * bw, y2: base + 4, class: 'tick' })),
      );
    });
    return s('svg', {
      viewBox: `0 0 ${W} ${H}`, class: 'hist', role: 'img',
      'aria-label': `Release error histogram of ${total} copies`,
    },
    s('line', { x1: 0, y1: base, x2: W, y2: base, class: 'baseline' }),
    bars);
  }

  // ---- the loop --------------------------------------------------------------------------

  function refresh() {
    refreshTable();
    refreshGraph();
    refreshDetails();
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
})();
