/**
 * A proxy that refuses everything and logs it: point `HTTPS_PROXY`/`HTTP_PROXY` of a program under
 * test at it, and any request that program tries to make beyond what `NO_PROXY` lets through
 * (telemetry, updates, a model it should not call) is refused (403, or a refused `CONNECT`) and
 * logged in `requests`. A test fails when `requests` is not empty.
 */
import { createServer } from 'node:http';

/** Creates and starts the catcher on a loopback port; resolves once it listens. */
export async function createRequestCatcher({ host = '127.0.0.1', port = 0 } = {}) {
  const requests = [];
  const sockets = new Set();
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? 'GET', target: req.url ?? '', host: req.headers.host, at: Date.now() });
    req.resume();
    res.writeHead(403, { 'content-type': 'text/plain' });
    res.end('refused by the request catcher of harness-sessions/testing\n');
  });
  server.on('connect', (req, socket) => {
    requests.push({ method: 'CONNECT', target: req.url ?? '', host: req.headers.host, at: Date.now() });
    socket.on('error', () => {});
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const url = `http://${host}:${server.address().port}`;
  return {
    url,
    port: server.address().port,
    requests,
    /** The variables that send a program's HTTP(S) traffic here, except to `noProxy` hosts. */
    proxyEnv({ noProxy = ['127.0.0.1', 'localhost'] } = {}) {
      const list = noProxy.join(',');
      return { HTTPS_PROXY: url, HTTP_PROXY: url, https_proxy: url, http_proxy: url, NO_PROXY: list, no_proxy: list };
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
