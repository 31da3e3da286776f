// How the web view writes numbers: rates, counts, times and sizes, short and in the unit that
// suits them. Pure functions, no DOM.

/** Bits per second: `12.34 Mbit/s`; `—` when unknown. */
export function fmtBits(bps) {
  if (bps === null || bps === undefined || !isFinite(bps)) return '—';
  if (bps >= 1e9) return `${(bps / 1e9).toFixed(2)} Gbit/s`;
  if (bps >= 1e6) return `${(bps / 1e6).toFixed(2)} Mbit/s`;
  if (bps >= 1e3) return `${(bps / 1e3).toFixed(1)} kbit/s`;
  return `${Math.round(bps)} bit/s`;
}

/** Packets per second, without the unit: `1.23 M`, `45.6 k`, `789`, `1.5`. */
export function fmtRate(pps) {
  if (pps === null || pps === undefined || !isFinite(pps)) return '—';
  if (pps >= 1e6) return `${(pps / 1e6).toFixed(2)} M`;
  if (pps >= 1e4) return `${(pps / 1e3).toFixed(1)} k`;
  return pps >= 100 ? `${Math.round(pps)}` : pps.toFixed(1);
}

/** A time in nanoseconds, in ns, µs, ms or s. */
export function fmtNs(ns) {
  if (ns === null || ns === undefined) return '—';
  if (ns < 1e3) return `${ns} ns`;
  if (ns < 1e6) return `${(ns / 1e3).toFixed(1)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(2)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

/** Three times in the unit of the largest, about three digits each: `13.0 / 22.2 / 981 µs`. */
export function fmtNsTriple(...ns) {
  const max = Math.max(...ns);
  const [div, unit] = max < 1e3 ? [1, 'ns'] : max < 1e6 ? [1e3, 'µs'] : max < 1e9 ? [1e6, 'ms'] : [1e9, 's'];
  const digits = (x) => (x >= 100 || div === 1 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
  return `${ns.map((n) => digits(n / div)).join(' / ')} ${unit}`;
}

/** A count: `1.23 G`, `4.56 M`, `78.9 k`, `1234`. */
export function fmtCount(n) {
  if (n === null || n === undefined) return '—';
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(1)} k`;
  return String(n);
}

/** A whole number exactly, a comma between thousands: `9,999`. */
export function fmtInt(n) {
  return n.toLocaleString('en-US');
}

/** A size in bytes: `1.23 MB`. */
export function fmtBytes(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

/** A bucket edge, short: 1 µs, 10 µs, 1 ms. */
export function fmtEdge(ns) {
  if (ns >= 1e6) return `${ns / 1e6} ms`;
  return `${ns / 1e3} µs`;
}

/** `text`, cut to `n` characters with an ellipsis. */
export function truncate(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/** One release thread of the engine, as the header line shows it: `thread 0 on CPU 1
 * SCHED_FIFO:40 (ab, cd)`, with `asked SCHED_FIFO:40` where it did not get its class, and its
 * step-downs and stalls when it had any. */
export function fmtThread(t) {
  const where = t.cpu === null || t.cpu === undefined ? ' (not pinned)' : ` on CPU ${t.cpu}`;
  const asked = t.priority ? `SCHED_FIFO:${t.priority}` : null;
  let text = `thread ${t.index}${where} ${t.policy}`;
  if (asked && asked !== t.policy) text += ` (asked ${asked})`;
  if (t.stepped_down > 0) text += `, stepped down ${fmtCount(t.stepped_down)}×`;
  if (t.stalls > 0) text += `, ${fmtCount(t.stalls)} stalls (max ${fmtNs(t.max_stall_ns)})`;
  return `${text} (${t.links.join(', ')})`;
}

/** A node's container as its details show it: `rtemu-web:1 · running`, with its exit status
 * once it exited. */
export function fmtContainer(c) {
  const exited = c.exit_code !== null && c.exit_code !== undefined;
  return `${c.image} · ${c.state}${exited ? ` (exit ${c.exit_code})` : ''}`;
}

/** The engine of one host of a lab across hosts, as the header line shows it: `engine on h1
 * pid 7 · af-packet`, then each of its release threads after the host's name (a thread's index
 * is its host's). */
export function fmtHostEngine(e) {
  const threads = (e.threads || []).map((t) => ` · ${e.host}: ${fmtThread(t)}`).join('');
  return `engine on ${e.host} pid ${e.pid} · ${e.io}${threads}`;
}
