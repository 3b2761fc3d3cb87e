// Figure docker-ports, what reaching a Docker sandbox's ports through our forwarder costs (when a
// Docker Engine is reachable, as for the figure `docker`; skipped with the reason otherwise). A
// container with `ports` has no network (`none`); the host reaches a port of it on a loopback
// port of its own, through the forwarder of the server (src/engine/sandbox/docker/forward.rs),
// which enters the container's network namespace for each connection. The baseline: the same
// container on the host's network (`network: 'host'`, the old way, a risk), reached directly.
// In each, busybox `httpd` serves a small page and a 50 MiB file: a new connection and one
// request for the page (200 each, interleaved with the baseline, after a warm-up: median, p95),
// and the 50 MiB body read at full speed (10 each, interleaved: MiB/s).
import { createServer } from 'node:net';
import { request } from 'node:http';

import { interleave, now } from './stats.mjs';
import { loadPackage } from './support.mjs';
import { rateRow, skippedRow, timeRow } from './report.mjs';
import { dockerHost, dockerProblem, IMAGE, removeContainers } from './docker.mjs';

export const title = "Docker sandbox ports: our forwarder (network none) vs network 'host'";

const BIG_MIB = 50;

/** A port of the host's loopback free now (the kernel's pick). */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** `GET url` on a new connection (no agent, no keep-alive): `{ ms, bytes, status }`. */
function get(url) {
  return new Promise((resolve, reject) => {
    const started = now();
    const req = request(url, { agent: false, headers: { connection: 'close' }, timeout: 60_000 }, (res) => {
      let bytes = 0;
      res.on('data', (d) => (bytes += d.length));
      res.on('end', () => resolve({ ms: now() - started, bytes, status: res.statusCode }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`timeout: ${url}`)));
    req.end();
  });
}

/** Waits until `url` answers 200 (the server starting), up to 20 s. */
async function ready(url) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const { status } = await get(url);
      if (status === 200) return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`${url} does not answer 200`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A sandbox serving `site/` (a small page and a BIG_MIB file) with busybox httpd on `port`. */
async function serving(provider, sessionId, port) {
  const session = await provider.createSession({ sessionId });
  await session.writeTextFile({ path: 'site/index.html', content: 'ok\n' });
  const made = await session.run({ command: `dd if=/dev/zero of=site/big bs=1048576 count=${BIG_MIB} 2>/dev/null && httpd -p ${port} -h site` });
  if (made.exitCode !== 0) throw new Error(`httpd did not start: ${made.stderr}`);
  const base = (await session.getPortEndpoint({ port })).url.replace(/\/$/, '');
  await ready(`${base}/index.html`);
  return { session, base };
}

export async function run({ quick, log }) {
  const host = dockerHost();
  const problem = await dockerProblem(host, log);
  if (problem) {
    log(`  skipped: ${problem}`);
    return { rows: [skippedRow({ id: 'docker-ports', label: 'Docker sandbox ports', reason: problem })], notes: [`Skipped: ${problem}.`] };
  }
  const pkg = loadPackage();
  const prefix = `hs-bench-ports-${process.pid}-`;
  // The container's port: inside its own namespace for ours, a free port of the host for the baseline.
  const [oursPort, hostPort] = [47611, await freePort()];
  const forwarded = pkg.dockerSandbox({ image: IMAGE, host, namePrefix: prefix, ports: [oursPort] });
  const hostNet = pkg.dockerSandbox({ image: IMAGE, host, namePrefix: prefix, ports: [hostPort], network: 'host' });
  const requests = quick ? 30 : 200;
  const bodies = quick ? 3 : 10;
  const sessions = [];
  let latency;
  let throughput;
  const urls = {};
  try {
    const ours = await serving(forwarded, `${prefix}fwd`, oursPort);
    sessions.push(ours.session);
    const base = await serving(hostNet, `${prefix}host`, hostPort);
    sessions.push(base.session);
    Object.assign(urls, { ours: ours.base, baseline: base.base });
    log(`  ours ${ours.base} (forwarded into ${oursPort}), baseline ${base.base} (network host)`);
    const small = (url) => async () => {
      const { ms, bytes, status } = await get(`${url}/index.html`);
      if (status !== 200 || bytes !== 3) throw new Error(`${url}/index.html: ${status}, ${bytes} bytes`);
      return ms;
    };
    latency = await interleave({ ours: small(ours.base), baseline: small(base.base) }, { reps: requests, warmup: 10 });
    log(`  ${requests} requests each on new connections`);
    const big = (url) => async () => {
      const { ms, bytes, status } = await get(`${url}/big`);
      if (status !== 200 || bytes !== BIG_MIB * 1024 * 1024) throw new Error(`${url}/big: ${status}, ${bytes} bytes`);
      return ms;
    };
    throughput = await interleave({ ours: big(ours.base), baseline: big(base.base) }, { reps: bodies, warmup: 1 });
    log(`  ${bodies} bodies of ${BIG_MIB} MiB each`);
  } finally {
    for (const session of sessions) await session.destroy().catch(() => {});
    const removed = await removeContainers(host, prefix).catch(() => 0);
    if (removed) log(`  removed ${removed} containers left behind`);
  }
  const mib = { ...rateRow({ id: 'docker-ports.body', label: `${BIG_MIB} MiB body, new connection (MiB/s)`, baselineLabel: "network 'host'", items: BIG_MIB, ours: throughput.ours, baseline: throughput.baseline }), unit: 'MiB/s' };
  return {
    rows: [
      timeRow({
        id: 'docker-ports.request',
        label: 'a port of a sandbox without network (our forwarder): connect + one GET of a small page',
        baselineLabel: "network 'host': the same, direct",
        ours: latency.ours,
        baseline: latency.baseline,
      }),
      mib,
    ],
    notes: [
      `Image ${IMAGE} on ${host}; busybox httpd in the container; ${requests} requests and ${bodies} bodies of ${BIG_MIB} MiB on each side, interleaved, each on a new connection from this Node process; ours through ${urls.ours}, the baseline ${urls.baseline}.`,
    ],
    checks: { latency, throughput },
  };
}
