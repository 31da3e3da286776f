// The client of rtemu's HTTP API (docs/api.md) that the web view uses: requests carrying the
// token, error replies as ApiError with the server's text, and a Server-Sent Events parser for
// the stats stream, read with fetch() because, unlike EventSource, it can send the token.

/** An error reply: its HTTP status and the server's own text. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Requests to the API with a bearer token. `fetchImpl` is the page's fetch (a test's own). */
export class Client {
  constructor(token, fetchImpl = (...args) => fetch(...args)) {
    this.token = token;
    this.fetch = fetchImpl;
  }

  /** A request with the token; an error reply becomes an ApiError with its text. */
  async request(path, options = {}) {
    const headers = new Headers(options.headers || {});
    if (this.token) headers.set('Authorization', `Bearer ${this.token}`);
    const resp = await this.fetch(path, { ...options, headers, cache: 'no-store' });
    // 304 answers only a request that asked If-None-Match: not an error.
    if (!resp.ok && resp.status !== 304) {
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

  /** The JSON a GET of `path` answers. */
  async getJson(path) {
    return (await this.request(path)).json();
  }

  /** The JSON a GET of `path` answers, or null when the resource is still at revision `held`
   * (sent as If-None-Match; the server answers 304 without a body). */
  async getJsonUnless(path, held) {
    const headers = held ? { 'If-None-Match': `"${held}"` } : {};
    const resp = await this.request(path, { headers });
    return resp.status === 304 ? null : resp.json();
  }

  /** POSTs `body` as JSON to `path`. */
  postJson(path, body) {
    return this.request(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  }
}

/** The path of lab `lab`'s resource `rest…`, each part escaped: `/v1/labs/a%2Fb/links`. */
export function labPath(lab, ...rest) {
  return ['/v1/labs', lab, ...rest].map((p, i) => (i ? encodeURIComponent(p) : p)).join('/');
}

/** A Server-Sent Events parser fed chunks of text; calls `emit(event, data)` per event. */
export function sseParser(emit) {
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
