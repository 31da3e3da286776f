// The live figures of each link direction, kept per `link/dir` in a Map of series: samples of
// the delivered byte and packet counters with the rates over the last second, and the last
// word of the engine (or the kernel's counters, for an ideal link). Pure: no DOM, no clock.

/** Seconds of history the sparklines show. */
export const HISTORY = 300;
/** Seconds a throughput is averaged over. */
export const RATE_WINDOW = 1.0;
/** The longest span a rate is taken over, seconds: samples further apart leave a gap. */
export const MAX_RATE_SPAN = 3 * RATE_WINDOW;

/** A link's two directions: `a-b` from its first endpoint, `b-a` back. */
export function directionsOf(link) {
  return [
    { dir: 'a-b', from: link.a, to: link.b },
    { dir: 'b-a', from: link.b, to: link.a },
  ];
}

/** Adds a sample at `t` seconds to the series `key` of `all`, keeping the last `keep`
 * seconds of them (and the rate's window); returns the series. A counter that went back (the
 * engine restarted with the lab) starts the series again. */
export function addSample(all, key, t, bytes, packets, extra, keep = HISTORY) {
  let series = all.get(key);
  if (!series) {
    series = { samples: [], last: null };
    all.set(key, series);
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
  // After a gap (a row back on the table's page, whose counters were not read meanwhile) a
  // rate over it would be an average the page never saw: none until the next sample.
  if (base && t - base.t > MAX_RATE_SPAN) base = null;
  const dt = base ? t - base.t : 0;
  samples.push({
    t,
    bytes,
    packets,
    bps: dt > 0 ? ((bytes - base.bytes) * 8) / dt : null,
    pps: dt > 0 ? (packets - base.packets) / dt : null,
    ...extra,
  });
  while (samples.length && samples[0].t < t - keep - RATE_WINDOW) samples.shift();
  return series;
}

/** The netem text a direction runs now: the engine's word once it spoke, else the lab's. */
export function modelOf(all, link, dir) {
  const series = all.get(`${link.name}/${dir}`);
  if (series && series.last) return series.last.netem;
  return dir === 'a-b' ? link.a_to_b : link.b_to_a;
}

/** Whether the engine says either direction of `link` is cut. */
export function isCut(all, link) {
  return ['a-b', 'b-a'].some((dir) => {
    const series = all.get(`${link.name}/${dir}`);
    return !!(series && series.last && series.last.cut);
  });
}

/** What a link's label says of its model: one text when both directions agree. */
export function linkLabel(all, link) {
  if (!link.impaired) return 'ideal';
  const ab = modelOf(all, link, 'a-b');
  const ba = modelOf(all, link, 'b-a');
  if (ab === ba) return ab || 'trace';
  return `${ab || 'trace'} / ${ba || 'trace'}`;
}
