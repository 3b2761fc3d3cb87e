'use strict';
/**
 * The sandboxes of harness-sessions, as `@ai-sdk/harness` expects them.
 *
 * - `dockerSandbox(options)`: a container per session on a Docker Engine (native, bollard).
 * - `localSandbox(options)`: processes on this host, in a folder per session. NO ISOLATION: a
 *   command can do whatever the user of this server can. For development and tests only.
 *
 * Each returns one object that serves two ways:
 *
 * - a `HarnessV1SandboxProvider` (`specificationVersion`, `providerId`, `createSession({ sessionId })`,
 *   `resumeSession({ sessionId })`), for `new HarnessAgent({ sandbox })` or `sandboxPerSession()`;
 * - a function `open({ name? })` that finds the sandbox `name` (default: `options.name` or
 *   `'shared'`) again or creates it: the `open` of `sharedSandbox()`, whose sessions `fork()` it.
 *
 * The sessions are instances of the native class `NativeSandboxSession`, given here the methods of
 * `HarnessV1NetworkSandboxSession`: so the native session strategies recognise them. Output and
 * files cross from Rust in batches (up to 1 MiB each) and are enqueued into web `ReadableStream`s.
 */

const binding = require('./native.js');
const { translating, SessionInputError } = require('./errors.js');
const { data, json } = require('./input.js');

const { NativeSandboxSession, createDockerSandboxProvider, createLocalSandboxProvider } = binding;

/** Bytes gathered from a written stream before they cross to Rust. */
const WRITE_BATCH = 1024 * 1024;

/** The shapes the methods of a session check before their arguments cross to Rust. */
const is = {
  env: (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every((x) => typeof x === 'string'),
};

/** The options of a provider as JSON, for Rust to check (`src/binding/sandbox.rs`). */
function optionsJson(options) {
  return json(data(options === undefined ? {} : options, ''), 'options');
}

/**
 * A Docker sandbox provider, also the `open` of `sharedSandbox()`.
 * @param {import('../index').DockerSandboxOptions} options (described in index.d.ts, checked in Rust)
 */
function dockerSandbox(options) {
  return provider(translating(() => createDockerSandboxProvider(optionsJson(options))));
}

/**
 * A local sandbox provider: processes on this host, without isolation.
 * @param {import('../index').LocalSandboxOptions} options (described in index.d.ts, checked in Rust)
 */
function localSandbox(options) {
  return provider(translating(() => createLocalSandboxProvider(optionsJson(options))));
}

function provider(native) {
  /** Finds the sandbox `name` again, or creates it. */
  const open = async (openOptions) => {
    const { name, abortSignal } = optionsOf(openOptions, 'open', true);
    stringAt(name, 'name', true);
    return settle(abortSignal, () => native.open(name ?? null), (session) => session.stop());
  };
  Object.defineProperties(open, {
    specificationVersion: { value: 'harness-sandbox-v1', enumerable: true },
    providerId: { value: native.providerId, enumerable: true },
    createSession: {
      enumerable: true,
      value: async (createOptions) => {
        const { sessionId, abortSignal, onFirstCreate } = optionsOf(createOptions, 'createSession', true);
        stringAt(sessionId, 'sessionId', true);
        const session = await settle(
          abortSignal,
          () => native.createSession(sessionId ?? null),
          (created) => created.destroy(),
        );
        if (onFirstCreate != null) {
          try {
            await onFirstCreate(session.restricted(), { abortSignal });
          } catch (error) {
            await session.destroy().catch(() => {});
            throw error;
          }
        }
        return session;
      },
    },
    resumeSession: {
      enumerable: true,
      value: async (resumeOptions) => {
        const { sessionId, abortSignal } = optionsOf(resumeOptions, 'resumeSession');
        stringAt(sessionId, 'sessionId');
        return settle(abortSignal, () => native.resumeSession(sessionId), (session) => session.stop());
      },
    },
    /** The native provider, for the native session strategies. */
    nativeProvider: { value: native },
  });
  return open;
}

/**
 * Runs `start` unless `signal` is aborted; if it aborts meanwhile, undoes the result with `undo`
 * and throws the abort reason.
 */
async function settle(signal, start, undo) {
  signal?.throwIfAborted();
  const result = await translating(start);
  if (signal?.aborted) {
    await Promise.resolve(undo(result)).catch(() => {});
    throw signal.reason;
  }
  return result;
}

function asUint8Array(buffer) {
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

function asBuffer(bytes) {
  if (!(bytes instanceof Uint8Array)) {
    throw new SessionInputError({ path: 'content', message: 'content: expected a Uint8Array.' });
  }
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A web stream of a native reader's batches. */
function readableOf(read, cancel) {
  return new ReadableStream({
    async pull(controller) {
      const chunk = await translating(read);
      if (chunk === null) controller.close();
      else controller.enqueue(asUint8Array(chunk));
    },
    cancel() {
      return translating(cancel);
    },
  });
}

/** `value` when it is a string (or absent and `optional`); a `SessionInputError` naming `path` otherwise. */
function stringAt(value, path, optional = false) {
  if (typeof value === 'string' || (optional && value == null)) return value ?? undefined;
  throw new SessionInputError({ path, message: `${path}: expected a string${optional ? ' or nothing' : ''}.` });
}

/** The options object of a method: an object, or nothing when `optional`. */
function optionsOf(options, method, optional = false) {
  if (options == null && optional) return {};
  if (options === null || typeof options !== 'object') {
    throw new SessionInputError({ path: 'options', message: `${method}() takes an options object.` });
  }
  return options;
}

function commandOf(options, method) {
  optionsOf(options, method);
  stringAt(options.command, 'command');
  stringAt(options.workingDirectory, 'workingDirectory', true);
  if (options.env != null && !is.env(options.env)) {
    throw new SessionInputError({ path: 'env', message: 'env: expected an object of strings.' });
  }
  return { command: options.command, workingDirectory: options.workingDirectory ?? undefined, env: options.env ?? undefined };
}

/** The path of a file method's options. */
function pathOf(options, method) {
  return stringAt(optionsOf(options, method).path, 'path');
}

const NODE_ENCODINGS = {
  'utf-8': 'utf8',
  utf8: 'utf8',
  'utf-16le': 'utf16le',
  utf16le: 'utf16le',
  ucs2: 'utf16le',
  'ucs-2': 'utf16le',
  latin1: 'latin1',
  'iso-8859-1': 'latin1',
  binary: 'latin1',
  ascii: 'ascii',
};

function encode(text, encoding = 'utf-8') {
  if (typeof text !== 'string') {
    throw new SessionInputError({ path: 'content', message: 'content: expected a string.' });
  }
  const nodeEncoding = unconvertible(encoding) ? undefined : NODE_ENCODINGS[String(encoding).toLowerCase()];
  if (nodeEncoding === undefined) {
    throw new SessionInputError({
      path: 'encoding',
      message: `encoding: ${shown(encoding)} cannot be written; use utf-8, utf-16le, latin1 or ascii.`,
    });
  }
  return Buffer.from(text, nodeEncoding);
}

/** Whether `value` is one no string or number can be made of (a symbol, a BigInt). */
function unconvertible(value) {
  return typeof value === 'symbol' || typeof value === 'bigint';
}

/** `value` in a message: as JSON, or by its type when it has none (a symbol, a BigInt, a cycle). */
function shown(value) {
  if (unconvertible(value)) return `a ${typeof value}`;
  try {
    return JSON.stringify(value) ?? `a ${typeof value}`;
  } catch {
    return `a ${typeof value}`;
  }
}

function decodeLines(bytes, { encoding = 'utf-8', startLine, endLine }) {
  for (const [name, value] of [['startLine', startLine], ['endLine', endLine]]) {
    if (unconvertible(value)) {
      throw new SessionInputError({ path: name, message: `${name}: expected a line number, not ${shown(value)}.` });
    }
  }
  let decoder;
  try {
    if (unconvertible(encoding)) throw new TypeError('not an encoding');
    decoder = new TextDecoder(encoding);
  } catch {
    throw new SessionInputError({ path: 'encoding', message: `encoding: ${shown(encoding)} is not an encoding.` });
  }
  const text = decoder.decode(bytes);
  if (startLine == null && endLine == null) return text;
  const lines = text.split(/(?<=\n)/);
  const start = Math.max(1, startLine ?? 1);
  const end = endLine ?? lines.length;
  return lines.slice(start - 1, Math.max(start - 1, end)).join('');
}

/** Calls `f` unless `signal` is aborted, and throws the reason if it aborts meanwhile. */
async function unlessAborted(signal, f) {
  signal?.throwIfAborted();
  const result = await translating(f);
  signal?.throwIfAborted();
  return result;
}

/** Kills `process` when `signal` aborts; returns what removes the listener. */
function killOnAbort(process, signal) {
  if (signal == null) return () => {};
  const onAbort = () => {
    process.kill().catch(() => {});
  };
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}

/** The methods of `Experimental_SandboxSession`, then those of `HarnessV1NetworkSandboxSession`. */
const sessionMethods = {
  async run(options) {
    const command = commandOf(options, 'run');
    const signal = options.abortSignal;
    signal?.throwIfAborted();
    const process = await translating(() => this.nativeSpawn(command));
    const release = killOnAbort(process, signal);
    try {
      const result = await translating(() => process.collect());
      signal?.throwIfAborted();
      return result;
    } finally {
      release();
    }
  },

  async spawn(options) {
    const command = commandOf(options, 'spawn');
    const signal = options.abortSignal;
    signal?.throwIfAborted();
    const process = await translating(() => this.nativeSpawn(command));
    const release = killOnAbort(process, signal);
    let waiting;
    return {
      pid: process.pid ?? undefined,
      stdout: readableOf(() => process.readStdout(), () => process.cancelStdout()),
      stderr: readableOf(() => process.readStderr(), () => process.cancelStderr()),
      wait() {
        waiting ??= translating(() => process.wait()).then(
          (exitCode) => {
            release();
            signal?.throwIfAborted();
            return { exitCode };
          },
          (error) => {
            release();
            throw error;
          },
        );
        return waiting;
      },
      kill() {
        return translating(() => process.kill());
      },
    };
  },

  async readFile(options) {
    const path = pathOf(options, 'readFile');
    const { abortSignal } = options;
    const reader = await unlessAborted(abortSignal, () => this.nativeOpenRead(path));
    if (reader === null) return null;
    return readableOf(() => reader.read(), () => reader.cancel());
  },

  async readBinaryFile(options) {
    const path = pathOf(options, 'readBinaryFile');
    const { abortSignal } = options;
    const bytes = await unlessAborted(abortSignal, () => this.nativeReadBytes(path));
    return bytes === null ? null : asUint8Array(bytes);
  },

  async readTextFile(options) {
    const path = pathOf(options, 'readTextFile');
    const bytes = await unlessAborted(options.abortSignal, () => this.nativeReadBytes(path));
    return bytes === null ? null : decodeLines(bytes, options);
  },

  async writeFile(options) {
    const path = pathOf(options, 'writeFile');
    const { content, abortSignal } = options;
    if (content == null || typeof content.getReader !== 'function') {
      throw new SessionInputError({ path: 'content', message: 'content: expected a ReadableStream<Uint8Array>.' });
    }
    const writer = await unlessAborted(abortSignal, () => this.nativeOpenWrite(path));
    const reader = content.getReader();
    let pending = [];
    let pendingBytes = 0;
    const flush = async () => {
      if (pendingBytes === 0) return;
      const batch = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      await translating(() => writer.write(batch));
    };
    try {
      for (;;) {
        abortSignal?.throwIfAborted();
        const { done, value } = await reader.read();
        if (done) break;
        const chunk = asBuffer(value);
        pending.push(chunk);
        pendingBytes += chunk.byteLength;
        if (pendingBytes >= WRITE_BATCH) await flush();
      }
      await flush();
      abortSignal?.throwIfAborted();
      await translating(() => writer.finish());
    } catch (error) {
      await writer.abort(String(error?.message ?? error)).catch(() => {});
      await reader.cancel(error).catch(() => {});
      throw error;
    }
  },

  async writeBinaryFile(options) {
    const path = pathOf(options, 'writeBinaryFile');
    const { content, abortSignal } = options;
    const bytes = asBuffer(content);
    await unlessAborted(abortSignal, () => this.nativeWriteBytes(path, bytes));
  },

  async writeTextFile(options) {
    const path = pathOf(options, 'writeTextFile');
    const { content, encoding, abortSignal } = options;
    const bytes = encode(content, encoding);
    await unlessAborted(abortSignal, () => this.nativeWriteBytes(path, bytes));
  },

  async getPortEndpoint(options) {
    const { port, protocol } = optionsOf(options, 'getPortEndpoint');
    if (!Number.isInteger(port)) {
      throw new SessionInputError({ path: 'port', message: 'port: expected a port number.' });
    }
    stringAt(protocol, 'protocol', true);
    const endpoint = translating(() => this.nativePortEndpoint(port, protocol ?? null));
    return endpoint.headers == null ? { url: endpoint.url } : endpoint;
  },

  async getPortUrl(options) {
    return (await this.getPortEndpoint(options)).url;
  },

  stop() {
    return translating(() => this.nativeStop());
  },

  destroy() {
    return translating(() => this.nativeDestroy());
  },

  /**
   * A view of the same sandbox with ports and a working directory of its own (`workingDirectory`:
   * absolute, or relative to this one's; default: a new `fork-<random>` directory).
   */
  async fork(options) {
    const { ports, workingDirectory } = optionsOf(options, 'fork', true);
    // Checked by the engine (each port a Port, as sharedSandbox()'s): `null` is none here.
    const init = json(data({ ports: ports ?? undefined, workingDirectory: workingDirectory ?? undefined }, ''), 'options');
    return translating(() => this.nativeFork(init));
  },

  /** The same sandbox as a bare `SandboxSession`: files and processes, nothing else. */
  restricted() {
    const session = this;
    return Object.freeze({
      get description() {
        return session.description;
      },
      run: (options) => session.run(options),
      spawn: (options) => session.spawn(options),
      readFile: (options) => session.readFile(options),
      readBinaryFile: (options) => session.readBinaryFile(options),
      readTextFile: (options) => session.readTextFile(options),
      writeFile: (options) => session.writeFile(options),
      writeBinaryFile: (options) => session.writeBinaryFile(options),
      writeTextFile: (options) => session.writeTextFile(options),
    });
  },
};

for (const [name, method] of Object.entries(sessionMethods)) {
  Object.defineProperty(NativeSandboxSession.prototype, name, {
    value: method,
    writable: true,
    configurable: true,
    enumerable: false,
  });
}

/** Whether `value` is a session of these sandboxes (of this copy of the package). */
function isNativeSandboxSession(value) {
  return value instanceof NativeSandboxSession;
}

module.exports = { dockerSandbox, localSandbox, isNativeSandboxSession };
