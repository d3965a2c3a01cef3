// A small static file server for www/ (no dependencies): correct MIME types (application/wasm),
// no caching, optional cross-origin isolation headers (COOP/COEP) for the threaded build.
// Usage: node tools/serve.mjs [--port 8080] [--root www] [--isolated] [--quiet]
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const port = Number(opt('--port', '8080'));
const root = path.resolve(opt('--root', 'www'));
const isolated = args.includes('--isolated');
const quiet = args.includes('--quiet');

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.md': 'text/markdown; charset=utf-8', '.ts': 'text/plain; charset=utf-8',
  '.safetensors': 'application/octet-stream', '.txt': 'text/plain; charset=utf-8',
};

const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://localhost');
  let file = path.join(root, decodeURIComponent(url.pathname));
  if (!file.startsWith(root)) { res.writeHead(403).end('forbidden'); return; }
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
  const headers = { 'Cache-Control': 'no-store' };
  if (isolated) {
    headers['Cross-Origin-Opener-Policy'] = 'same-origin';
    headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
    headers['Cross-Origin-Resource-Policy'] = 'same-origin';
  }
  fs.stat(file, (err, st) => {
    if (err || !st.isFile()) {
      res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' }).end(`not found: ${url.pathname}`);
      if (!quiet) console.log(`404 ${url.pathname}`);
      return;
    }
    headers['Content-Type'] = TYPES[path.extname(file)] || 'application/octet-stream';
    headers['Content-Length'] = st.size;
    res.writeHead(200, headers);
    if (req.method === 'HEAD') { res.end(); return; }
    fs.createReadStream(file).pipe(res);
  });
});
server.listen(port, '127.0.0.1', () => {
  console.log(`serving ${root} on http://127.0.0.1:${port}/${isolated ? ' (cross-origin isolated)' : ''}`);
});
