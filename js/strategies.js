'use strict';
/**
 * `sharedSandbox()` and `sandboxPerSession()`: how sessions get a sandbox. The strategies live in
 * Rust (`src/engine/sandbox/shared.rs`, `per_session.rs`); this file checks what only JavaScript
 * can see (the functions), and keeps the JavaScript sandboxes the application's functions give.
 *
 * Each strategy object is a `SessionSandboxes` any code can call (`acquire`, `discard`,
 * `shutdown`, `capacity`); `createSessionManager()`, given one, uses its native strategy directly,
 * with no crossing per call.
 *
 * The engine reaches `open`, `create`, `resume` and the JavaScript sandboxes through a host
 * function of the strategy's own (the `sandbox.*` operations of `src/binding/protocol.rs`, run by
 * `js/host.js`'s `dispatcher`): each object stays here and is known to Rust by number. A `NativeSandboxSession` (what `dockerSandbox()` and `localSandbox()`
 * give) is handed over to Rust instead, which then forks, stops and destroys it natively.
 */

const binding = require('./native.js');
const { fromNative, translating, SessionInputError } = require('./errors.js');
const { isNativeSandboxSession } = require('./sandbox.js');
const { Handles } = require('./handles.js');
const { dispatcher } = require('./host.js');
const { holding } = require('./keep-alive.js');
const { data, fields, json } = require('./input.js');

/** The native strategy behind a strategy object, and how to find the sandboxes it hands out. */
const NATIVE_SANDBOXES = Symbol.for('harness-sessions.native-sandboxes');

function need(condition, path, message) {
  if (!condition) throw new SessionInputError({ path, message });
}

/**
 * What every strategy's host does with the sandboxes it keeps: the operations of `ops` on top.
 * `give(sandbox, what)` numbers a sandbox for Rust: a native one is handed over.
 */
function sandboxOps(handles, getNative) {
  const give = (sandbox, what) => {
    if (isNativeSandboxSession(sandbox)) return { native: getNative().adopt(sandbox) };
    if (sandbox === null || typeof sandbox !== 'object') {
      throw new TypeError(`${what} must give a sandbox session, not ${sandbox === null ? 'null' : typeof sandbox}`);
    }
    return { sandbox: handles.put(sandbox) };
  };
  const ops = {
    async 'sandbox.release'({ sandbox }) {
      const view = handles.get(sandbox);
      if (typeof view.release === 'function') await view.release();
      else await view.stop?.();
    },
    async 'sandbox.stop'({ sandbox }) {
      await handles.get(sandbox).stop?.();
    },
    async 'sandbox.destroy'({ sandbox }) {
      await handles.get(sandbox).destroy?.();
    },
    'sandbox.forget'({ sandbox }) {
      handles.forget(sandbox);
    },
  };
  return { give, ops };
}

/**
 * The public strategy object over a native strategy. `signals`, when given, holds the
 * `abortSignal` of each acquire under way, by session id, for the callbacks it reaches.
 */
function strategyObject(native, handles, signals) {
  const call = (f) => translating(() => holding(f()));
  /** The sandbox handed out as `number`: a new `NativeSandboxSession`, or the JavaScript object. */
  const sandboxSession = (number) => {
    const session = native.nativeSandbox(number);
    if (session != null) return session;
    const handle = native.jsSandbox(number);
    if (handle != null) return handles.get(handle);
    throw new Error(`no sandbox is handed out as ${number}`);
  };
  const strategy = {
    /** How many sessions can hold a sandbox at once; `undefined` when unbounded. */
    get capacity() {
      return native.capacity ?? undefined;
    },
    // The session id is the engine's to check.
    async acquire(sessionId, options = {}) {
      const resume = options?.resume ?? false;
      need(typeof resume === 'boolean', 'resume', 'resume must be a boolean');
      options?.abortSignal?.throwIfAborted();
      if (options?.abortSignal !== undefined) signals?.set(sessionId, options.abortSignal);
      let lease;
      try {
        lease = await call(() => native.acquire(sessionId, resume));
      } finally {
        if (signals?.get(sessionId) === options?.abortSignal) signals?.delete(sessionId);
      }
      const number = lease.sandbox;
      return {
        sandboxSession: number == null ? undefined : sandboxSession(number),
        suspend: () => call(() => lease.suspend()),
        close: () => call(() => lease.close()),
      };
    },
    discard(sessionId) {
      return call(() => native.discard(sessionId));
    },
    shutdown() {
      return call(() => native.shutdown());
    },
  };
  Object.defineProperty(strategy, NATIVE_SANDBOXES, {
    value: { native, sandboxSession, handles },
    enumerable: false,
  });
  return strategy;
}

/** JSON text of the data options, for Rust to check (and to refuse the options it does not know). */
function optionsJson(options) {
  return json(data(options, ''), 'options');
}

/**
 * One sandbox for every session: each session gets a view of it, `fork({ ports: [port], sessionId })`, with
 * a port of its own for its bridge and a working directory of its own. See the README.
 *
 * @param {{ open: () => any, ports: number[], stopWhenUnused?: boolean }} options
 */
function sharedSandbox(options) {
  need(options !== null && typeof options === 'object', 'options', 'sharedSandbox() takes { open, ports, stopWhenUnused? }');
  const { open, ...rest } = fields(options, 'options');
  const handles = new Handles('sandbox handle');
  let native;
  const { give, ops } = sandboxOps(handles, () => native);
  ops['sandbox.open'] = async () => {
    const sandbox = await open();
    if (!isNativeSandboxSession(sandbox) && typeof sandbox?.fork !== 'function') {
      throw new TypeError(
        'sharedSandbox(): open() must give a sandbox with fork({ ports }), such as the sandboxes of dockerSandbox(), localSandbox(), ai-sdk-sandbox-sbx or ai-sdk-sandbox-cloud-run',
      );
    }
    return give(sandbox, 'open()');
  };
  ops['sandbox.fork'] = async ({ sandbox, sessionId, port }) => {
    // `sessionId` is an addition: forks that take `{ ports }` alone keep working. A fork that
    // takes it should give the session the same working directory every time (see the README).
    const view = await handles.get(sandbox).fork({ ports: [port], sessionId });
    return give(view, 'fork()');
  };
  try {
    native = binding.createSharedSandbox(dispatcher(ops, 'the sandbox strategy'), optionsJson(rest));
  } catch (error) {
    const thrown = fromNative(error);
    if (SessionInputError.isInstance(thrown) && thrown.path === 'ports') throw new TypeError(thrown.message);
    throw thrown;
  }
  // Checked after the ports, so that bad ports are refused as they are whatever else is wrong.
  need(typeof open === 'function', 'open', 'open must be a function that gives the sandbox to share: dockerSandbox(), localSandbox(), or one with fork()');
  return strategyObject(native, handles);
}

/**
 * A sandbox of its own for each session: `create(sessionId)` for a new one, `resume(sessionId)`
 * for one that comes back (`create` when there is no `resume`, or it gives nothing), stopped when
 * the session is suspended, destroyed when it is closed. `provider` (the object `dockerSandbox()`
 * or `localSandbox()` returns, driven natively; or any `HarnessV1SandboxProvider`) in place of
 * `create` and `resume`.
 *
 * `create` and `resume` are called `(sessionId, { abortSignal? })`, with the signal `acquire()` was
 * given, if any.
 *
 * @param {{ create?: (sessionId: string, options: { abortSignal?: AbortSignal }) => any, resume?: (sessionId: string, options: { abortSignal?: AbortSignal }) => any, provider?: any, maxSessions?: number }} options
 */
function sandboxPerSession(options) {
  if (typeof options === 'function' && options.nativeProvider !== undefined) options = { provider: options };
  need(options !== null && typeof options === 'object', 'options', 'sandboxPerSession() takes { create, resume?, maxSessions? } or { provider, maxSessions? }');
  let { create, resume, provider, ...rest } = fields(options, 'options');
  let nativeProvider = null;
  if (provider !== undefined) {
    need(create === undefined && resume === undefined, 'provider', 'give either provider, or create and resume, not both');
    need(provider !== null && (typeof provider === 'object' || typeof provider === 'function'), 'provider', 'provider must be a sandbox provider, such as dockerSandbox()');
    if (provider.nativeProvider instanceof binding.NativeSandboxProvider) {
      nativeProvider = provider.nativeProvider;
    } else {
      need(typeof provider.createSession === 'function', 'provider.createSession', 'provider.createSession must be a function');
      create = (sessionId) => provider.createSession({ sessionId });
      if (typeof provider.resumeSession === 'function') resume = (sessionId) => provider.resumeSession({ sessionId });
    }
  } else {
    need(typeof create === 'function', 'create', 'create must be a function (sessionId) => sandbox session');
    need(resume === undefined || typeof resume === 'function', 'resume', 'resume must be a function (sessionId) => sandbox session');
  }
  const handles = new Handles('sandbox handle');
  let native;
  const { give, ops } = sandboxOps(handles, () => native);
  // As the reference: `create(sessionId, { abortSignal? })`, the signal of the acquire if it has one.
  const signals = new Map();
  const settings = (sessionId) => {
    const abortSignal = signals.get(sessionId);
    return abortSignal === undefined ? {} : { abortSignal };
  };
  ops['sandbox.create'] = async ({ sessionId }) => give(await create(sessionId, settings(sessionId)), 'create()');
  ops['sandbox.resume'] = async ({ sessionId }) => {
    if (resume === undefined) return null;
    const sandbox = await resume(sessionId, settings(sessionId));
    return sandbox == null ? null : give(sandbox, 'resume()');
  };
  try {
    native = binding.createSandboxPerSession(dispatcher(ops, 'the sandbox strategy'), optionsJson(rest), nativeProvider);
  } catch (error) {
    throw fromNative(error);
  }
  const strategy = strategyObject(native, handles, signals);
  // As the reference's, it has no shutdown(): the manager's shutdown() suspends its sessions and
  // leaves alone the sandboxes anything else still holds.
  delete strategy.shutdown;
  return strategy;
}

/** The native strategy of `sandboxes`, when it is one of this copy's: `{ native, sandboxSession }`. */
function nativeSandboxesOf(sandboxes) {
  const found = sandboxes?.[NATIVE_SANDBOXES];
  return found !== undefined && found.native instanceof binding.NativeSessionSandboxes ? found : undefined;
}

module.exports = { sharedSandbox, sandboxPerSession, nativeSandboxesOf };
