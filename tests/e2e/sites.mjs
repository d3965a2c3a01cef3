// The servers of the cross-engine tests, real ones (no driver's request routing, which only
// Playwright has):
//   assets   tools/serve.mjs over a copy of www/ made of links, plus the tests' own pages under
//            /__test/ (written by `assets.page(name, html)`), with --log-requests so every engine's
//            fetches are seen; `isolated` is the same folder with COOP/COEP (the threaded build)
//   course   a course page's origin on another loopback address (http://127.0.0.2:PORT), whose
//            pages `course.page(html, headers)` adds, and files `course.file(path, bytes)` (with
//            CORS: a model hosted elsewhere, as on the Hub); it logs the paths it served
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, OUT, startServer } from './harness.mjs';

/** A folder whose entries link to www/'s, plus __test/ for the tests' pages. */
function siteFolder() {
  const dir = path.join(OUT, `site-${process.pid}`);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, '__test'), { recursive: true });
  for (const entry of fs.readdirSync(path.join(ROOT, 'www'))) {
    fs.symlinkSync(path.join(ROOT, 'www', entry), path.join(dir, entry));
  }
  return dir;
}

/** `{ assets, isolated, course, close() }`; see the file's comment. */
export async function startSites() {
  const dir = siteFolder();
  const args = ['--follow-links', '--log-requests'];
  const assets = await startServer({ root: dir, args });
  const isolated = await startServer({ root: dir, args: [...args, '--isolated'] });
  let n = 0;
  /** Writes a page under /__test/ and returns its path there. */
  const page = (name, html) => {
    const file = `/__test/${name}-${++n}.html`;
    fs.writeFileSync(path.join(dir, file), html.startsWith('<!doctype') ? html : `<!doctype html><meta charset="utf-8">${html}`);
    return file;
  };
  const course = await startCourse();
  return {
    assets: { ...assets, page },
    isolated: { ...isolated, page },
    course,
    async close() {
      await Promise.all([assets.close(), isolated.close(), course.close()]);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The course page's origin: `page(html, headers)` → its URL; `requests` the paths it answered. */
async function startCourse() {
  const pages = new Map();
  const requests = [];
  const server = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    requests.push(p);
    const hit = pages.get(p);
    if (!hit) return res.writeHead(404, { 'Access-Control-Allow-Origin': '*' }).end();
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store', ...hit.headers }).end(hit.body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.2', resolve));
  const { port } = server.address();
  const origin = `http://127.0.0.2:${port}`;
  let n = 0;
  return {
    origin,
    requests,
    page(html, headers = {}) {
      const p = `/course-${++n}.html`;
      pages.set(p, { body: `<!doctype html><html lang="en"><meta charset="utf-8"><title>A course page</title>${html}`, headers });
      return `${origin}${p}`;
    },
    /** Serves `bytes` at `p` to every origin; returns its URL. */
    file(p, bytes) {
      pages.set(p, { body: bytes, headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(bytes.length), 'Access-Control-Allow-Origin': '*' } });
      return `${origin}${p}`;
    },
    close: () => new Promise((resolve) => {
      server.closeAllConnections?.();
      server.close(resolve);
    }),
  };
}
