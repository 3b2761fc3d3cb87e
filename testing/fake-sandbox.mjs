/**
 * A sandbox for tests: a folder of this host, with the shape of a `HarnessV1NetworkSandboxSession`
 * (`@ai-sdk/harness`), good enough for `HarnessAgent` and for the sandbox strategies of the
 * session manager.
 *
 * Commands run with `sh -c` in the folder (no isolation: this is not a security boundary), files
 * are read and written there, relative paths resolve against it, and `defaultWorkingDirectory` is
 * the folder itself, so `HarnessAgent` puts each session's working directory under it.
 *
 * `fork({ ports })` gives a view of the same sandbox (same folder, same log) with ports of its own,
 * as `sharedSandbox()` expects. Every sandbox and view records what it is asked in `log` and
 * counts its lifecycle calls in `counts`, for tests to assert on.
 */

import { spawn as spawnProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { constants, tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { Readable } from 'node:stream';

/**
 * @typedef {import('@ai-sdk/harness').HarnessV1NetworkSandboxSession} HarnessV1NetworkSandboxSession
 * @typedef {import('@ai-sdk/provider-utils').Experimental_SandboxSession} SandboxSession
 */

/**
 * @typedef {object} FakeSandboxOptions
 * @property {string} [root] The folder the sandbox works in, created when missing. Default: a new
 *   temporary folder, removed by `destroy()`; a folder you give is never removed.
 * @property {readonly number[]} [ports] The ports it exposes. Default: `[4000]`.
 * @property {string} [id] Its id. Default: `fake-sandbox-<uuid>`.
 * @property {Record<string, string>} [env] Environment variables of every command, over this
 *   process's environment.
 */

/**
 * @typedef {object} FakeSandboxLogEntry
 * @property {'run' | 'spawn' | 'read' | 'write' | 'fork' | 'release' | 'stop' | 'destroy'} op
 * @property {string} id The id of the sandbox or view that was asked.
 * @property {string} [command] For `run` and `spawn`.
 * @property {string} [path] For `read` and `write`.
 * @property {readonly number[]} [ports] For `fork`.
 */

/**
 * @typedef {object} FakeSandboxCounts How many times a sandbox or view was asked each lifecycle call.
 * @property {number} fork
 * @property {number} release
 * @property {number} stop
 * @property {number} destroy
 */

/**
 * @typedef {HarnessV1NetworkSandboxSession & {
 *   readonly root: string,
 *   readonly log: FakeSandboxLogEntry[],
 *   readonly counts: FakeSandboxCounts,
 *   readonly forks: FakeSandbox[],
 *   readonly state: 'running' | 'released' | 'stopped' | 'destroyed',
 *   fork(options: { ports: readonly number[] }): FakeSandbox,
 *   release(): Promise<void>,
 *   setPorts(ports: readonly number[]): Promise<void>,
 * }} FakeSandbox
 */

/**
 * What a sandbox and its views share: the folder, the log, the processes under way.
 *
 * @typedef {object} SharedState
 * @property {string} root
 * @property {boolean} ownsRoot
 * @property {Record<string, string>} env
 * @property {FakeSandboxLogEntry[]} log
 * @property {'running' | 'stopped' | 'destroyed'} state
 * @property {Set<import('node:child_process').ChildProcess>} processes
 */

/**
 * Creates a sandbox in a folder of this host.
 *
 * @param {FakeSandboxOptions} [options]
 * @returns {FakeSandbox}
 */
export function createFakeSandbox(options = {}) {
  const ownsRoot = options.root === undefined;
  const root = options.root === undefined ? mkdtempSync(join(tmpdir(), 'fake-sandbox-')) : resolve(options.root);
  mkdirSync(root, { recursive: true });
  /** @type {SharedState} */
  const shared = {
    root,
    ownsRoot,
    env: options.env ?? {},
    log: [],
    state: 'running',
    processes: new Set(),
  };
  return createView(shared, {
    id: options.id ?? `fake-sandbox-${randomUUID()}`,
    ports: options.ports ?? [4000],
    isFork: false,
  });
}

/**
 * A sandbox, or a view of it made by `fork()`.
 *
 * @param {SharedState} shared
 * @param {{ id: string, ports: readonly number[], isFork: boolean }} options
 * @returns {FakeSandbox}
 */
function createView(shared, { id, ports, isFork }) {
  /** @type {'running' | 'released' | 'stopped' | 'destroyed'} */
  let ownState = 'running';
  let exposed = [...ports];
  /** @type {Set<import('node:child_process').ChildProcess>} */
  const processes = new Set();
  /** @type {FakeSandbox[]} */
  const forks = [];
  const counts = { fork: 0, release: 0, stop: 0, destroy: 0 };

  const record = (/** @type {Omit<FakeSandboxLogEntry, 'id'>} */ entry) =>
    shared.log.push({ ...entry, id });
  const assertUsable = () => {
    const state = shared.state === 'running' ? ownState : shared.state;
    if (state !== 'running') throw new Error(`Fake sandbox ${id} is ${state}.`);
  };
  const files = createFiles(shared.root, { record, assertUsable });
  const commands = createCommands(shared, { record, assertUsable, processes });
  const description = `A folder of the host, ${shared.root}, where commands run with sh.`;

  /** Hands the view back: kills the processes it started. */
  const release = async () => {
    counts.release += 1;
    record({ op: 'release' });
    killAll(processes);
    if (ownState === 'running') ownState = 'released';
  };

  /** @type {FakeSandbox} */
  const sandbox = {
    id,
    description,
    defaultWorkingDirectory: shared.root,
    root: shared.root,
    log: shared.log,
    counts,
    forks,
    get state() {
      return shared.state === 'running' ? ownState : shared.state;
    },
    get ports() {
      return exposed;
    },
    ...files,
    ...commands,
    restricted: () => ({ description, ...files, ...commands }),
    getPortEndpoint: async ({ port, protocol = 'http' }) => {
      if (!exposed.includes(port)) {
        throw new Error(`Port ${port} is not exposed by fake sandbox ${id}: [${exposed.join(', ')}].`);
      }
      return { url: `${protocol}://127.0.0.1:${port}` };
    },
    getPortUrl: async (options) => (await sandbox.getPortEndpoint(options)).url,
    setPorts: async (next) => {
      exposed = [...next];
    },
    fork: ({ ports: forkPorts }) => {
      assertUsable();
      counts.fork += 1;
      record({ op: 'fork', ports: forkPorts });
      const view = createView(shared, {
        id: `${id}/fork-${counts.fork}`,
        ports: forkPorts,
        isFork: true,
      });
      forks.push(view);
      return view;
    },
    release,
    stop: async () => {
      counts.stop += 1;
      record({ op: 'stop' });
      if (isFork) {
        killAll(processes);
        if (ownState !== 'destroyed') ownState = 'stopped';
        return;
      }
      killAll(shared.processes);
      if (shared.state === 'running') shared.state = 'stopped';
    },
    destroy: async () => {
      counts.destroy += 1;
      record({ op: 'destroy' });
      if (isFork) {
        killAll(processes);
        ownState = 'destroyed';
        return;
      }
      killAll(shared.processes);
      shared.state = 'destroyed';
      if (shared.ownsRoot) await rm(shared.root, { recursive: true, force: true });
    },
  };
  return sandbox;
}

/**
 * The file half of a sandbox: reads and writes in `root`.
 *
 * @param {string} root
 * @param {{ record: (entry: Omit<FakeSandboxLogEntry, 'id'>) => void, assertUsable: () => void }} hooks
 */
function createFiles(root, { record, assertUsable }) {
  /** @param {string} path */
  const open = (path, /** @type {'read' | 'write'} */ op) => {
    assertUsable();
    record({ op, path });
    return isAbsolute(path) ? path : join(root, path);
  };
  /** @param {{ path: string }} options */
  const readBinaryFile = async ({ path }) => readOrNull(open(path, 'read'));
  /** @param {{ path: string, content: Uint8Array }} options */
  const writeBinaryFile = async ({ path, content }) => writeCreatingParents(open(path, 'write'), content);

  return {
    /** @param {{ path: string }} options */
    readFile: async ({ path }) => {
      const bytes = await readOrNull(open(path, 'read'));
      return bytes === null ? null : /** @type {ReadableStream<Uint8Array>} */ (
        Readable.toWeb(Readable.from([bytes]))
      );
    },
    readBinaryFile,
    /** @param {{ path: string, encoding?: string, startLine?: number, endLine?: number }} options */
    readTextFile: async ({ path, encoding = 'utf-8', startLine, endLine }) => {
      const bytes = await readOrNull(open(path, 'read'));
      if (bytes === null) return null;
      const text = new TextDecoder(encoding).decode(bytes);
      return startLine === undefined && endLine === undefined
        ? text
        : sliceLines(text, startLine ?? 1, endLine);
    },
    /** @param {{ path: string, content: ReadableStream<Uint8Array> }} options */
    writeFile: async ({ path, content }) => {
      const target = open(path, 'write');
      const chunks = [];
      for await (const chunk of /** @type {AsyncIterable<Uint8Array>} */ (/** @type {unknown} */ (content))) chunks.push(chunk);
      await writeCreatingParents(target, Buffer.concat(chunks));
    },
    writeBinaryFile,
    /** @param {{ path: string, content: string, encoding?: string }} options */
    writeTextFile: async ({ path, content, encoding = 'utf-8' }) =>
      writeCreatingParents(open(path, 'write'), Buffer.from(content, /** @type {BufferEncoding} */ (encoding))),
  };
}

/**
 * The process half of a sandbox: `run` and `spawn` with `sh -c` in `root`.
 *
 * @param {SharedState} shared
 * @param {{
 *   record: (entry: Omit<FakeSandboxLogEntry, 'id'>) => void,
 *   assertUsable: () => void,
 *   processes: Set<import('node:child_process').ChildProcess>,
 * }} hooks
 */
function createCommands(shared, { record, assertUsable, processes }) {
  /**
   * @param {{ command: string, workingDirectory?: string, env?: Record<string, string>, abortSignal?: AbortSignal }} options
   * @param {'run' | 'spawn'} op
   */
  const start = (options, op) => {
    assertUsable();
    record({ op, command: options.command });
    options.abortSignal?.throwIfAborted();
    const child = spawnProcess('sh', ['-c', options.command], {
      cwd: resolve(shared.root, options.workingDirectory ?? '.'),
      env: { ...process.env, ...shared.env, ...options.env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(child, [processes, shared.processes]);
    return child;
  };

  /** @param {Parameters<typeof start>[0]} options */
  const spawn = async (options) => {
    const child = start(options, 'spawn');
    const exited = waitForExit(child, options.abortSignal);
    exited.catch(() => {});
    return {
      pid: child.pid,
      stdout: /** @type {ReadableStream<Uint8Array>} */ (Readable.toWeb(child.stdout)),
      stderr: /** @type {ReadableStream<Uint8Array>} */ (Readable.toWeb(child.stderr)),
      wait: () => exited,
      kill: async () => killGroup(child),
    };
  };

  /** @param {Parameters<typeof start>[0]} options */
  const run = async (options) => {
    const child = start(options, 'run');
    const stdout = collect(child.stdout);
    const stderr = collect(child.stderr);
    const { exitCode } = await waitForExit(child, options.abortSignal);
    return { exitCode, stdout: await stdout, stderr: await stderr };
  };

  return { run, spawn };
}

/**
 * Resolves with the exit code of `child`; kills it and rejects with the reason when `abortSignal`
 * aborts first.
 *
 * @param {import('node:child_process').ChildProcess} child
 * @param {AbortSignal | undefined} abortSignal
 * @returns {Promise<{ exitCode: number }>}
 */
function waitForExit(child, abortSignal) {
  return new Promise((resolvePromise, reject) => {
    const onAbort = () => {
      killGroup(child);
      reject(abortSignal?.reason);
    };
    abortSignal?.addEventListener('abort', onAbort, { once: true });
    child.once('error', reject);
    child.once('close', (code, signal) => {
      abortSignal?.removeEventListener('abort', onAbort);
      resolvePromise({ exitCode: code ?? 128 + (signal === null ? 0 : constants.signals[signal]) });
    });
  });
}

/**
 * Keeps `child` in each set while it runs.
 *
 * @param {import('node:child_process').ChildProcess} child
 * @param {Set<import('node:child_process').ChildProcess>[]} sets
 */
function track(child, sets) {
  for (const set of sets) set.add(child);
  child.once('close', () => {
    for (const set of sets) set.delete(child);
  });
}

/** @param {Set<import('node:child_process').ChildProcess>} processes */
function killAll(processes) {
  for (const child of processes) killGroup(child);
}

/**
 * Kills the process group of `child` (the shell and what it started). Idempotent.
 *
 * @param {import('node:child_process').ChildProcess} child
 */
function killGroup(child) {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

/**
 * @param {import('node:stream').Readable | null} stream
 * @returns {Promise<string>}
 */
async function collect(stream) {
  if (stream === null) return '';
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf-8');
}

/**
 * The bytes of a file, or `null` when there is none.
 *
 * @param {string} path
 * @returns {Promise<Uint8Array | null>}
 */
async function readOrNull(path) {
  try {
    if (!(await stat(path)).isFile()) throw new Error(`${path} is not a file.`);
    return new Uint8Array(await readFile(path));
  } catch (error) {
    if (/** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT') return null;
    throw error;
  }
}

/**
 * @param {string} path
 * @param {Uint8Array} content
 */
async function writeCreatingParents(path, content) {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, content);
}

/**
 * Lines `startLine` to `endLine` of `text`, 1-based and inclusive.
 *
 * @param {string} text
 * @param {number} startLine
 * @param {number | undefined} endLine
 */
function sliceLines(text, startLine, endLine) {
  return text
    .split('\n')
    .slice(startLine - 1, endLine)
    .join('\n');
}
