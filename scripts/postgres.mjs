// A throwaway PostgreSQL cluster for harness-sessions' tests, from Debian's `postgresql` package.
//
//   node scripts/postgres.mjs install      installs Debian's postgresql when its binaries are missing (root)
//   node scripts/postgres.mjs start [dir]  initdb + start on a free loopback port; prints
//                                          HARNESS_SESSIONS_TEST_PG_URL=postgres://... and PG_DIR=<dir>
//   node scripts/postgres.mjs stop <dir>   stops it (pg_ctl -m immediate) and removes the folder
//
// `initdb` refuses root: as root, the cluster is made and run as the `postgres` user (`runuser`).
// The cluster trusts local connections (it listens on 127.0.0.1 only), runs with fsync off, and
// with `{ ssl: true }` serves TLS with a certificate for `localhost` signed by a test authority
// (`<dir>/ca.crt`). `scripts/test.mjs` starts one for the whole test run.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const isRoot = () => process.getuid?.() === 0;

/** The folder of the newest PostgreSQL binaries (`/usr/lib/postgresql/<n>/bin`), or `undefined`. */
export function postgresBinaries() {
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    const versions = readdirSync(base)
      .filter((name) => /^\d+$/.test(name) && existsSync(join(base, name, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length > 0) return join(base, versions[0], 'bin');
  }
  const found = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  const bin = found.status === 0 ? found.stdout.trim() : '';
  return bin && existsSync(join(bin, 'initdb')) ? bin : undefined;
}

/** Installs Debian's `postgresql` when its binaries are missing (needs root); gives the binaries' folder. */
export function installPostgres() {
  const found = postgresBinaries();
  if (found) return found;
  if (!isRoot()) throw new Error('PostgreSQL is not installed, and installing it needs root (apt-get install postgresql)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  console.error('postgres: installing postgresql (apt-get)');
  execFileSync('apt-get', ['update', '-qq'], { stdio: ['ignore', 'ignore', 'inherit'], env });
  execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'postgresql', 'openssl'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env,
  });
  const bin = postgresBinaries();
  if (!bin) throw new Error('postgresql was installed but initdb was not found');
  return bin;
}

/** `program args` as the `postgres` user when this process is root. */
function asPostgres(program, args, options = {}) {
  const [command, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args];
  const result = spawnSync(command, argv, { encoding: 'utf8', ...options });
  if (result.status !== 0) {
    throw new Error(`${program} ${args.join(' ')} failed (${result.status}): ${result.stderr || result.stdout}`);
  }
  return result.stdout;
}

/** A free TCP port on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts a throwaway cluster: `{ url, dir, port, bin, stop() }`. `url` is
 * `postgres://postgres@127.0.0.1:<port>/postgres`. Options: `dir` (a new folder under the
 * temporary folder by default), `ssl` (serve TLS; the authority is `<dir>/ca.crt`),
 * `settings` (more `name=value` server settings).
 */
export async function startPostgres({ dir, ssl = false, settings = [] } = {}) {
  const bin = postgresBinaries();
  if (!bin) throw new Error('no PostgreSQL binaries: run `node scripts/postgres.mjs install` (root)');
  dir ??= mkdtempSync(join(tmpdir(), 'hs-pg-'));
  if (isRoot()) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  chmodSync(dir, 0o700);
  const data = join(dir, 'data');
  asPostgres(join(bin, 'initdb'), ['-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '-D', data]);
  const options = ['-c listen_addresses=127.0.0.1', '-c fsync=off', '-c max_connections=300', ...settings.map((s) => `-c ${s}`)];
  if (ssl) {
    const script = [
      'set -e',
      `cd '${dir}'`,
      'openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=hs-test-ca -keyout ca.key -out ca.crt 2>/dev/null',
      `openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout '${data}/server.key' -out server.csr 2>/dev/null`,
      "printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\n' > ext.cnf",
      `openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile ext.cnf -out '${data}/server.crt' 2>/dev/null`,
      `chmod 600 '${data}/server.key'`,
    ].join('; ');
    asPostgres('sh', ['-c', script]);
    options.push('-c ssl=on');
  }
  let lastError;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    try {
      asPostgres(join(bin, 'pg_ctl'), ['-D', data, '-w', '-t', '60', '-l', join(dir, 'pg.log'), '-o', `-p ${port} -k ${dir} ${options.join(' ')}`, 'start']);
      const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
      writeFileSync(join(dir, 'url'), `${url}\n`);
      return { url, dir, port, bin, stop: () => stopPostgres(dir) };
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`the throwaway cluster did not start: ${lastError?.message}\n${readLog(dir)}`);
}

function readLog(dir) {
  try {
    return readFileSync(join(dir, 'pg.log'), 'utf8');
  } catch {
    return '';
  }
}

/** Stops the cluster in `dir` at once and removes the folder. */
export function stopPostgres(dir) {
  const bin = postgresBinaries();
  if (bin && existsSync(join(dir, 'data'))) {
    try {
      asPostgres(join(bin, 'pg_ctl'), ['-D', join(dir, 'data'), '-m', 'immediate', '-w', 'stop']);
    } catch {
      // Already stopped.
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [command, dir] = process.argv.slice(2);
  if (command === 'install') {
    console.log(installPostgres());
  } else if (command === 'start') {
    const cluster = await startPostgres({ dir });
    console.log(`HARNESS_SESSIONS_TEST_PG_URL=${cluster.url}`);
    console.log(`PG_DIR=${cluster.dir}`);
  } else if (command === 'stop' && dir) {
    stopPostgres(dir);
  } else {
    console.error('usage: node scripts/postgres.mjs install | start [dir] | stop <dir>');
    process.exit(2);
  }
}
