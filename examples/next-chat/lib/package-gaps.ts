/**
 * What this example takes from `harness-sessions` beyond the 0.2.0 surface its types describe:
 * the SQLite store, `sharedSandbox()`, and the package's own sandboxes. Each is taken from the
 * package's exports when they list it; until then, a stand-in is used, named and documented here so
 * that the rest of the example reads as it will once everything is exported.
 */
import type { HarnessV1NetworkSandboxSession } from '@ai-sdk/harness';
import type { SandboxLease, SessionSandboxes, SessionStore } from 'harness-sessions';

import { harnessSessions, packageFile } from './harness-sessions';

/** A sandbox `sharedSandbox()` can give views of. */
export interface ForkableSandbox extends HarnessV1NetworkSandboxSession {
  fork(options: { ports: readonly number[]; workingDirectory?: string }): Promise<HarnessV1NetworkSandboxSession>;
}

/** `localSandbox()` and `dockerSandbox()` return this: the `open` of `sharedSandbox()`. */
export type OpenSandbox = (options?: { name?: string; abortSignal?: AbortSignal }) => Promise<ForkableSandbox>;

export interface LocalSandboxOptions {
  root: string;
  ports?: number[];
  env?: Record<string, string>;
}

export interface DockerSandboxOptions {
  image: string;
  host?: string;
  ports?: number[];
  env?: Record<string, string>;
  cpus?: number;
  memory?: number | string;
}

interface Exports {
  createSqliteSessionStore?: <METADATA>(options: { path: string }) => SessionStore<METADATA>;
  sharedSandbox?: (options: { open: () => Promise<ForkableSandbox>; ports: number[]; stopWhenUnused?: boolean }) => SessionSandboxes;
  localSandbox?: (options: LocalSandboxOptions) => OpenSandbox;
  dockerSandbox?: (options: DockerSandboxOptions) => OpenSandbox;
}

const exported = harnessSessions as typeof harnessSessions & Exports;

/** `localSandbox()`: exported by the package, or read from `js/sandbox.js` where it lives. */
export function localSandbox(options: LocalSandboxOptions): OpenSandbox {
  const make = exported.localSandbox ?? packageFile<Exports>('js/sandbox.js').localSandbox!;
  return make(options);
}

/** `dockerSandbox()`: exported by the package, or read from `js/sandbox.js` where it lives. */
export function dockerSandbox(options: DockerSandboxOptions): OpenSandbox {
  const make = exported.dockerSandbox ?? packageFile<Exports>('js/sandbox.js').dockerSandbox!;
  return make(options);
}

/**
 * Sessions kept in SQLite at `file`, across restarts. Until the package exports
 * `createSqliteSessionStore()`, they are kept in memory, and lost with the process.
 */
export function sqliteStore<METADATA>(file: string): { store: SessionStore<METADATA>; kind: 'sqlite' | 'memory' } {
  if (typeof exported.createSqliteSessionStore === 'function') {
    return { store: exported.createSqliteSessionStore<METADATA>({ path: file }), kind: 'sqlite' };
  }
  return { store: harnessSessions.createMemorySessionStore<METADATA>(), kind: 'memory' };
}

/**
 * `sharedSandbox({ open, ports })`: the package's, or a stand-in that does what it promises for
 * this example — one sandbox, opened on the first session, a view of it per live session with a
 * port of its own and a folder of its own (kept while the session is suspended).
 */
export function sharedSandbox(options: { open: () => Promise<ForkableSandbox>; ports: number[] }): SessionSandboxes {
  if (typeof exported.sharedSandbox === 'function') return exported.sharedSandbox(options);
  return new SharedSandboxStandIn(options.open, options.ports);
}

class SharedSandboxStandIn implements SessionSandboxes {
  readonly capacity: number;
  #opening: Promise<ForkableSandbox> | undefined;
  #free: number[];

  constructor(
    private readonly open: () => Promise<ForkableSandbox>,
    ports: number[],
  ) {
    this.capacity = ports.length;
    this.#free = [...ports];
  }

  async acquire(sessionId: string): Promise<SandboxLease> {
    const port = this.#free.shift();
    if (port === undefined) throw new Error('Every port of the shared sandbox is taken.');
    const release = () => {
      if (!this.#free.includes(port)) this.#free.push(port);
    };
    try {
      this.#opening ??= this.open().catch((error) => {
        this.#opening = undefined;
        throw error;
      });
      const sandbox = await this.#opening;
      const view = await sandbox.fork({ ports: [port], workingDirectory: `sessions/${sessionId}` });
      return {
        sandboxSession: view,
        suspend: async () => {
          try {
            await view.stop();
          } finally {
            release();
          }
        },
        close: async () => {
          try {
            await view.destroy();
          } finally {
            release();
          }
        },
      };
    } catch (error) {
      release();
      throw error;
    }
  }

  async shutdown(): Promise<void> {
    const opening = this.#opening;
    this.#opening = undefined;
    if (opening !== undefined) await (await opening).stop();
  }
}
