// The API client: the token on every request, error replies as ApiError with the server's
// text, escaped lab paths, and the SSE parser over every way of cutting a stream in chunks.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ApiError, Client, labPath, sseParser } from '../api.js';

/** A fetch that records its calls and answers with `reply()`. */
function fakeFetch(reply) {
  const calls = [];
  const fn = async (path, options) => {
    calls.push({ path, options });
    return reply();
  };
  return { fn, calls };
}

test('requests carry the bearer token, and none without one', async () => {
  const f = fakeFetch(() => new Response('[]', { status: 200 }));
  await new Client('t0k3n', f.fn).getJson('/v1/labs');
  assert.equal(f.calls[0].options.headers.get('Authorization'), 'Bearer t0k3n');
  assert.equal(f.calls[0].options.cache, 'no-store');
  await new Client(null, f.fn).getJson('/v1/labs');
  assert.equal(f.calls[1].options.headers.get('Authorization'), null);
});

test('an error reply becomes an ApiError with the server\u2019s text or the status line', async () => {
  const json = fakeFetch(() => new Response('{"error":"no lab named x"}', { status: 404, statusText: 'Not Found' }));
  await assert.rejects(new Client('t', json.fn).getJson('/v1/labs/x'), (e) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 404);
    assert.equal(e.message, 'no lab named x');
    return true;
  });
  const html = fakeFetch(() => new Response('<html>', { status: 502, statusText: 'Bad Gateway' }));
  await assert.rejects(new Client('t', html.fn).request('/v1/labs'), { status: 502, message: '502 Bad Gateway' });
});

test('getJsonUnless sends the revision held, and a 304 is null rather than an error', async () => {
  const f = fakeFetch(() => new Response(null, { status: 304, headers: { ETag: '"r1"' } }));
  assert.equal(await new Client('t', f.fn).getJsonUnless('/v1/labs/l', 'r1'), null);
  assert.equal(f.calls[0].options.headers.get('If-None-Match'), '"r1"');
  assert.equal(f.calls[0].options.headers.get('Authorization'), 'Bearer t');
  const fresh = fakeFetch(() => new Response('{"name":"l","revision":"r2"}', { status: 200 }));
  const lab = await new Client('t', fresh.fn).getJsonUnless('/v1/labs/l', 'r1');
  assert.deepEqual(lab, { name: 'l', revision: 'r2' });
  // Nothing held: nothing to match, the lab comes whole.
  await new Client('t', fresh.fn).getJsonUnless('/v1/labs/l', null);
  assert.equal(fresh.calls[1].options.headers.get('If-None-Match'), null);
  const gone = fakeFetch(() => new Response('{"error":"no lab named l"}', { status: 404 }));
  await assert.rejects(new Client('t', gone.fn).getJsonUnless('/v1/labs/l', 'r1'), { status: 404 });
});

test('postJson sends JSON', async () => {
  const f = fakeFetch(() => new Response('{"ok":true}', { status: 200 }));
  await new Client('t', f.fn).postJson('/v1/labs/l/links/a/set', { netem: 'delay 5ms', dir: 'both' });
  const { options } = f.calls[0];
  assert.equal(options.method, 'POST');
  assert.equal(options.headers.get('Content-Type'), 'application/json');
  assert.deepEqual(JSON.parse(options.body), { netem: 'delay 5ms', dir: 'both' });
});

test('lab paths escape every part but the root', () => {
  assert.equal(labPath('shaped', 'links', 'up link', 'set'), '/v1/labs/shaped/links/up%20link/set');
  assert.equal(labPath('a/b', 'stats'), '/v1/labs/a%2Fb/stats');
});

const STREAM = ': comment\nevent: stats\ndata: {"a":\ndata: 1}\n\ndata: plain\r\n\r\nevent: stats\rdata:x\r\n\n';
const EVENTS = [
  ['stats', '{"a":\n1}'],
  ['message', 'plain'],
  ['stats', 'x'],
];

test('the SSE parser gives the same events however the stream is cut', () => {
  for (let size = 1; size <= STREAM.length; size++) {
    const got = [];
    const feed = sseParser((event, data) => got.push([event, data]));
    for (let i = 0; i < STREAM.length; i += size) feed(STREAM.slice(i, i + size));
    assert.deepEqual(got, EVENTS, `chunks of ${size}`);
  }
});

test('an event is emitted only when its blank line arrives', () => {
  const got = [];
  const feed = sseParser((event, data) => got.push(data));
  feed('data: half\n');
  assert.deepEqual(got, []);
  feed('\n');
  assert.deepEqual(got, ['half']);
});
