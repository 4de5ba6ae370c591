// A tiny static file server for dist/ on localhost: `make playground-serve`,
// and the browser test. Usage: node serve.mjs [port] (default 8080; 0 picks one).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm', // compileStreaming insists on it
  '.png': 'image/png',
  '.json': 'application/json',
};

/// Serves `root` on 127.0.0.1; resolves to the listening server.
export function serve(root, port = 0) {
  const base = path.resolve(root);
  const server = http.createServer((req, res) => {
    let file;
    try {
      const { pathname } = new URL(req.url, 'http://localhost');
      file = path.join(base, decodeURIComponent(pathname));
    } catch {
      res.writeHead(400).end('bad request\n');
      return;
    }
    if (file !== base && !file.startsWith(base + path.sep)) {
      res.writeHead(403).end('forbidden\n');
      return;
    }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, 'index.html');
    fs.readFile(file, (err, body) => {
      if (err) {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
      }
      res.writeHead(200, {
        'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream',
        'cache-control': 'no-store',
      });
      res.end(body);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dist = path.join(path.dirname(fileURLToPath(import.meta.url)), 'dist');
  if (!fs.existsSync(path.join(dist, 'index.html'))) {
    console.error('serve: playground/dist is not built; run `make playground`');
    process.exit(1);
  }
  const port = Number(process.argv[2] ?? process.env.PORT ?? 8080);
  const server = await serve(dist, port);
  console.log(`playground: http://127.0.0.1:${server.address().port}/ (Ctrl-C stops)`);
}
