'use strict';
/**
 * `createSessionManager()`: the JavaScript face of the engine's session manager.
 *
 * It checks what only JavaScript can see (the functions among the options), hands the rest to
 * the native manager, and builds each `SessionTurn` from the client stream of its turn. State,
 * defaults for everything but the functions, and validation live in Rust.
 */

const { randomUUID } = require('node:crypto');
const native = require('../binding.js');
const { SessionInputError, SessionNotFoundError, translating, fromNative } = require('./errors.js');
const { createHost } = require('./host.js');
const { Turns } = require('./turns.js');
const { toUIMessageStreamResponse } = require('./sse.js');
const { NATIVE_STORE } = require('./stores.js');
const { nativeSandboxesOf } = require('./strategies.js');
const { getHarnessErrorMessage } = require('./harness-errors.js');
const { hold, holding } = require('./keep-alive.js');

const OPTION_NAMES = new Set([
  'agent',
  'sandboxes',
  'store',
  'idleTimeoutMs',
  'closeSuspendedAfterMs',
  'turnTimeoutMs',
  'suspendIdleWhenFull',
  'approve',
  'generateId',
  'errorMessage',
  'onError',
]);

function need(condition, path, message) {
  if (!condition) throw new SessionInputError({ path, message });
}

/** JSON text of `value`, or a `SessionInputError` naming `path` when it is not JSON. */
function json(value, path) {
  let text;
  try {
    text = JSON.stringify(value === undefined ? null : value);
  } catch (error) {
    throw new SessionInputError({ path, message: `${path} must be JSON: ${error.message}` });
  }
  need(typeof text === 'string', path, `${path} must be JSON`);
  return text;
}

function checkOptions(options) {
  need(options !== null && typeof options === 'object', 'options', 'createSessionManager() takes an options object');
  for (const name of Object.keys(options)) {
    need(OPTION_NAMES.has(name), name, `${name} is not an option of createSessionManager()`);
  }
  need(typeof options.agent === 'function', 'agent', 'agent must be a function ({ id, metadata }) => SessionAgent');
  const sandboxes = options.sandboxes;
  need(sandboxes !== null && typeof sandboxes === 'object', 'sandboxes', 'sandboxes must be a SessionSandboxes: sharedSandbox(), sandboxPerSession() or your own');
  need(typeof sandboxes.acquire === 'function', 'sandboxes.acquire', 'sandboxes.acquire must be a function');
  for (const name of ['approve', 'generateId', 'errorMessage', 'onError']) {
    need(options[name] === undefined || typeof options[name] === 'function', name, `${name} must be a function`);
  }
  const store = options.store;
  if (store !== undefined && store[NATIVE_STORE] === undefined) {
    need(store !== null && typeof store === 'object', 'store', 'store must be a SessionStore');
    for (const method of ['save', 'get', 'list', 'getResumeState', 'delete']) {
      need(typeof store[method] === 'function', `store.${method}`, `store.${method} must be a function`);
    }
  }
}

function checkId(id, path = 'id') {
  need(typeof id === 'string' && id.length > 0, path, `${path} must be a non-empty string`);
}

/**
 * Creates the session manager of an application: see the README.
 * @param {import('../index').SessionManagerOptions<any>} options
 */
function createSessionManager(options) {
  checkOptions(options);
  const generateId = options.generateId ?? randomUUID;
  const errorMessage = options.errorMessage ?? getHarnessErrorMessage;
  const onError = options.onError ?? ((error, context) => console.error('[harness-sessions]', context, error));
  const store = options.store ?? require('./stores.js').createMemorySessionStore();
  const listeners = new Set();
  const preparing = new Preparing();

  const newId = () => {
    const id = generateId();
    need(typeof id === 'string' && id.length > 0, 'generateId', 'generateId() must return a non-empty string');
    return id;
  };

  let manager;
  const turns = new Turns(() => manager, errorMessage);
  // sharedSandbox() and sandboxPerSession() are strategies in Rust: the manager uses them directly.
  const nativeSandboxes = nativeSandboxesOf(options.sandboxes);
  const host = createHost({
    agent: options.agent,
    sandboxes: options.sandboxes,
    store: store[NATIVE_STORE] === undefined ? store : undefined,
    turns,
    emit: (event) => {
      preparing.follow(event);
      for (const listener of listeners) {
        try {
          listener(event);
        } catch (error) {
          reportError(error, { action: 'subscribe' });
        }
      }
    },
    onError: (error, context) => reportError(error, context),
    errorMessage,
    approve: options.approve,
    nativeSandbox: nativeSandboxes?.sandboxSession,
  });
  function reportError(error, context) {
    try {
      onError(error, context);
    } catch {}
  }

  const settings = {
    idleTimeoutMs: options.idleTimeoutMs,
    closeSuspendedAfterMs: options.closeSuspendedAfterMs,
    turnTimeoutMs: options.turnTimeoutMs,
    suspendIdleWhenFull: options.suspendIdleWhenFull,
    capacity: options.sandboxes.capacity,
    approves: options.approve !== undefined,
  };
  manager = translating(
    () =>
      new native.NativeManager(
        host,
        json(settings, 'options'),
        store[NATIVE_STORE] ?? null,
        nativeSandboxes?.native ?? null,
      ),
  );

  const parse = (text) => (text == null ? undefined : JSON.parse(text));
  const updates = new Queues();
  const call = async (f) => {
    try {
      return await holding(f());
    } catch (error) {
      throw fromNative(error);
    }
  };

  function sessionTurn(turn) {
    return {
      stream: turn.stream,
      toUIMessageStreamResponse: (init) => toUIMessageStreamResponse(turn.stream, init),
      done: turn.done,
    };
  }

  async function startTurn(id, abortSignal, begin) {
    checkId(id);
    need(abortSignal === undefined || abortSignal instanceof AbortSignal, 'abortSignal', 'abortSignal must be an AbortSignal');
    const turn = turns.open();
    try {
      await holding(begin(turn.turnId));
    } catch (error) {
      const thrown = fromNative(error);
      turns.discard(turn, thrown);
      throw thrown;
    }
    turns.follow(turn, abortSignal);
    return sessionTurn(turn);
  }

  const api = {
    async create({ id, metadata } = {}) {
      need(id === undefined || (typeof id === 'string' && id.length > 0), 'id', 'id must be a non-empty string');
      const text = json(metadata, 'metadata');
      return parse(await call(() => manager.create(id ?? newId(), text)));
    },
    async get(id) {
      checkId(id);
      return parse(await call(() => manager.get(id)));
    },
    async list() {
      return parse(await call(() => manager.list()));
    },
    async send(id, { message, prompt, abortSignal } = {}) {
      need(typeof message === 'string' || (message !== null && typeof message === 'object'), 'message', 'message must be a string or a UIMessage');
      need(prompt === undefined || typeof prompt === 'string', 'prompt', 'prompt must be a string');
      const request = { message, prompt, messageId: newId(), replyId: newId() };
      return startTurn(id, abortSignal, (turnId) =>
        manager.send(id, json({ ...request, turnId }, 'message')),
      );
    },
    async continue(id, { message, toolApprovalContinuations, toolResultContinuations, abortSignal } = {}) {
      need(message === undefined || (message !== null && typeof message === 'object'), 'message', 'message must be a UIMessage');
      need(toolApprovalContinuations === undefined || Array.isArray(toolApprovalContinuations), 'toolApprovalContinuations', 'toolApprovalContinuations must be an array');
      need(toolResultContinuations === undefined || Array.isArray(toolResultContinuations), 'toolResultContinuations', 'toolResultContinuations must be an array');
      const request = { message, toolApprovalContinuations, toolResultContinuations };
      return startTurn(id, abortSignal, (turnId) =>
        manager.continue(id, json({ ...request, turnId }, 'message')),
      );
    },
    async update(id, changes) {
      checkId(id);
      need(changes !== null && typeof changes === 'object' && 'metadata' in changes, 'metadata', 'update() takes { metadata }');
      const change = changes.metadata;
      if (typeof change !== 'function') {
        return parse(await call(() => manager.update(id, json(change, 'metadata'))));
      }
      // A function of the metadata as they stand: updates of one session run one after the other,
      // so that none is lost between the read and the write.
      return updates.run(id, async () => {
        const current = await api.get(id);
        if (current === undefined) throw new SessionNotFoundError({ sessionId: id });
        return parse(await call(() => manager.update(id, json(change(current.metadata), 'metadata'))));
      });
    },
    async interrupt(id) {
      checkId(id);
      await call(() => manager.interrupt(id));
    },
    async suspend(id) {
      checkId(id);
      return parse(await call(() => manager.suspend(id)));
    },
    async close(id) {
      checkId(id);
      return parse(await call(() => manager.close(id)));
    },
    async delete(id) {
      checkId(id);
      await call(() => manager.delete(id));
    },
    subscribe(listener) {
      need(typeof listener === 'function', 'listener', 'subscribe() takes a function');
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async shutdown() {
      await call(() => manager.shutdown());
    },
  };
  Object.defineProperty(api, DIAGNOSTICS, {
    value: () => ({ ...JSON.parse(manager.diagnostics()), handles: host.handles() }),
  });
  return api;
}

/**
 * Holds the event loop while a session is `preparing`: a script that created a session and waits
 * for it through `subscribe()` is not cut short while its sandbox and harness session open.
 */
class Preparing {
  #holds = new Map();

  follow(event) {
    const id = event.type === 'updated' ? event.session.id : event.sessionId;
    const isPreparing = event.type === 'updated' && event.session.status === 'preparing';
    const held = this.#holds.get(id);
    if (isPreparing && held === undefined) this.#holds.set(id, hold());
    if (!isPreparing && held !== undefined) {
      held();
      this.#holds.delete(id);
    }
  }
}

/** One queue of tasks per key: a task runs once the ones before it under its key settle. */
class Queues {
  #tails = new Map();

  run(key, task) {
    const before = this.#tails.get(key) ?? Promise.resolve();
    const result = before.then(task, task);
    const tail = result.then(
      () => {},
      () => {},
    );
    this.#tails.set(key, tail);
    tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}

/** What a manager holds, for tests and benchmarks: `manager[DIAGNOSTICS]()`. */
const DIAGNOSTICS = Symbol.for('harness-sessions.diagnostics');

module.exports = { createSessionManager, DIAGNOSTICS };
