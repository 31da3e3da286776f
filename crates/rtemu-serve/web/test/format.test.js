// Numbers as the page writes them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  fmtBits, fmtBytes, fmtContainer, fmtCount, fmtHostEngine, fmtNs, fmtNsTriple, fmtRate, fmtThread, truncate,
} from '../format.js';

test('rates, counts and sizes take the unit that suits them', () => {
  assert.equal(fmtBits(20e6), '20.00 Mbit/s');
  assert.equal(fmtBits(1500), '1.5 kbit/s');
  assert.equal(fmtBits(null), '—');
  assert.equal(fmtRate(12345), '12.3 k');
  assert.equal(fmtRate(2.25), '2.3');
  assert.equal(fmtCount(9999), '9999');
  assert.equal(fmtCount(12345678), '12.35 M');
  assert.equal(fmtBytes(2048), '2.0 kB');
});

test('times: one unit for three figures, about three digits each', () => {
  assert.equal(fmtNs(999), '999 ns');
  assert.equal(fmtNs(1_500_000), '1.50 ms');
  assert.equal(fmtNsTriple(13_000, 22_200, 981_000), '13.0 / 22.2 / 981 µs');
  assert.equal(fmtNsTriple(5, 50, 500), '5 / 50 / 500 ns');
});

test('long text is cut with an ellipsis', () => {
  assert.equal(truncate('rate 20mbit', 30), 'rate 20mbit');
  assert.equal(truncate('abcdef', 4), 'abc…');
});

test('a release thread says where it runs, in which class, and what it was not given', () => {
  const t = {
    index: 0, links: ['ab', 'cd (a-b)'], cpu: 1, priority: 40, policy: 'SCHED_FIFO:40',
    stepped_down: 0, stalls: 0, max_stall_ns: 0, margin_ns: 12000, timer_slack_ns: 0, cpu_ns: 5,
  };
  assert.equal(fmtThread(t), 'thread 0 on CPU 1 SCHED_FIFO:40 (ab, cd (a-b))');
  const refused = { ...t, cpu: null, policy: 'SCHED_OTHER', stepped_down: 3, stalls: 2, max_stall_ns: 1_500_000 };
  assert.equal(
    fmtThread(refused),
    'thread 0 (not pinned) SCHED_OTHER (asked SCHED_FIFO:40), stepped down 3×, 2 stalls (max 1.50 ms) (ab, cd (a-b))',
  );
  assert.equal(fmtThread({ ...t, priority: null, policy: 'SCHED_OTHER' }), 'thread 0 on CPU 1 SCHED_OTHER (ab, cd (a-b))');
});

test('each host of a lab across hosts names its engine and, after the host, its release threads', () => {
  const t = (index, cpu, links) => ({
    index, links, cpu, priority: 40, policy: 'SCHED_FIFO:40',
    stepped_down: 0, stalls: 0, max_stall_ns: 0, margin_ns: 12000, timer_slack_ns: 0, cpu_ns: 5,
  });
  const h2 = { host: 'h2', pid: 9, io: 'af-packet', threads: [t(0, 1, ['c-d']), t(1, 0, ['e-f'])] };
  assert.equal(
    fmtHostEngine(h2),
    'engine on h2 pid 9 · af-packet · h2: thread 0 on CPU 1 SCHED_FIFO:40 (c-d) · h2: thread 1 on CPU 0 SCHED_FIFO:40 (e-f)',
  );
  assert.equal(fmtHostEngine({ ...h2, threads: [] }), 'engine on h2 pid 9 · af-packet');
});

test('a container shows its image and state, and its exit status only once it exited', () => {
  assert.equal(fmtContainer({ image: 'rtemu-web:1', state: 'running', exit_code: null }), 'rtemu-web:1 · running');
  assert.equal(fmtContainer({ image: 'rtemu-web:1', state: 'healthy' }), 'rtemu-web:1 · healthy');
  assert.equal(fmtContainer({ image: 'busybox', state: 'exited', exit_code: 0 }), 'busybox · exited (exit 0)');
  assert.equal(fmtContainer({ image: 'busybox', state: 'exited', exit_code: 137 }), 'busybox · exited (exit 137)');
});
