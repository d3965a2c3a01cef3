// A small static file server for www/ (no dependencies): correct MIME types (application/wasm),
// no caching, CORS for pages of other origins that embed the widget or import the API, optional
// cross-origin isolation headers (COOP/COEP) for the threaded build.
// Usage: node tools/serve.mjs [--port 8080] [--host 127.0.0.1] [--root www] [--isolated] [--no-cors]
//        [--follow-links] [--log-requests] [--quiet]
// (--port 0: a port the system picks, named in the "serving … on http://host:port/" line: what the
// tests use, so no port is chosen first and taken by another process before this one listens.)
// (--no-cors leaves out Access-Control-Allow-Origin, as many hosts do: for the tests of what a page
// of another origin then sees. --follow-links serves what symbolic links inside the root point to
// wherever it lies, for a root that a tool assembled from links, e.g. the benchmark's; by default
// a link that leads outside the root is refused. --log-requests prints "GET /path 200" for every
// request, which is how the browser tests see what an engine fetched when its driver cannot say.)
// A root with a `_headers` file (the site `./build.sh site` writes, dist/site/) is served as a
// static host serves it: each path gets the headers its rules give (Cache-Control: immutable for
// the versioned release, no-cache for the entry pages) and every file an ETag, answered with a 304.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { readHeaders, headersFor } from './site.mjs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const port = Number(opt('--port', '8080'));
const host = opt('--host', '127.0.0.1');
const root = path.resolve(opt('--root', 'www'));
const isolated = args.includes('--isolated');
const quiet = args.includes('--quiet');
const cors = !args.includes('--no-cors');
const followLinks = args.includes('--follow-links');
const logRequests = args.includes('--log-requests');

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.md': 'text/markdown; charset=utf-8', '.ts': 'text/plain; charset=utf-8',
  '.safetensors': 'application/octet-stream', '.txt': 'text/plain; charset=utf-8',
};

const realRoot = fs.realpathSync(root);
const siteRules = fs.existsSync(path.join(realRoot, '_headers')) ? readHeaders(fs.readFileSync(path.join(realRoot, '_headers'), 'utf8')) : null;
const inside = (file) => {
  const rel = path.relative(realRoot, file);
  return rel === '' || !(rel.startsWith('..') || path.isAbsolute(rel));
};

/**
 * The file a URL path names inside root (symbolic links resolved), null when the path is malformed
 * (a bad escape, a NUL) and false when it points outside root; `cb(err, file)`.
 */
function resolve(urlPath, cb) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath);
  } catch {
    return cb(null, null); // e.g. "/%"
  }
  if (decoded.includes('\0')) return cb(null, null);
  const file = path.join(realRoot, decoded);
  if (!inside(file)) return cb(null, false);
  fs.realpath(file, (err, real) => (err ? cb(err) : cb(null, inside(real) || followLinks ? real : false)));
}

/** Host headers this server answers (a page on another name reaching it by DNS rebinding gets 421), once it listens. */
let hosts = new Set();

const server = http.createServer((req, res) => {
  if (logRequests) res.on('close', () => console.log(`${req.method} ${req.url} ${res.statusCode}`));
  const headers = {
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
  };
  if (cors) {
    // Pages of any origin may use these files (the widget and the API embedded elsewhere).
    headers['Access-Control-Allow-Origin'] = '*';
    headers['Cross-Origin-Resource-Policy'] = 'cross-origin';
  }
  if (isolated) {
    headers['Cross-Origin-Opener-Policy'] = 'same-origin';
    headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
  }
  const send = (status, text) => res.writeHead(status, { ...headers, 'Content-Type': 'text/plain; charset=utf-8' }).end(text);
  if (req.method === 'OPTIONS') {
    res.writeHead(204, { ...headers, 'Access-Control-Allow-Methods': 'GET, HEAD', 'Access-Control-Allow-Headers': '*' }).end();
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'only GET and HEAD');
  if (!hosts.has(String(req.headers.host).toLowerCase())) return send(421, `this server answers only ${[...hosts].join(', ')}`);
  let pathname;
  try {
    pathname = new URL(req.url, 'http://localhost').pathname;
  } catch {
    return send(400, 'bad request target');
  }
  if (siteRules) Object.assign(headers, headersFor(siteRules, pathname));
  resolve(pathname, (err, file) => {
    if (file === null) return send(400, 'bad path');
    if (file === false) return send(403, 'outside the served folder');
    if (err) return notFound();
    fs.stat(file, (err2, st) => {
      if (!err2 && st.isDirectory()) return serveFile(path.join(file, 'index.html'));
      if (err2 || !st.isFile()) return notFound();
      serveFile(file, st);
    });
  });

  function notFound() {
    send(404, `not found: ${pathname}`);
    if (!quiet) console.log(`404 ${pathname}`);
  }

  function serveFile(file, st) {
    if (!st) {
      return fs.stat(file, (err, s2) => (err || !s2.isFile() ? notFound() : serveFile(file, s2)));
    }
    if (siteRules) {
      headers.ETag = `"${st.size.toString(16)}-${Math.round(st.mtimeMs).toString(16)}"`;
      if (req.headers['if-none-match'] === headers.ETag) return res.writeHead(304, headers).end();
    }
    const stream = fs.createReadStream(file);
    stream.on('error', () => {
      // Before the headers went out the client gets a 500; after, the connection is cut.
      if (!res.headersSent) send(500, 'could not read the file');
      else res.destroy();
    });
    stream.on('open', () => {
      res.writeHead(200, { ...headers, 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream', 'Content-Length': st.size });
      if (req.method === 'HEAD') {
        stream.destroy();
        res.end();
      } else {
        stream.pipe(res);
      }
    });
  }
});
server.on('clientError', (err, socket) => {
  // A request that does not parse (junk, a header too large): answer 400 (431) and close.
  if (!socket.writable) return socket.destroy();
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request';
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
});
server.listen(port, host, () => {
  const { port: at } = server.address();
  hosts = new Set([`127.0.0.1:${at}`, `localhost:${at}`, `${host}:${at}`]);
  console.log(`serving ${root} on http://${host}:${at}/${isolated ? ' (cross-origin isolated)' : ''}`);
});
