'use strict';
/**
 * `createSessionManager()`: the JavaScript face of the engine's session manager.
 *
 * It checks what only JavaScript can see (the functions among the options), hands the rest to
 * the native manager, and builds each `SessionTurn` from the client stream of its turn. State,
 * defaults for everything but the functions, and validation live in Rust.
 */

const { randomUUID, createHash } = require('node:crypto');
const native = require('./native.js');
const { SessionOutputError, translating, fromNative } = require('./errors.js');
const { need, plain, checkId, checkDuration, json } = require('./input.js');
const { createHost } = require('./host.js');
const { Turns } = require('./turns.js');
const { toUIMessageStreamResponse } = require('./sse.js');
const { messageChunks, streamOf } = require('./replay.js');
const { NATIVE_STORE } = require('./stores.js');
const { Summaries } = require('./summaries.js');
const { nativeSandboxesOf } = require('./strategies.js');
const { clientMessenger } = require('./harness-errors.js');
const { hold, holding } = require('./keep-alive.js');

const OPTION_NAMES = new Set([
  'agent',
  'sandboxes',
  'store',
  'idleTimeoutMs',
  'closeSuspendedAfterMs',
  'turnTimeoutMs',
  'windDownMs',
  'suspendIdleWhenFull',
  'approve',
  'generateId',
  'errorMessage',
  'onError',
  'reconnectBufferChunks',
]);

function checkOptions(given) {
  const options = plain(given, 'options', [...OPTION_NAMES], { refuseOthers: true });
  need(given !== undefined, 'options', 'createSessionManager() takes an options object');
  need(typeof options.agent === 'function', 'agent', 'agent must be a function ({ id, metadata }) => SessionAgent');
  const sandboxes = options.sandboxes;
  need(sandboxes !== null && typeof sandboxes === 'object', 'sandboxes', 'sandboxes must be a SessionSandboxes: sharedSandbox(), sandboxPerSession() or your own');
  const { acquire, capacity } = plain(sandboxes, 'sandboxes', ['acquire', 'capacity']);
  need(typeof acquire === 'function', 'sandboxes.acquire', 'sandboxes.acquire must be a function');
  need(
    capacity === undefined || (Number.isInteger(capacity) && capacity >= 1 && capacity <= 0xffffffff),
    'sandboxes.capacity',
    'sandboxes.capacity must be a whole number, one or more',
  );
  for (const name of ['approve', 'generateId', 'errorMessage', 'onError']) {
    need(options[name] === undefined || typeof options[name] === 'function', name, `${name} must be a function`);
  }
  for (const name of ['idleTimeoutMs', 'closeSuspendedAfterMs', 'turnTimeoutMs', 'windDownMs']) checkDuration(options[name], name);
  need(
    options.reconnectBufferChunks === undefined ||
      (Number.isInteger(options.reconnectBufferChunks) && options.reconnectBufferChunks >= 0 && options.reconnectBufferChunks <= 0xffffffff),
    'reconnectBufferChunks',
    'reconnectBufferChunks must be a whole number, zero or more',
  );
  need(
    options.suspendIdleWhenFull === undefined || typeof options.suspendIdleWhenFull === 'boolean',
    'suspendIdleWhenFull',
    'suspendIdleWhenFull must be a boolean',
  );
  const store = options.store;
  need(store === undefined || (store !== null && typeof store === 'object'), 'store', 'store must be a SessionStore');
  if (store !== undefined && store[NATIVE_STORE] === undefined) {
    const methods = plain(store, 'store', ['save', 'get', 'list', 'getResumeState', 'delete']);
    for (const [method, f] of Object.entries(methods)) {
      need(typeof f === 'function', `store.${method}`, `store.${method} must be a function`);
    }
  }
  return { ...options, capacity };
}

/**
 * Creates the session manager of an application: see the README.
 * @param {import('../index').SessionManagerOptions<any>} options
 */
function createSessionManager(given) {
  const options = checkOptions(given);
  const generateId = options.generateId ?? randomUUID;
  const clientMessage = clientMessenger(options.errorMessage);
  const onError = options.onError ?? ((error, context) => console.error('[harness-sessions]', context, error));
  const store = options.store ?? require('./stores.js').createMemorySessionStore();
  const listeners = new Set();
  const preparing = new Preparing();
  const execSignals = new Map();

  const newId = () => {
    const id = generateId();
    need(typeof id === 'string' && id.length > 0, 'generateId', 'generateId() must return a non-empty string');
    return id;
  };

  let manager;
  const turns = new Turns(() => manager, clientMessage, options.reconnectBufferChunks);
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
          reportError(error, { action: 'listener' });
        }
      }
    },
    onError: (error, context) => reportError(error, context),
    clientMessage,
    approve: options.approve,
    nativeSandbox: nativeSandboxes?.sandboxSession,
    execSignals,
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
    windDownMs: options.windDownMs,
    suspendIdleWhenFull: options.suspendIdleWhenFull,
    capacity: options.capacity,
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
  /** The summaries of the last list(), so that the next crosses only those written since. */
  const summaries = new Summaries();
  const call = (f) => translating(() => holding(f()));

  function sessionTurn(turn) {
    return {
      stream: turn.stream,
      toUIMessageStreamResponse: (init) => toUIMessageStreamResponse(turn.stream, init),
      done: turn.done,
      output: turn.output,
    };
  }

  async function startTurn(id, abortSignal, asksOutput, begin) {
    checkId(id);
    need(abortSignal === undefined || abortSignal instanceof AbortSignal, 'abortSignal', 'abortSignal must be an AbortSignal');
    const turn = turns.open(abortSignal, asksOutput);
    // A message waiting for a command of exec() (or a preparing session) is cut by its signal.
    const cut = () => manager.cancelWaiting(turn.turnId);
    if (abortSignal !== undefined) {
      manager.willWait(turn.turnId);
      abortSignal.addEventListener('abort', cut, { once: true });
    }
    let started;
    try {
      started = parse(await holding(begin(turn.turnId)));
    } catch (error) {
      const thrown = abortSignal?.aborted && isCutBeforeStart(error) ? abortSignal.reason : fromNative(error);
      turns.discard(turn, thrown);
      throw thrown;
    } finally {
      if (abortSignal !== undefined) {
        abortSignal.removeEventListener('abort', cut);
        manager.forgetWaiting(turn.turnId);
      }
    }
    if (started?.replayed) {
      turns.forget(turn);
      return submittedTurn(id, started);
    }
    turns.started(turn, id, started?.messageId);
    return sessionTurn(turn);
  }

  /**
   * The turn a `submissionId` started before: live, as `reconnect()`; over, its recorded reply
   * replayed, and `done` the session as it is.
   */
  async function submittedTurn(id, started) {
    const live = turns.reconnect(id, started.messageId);
    if (live !== undefined) return sessionTurn(live);
    const record = await api.get(id);
    const reply = record?.messages.find((message) => message.id === started.messageId && message.role === 'assistant');
    const stream = streamOf(reply === undefined ? [] : messageChunks(reply));
    const { messages, ...session } = record ?? { messages: [], ...started.session };
    const replayed = { stream, done: Promise.resolve(session) };
    // The answer as it was judged: kept in the reply's metadata.
    const metadata = reply?.metadata ?? {};
    replayed.output =
      metadata.outputError !== undefined
        ? Promise.reject(new SessionOutputError(metadata.outputError))
        : Promise.resolve(metadata.output);
    replayed.output.catch(() => {});
    return sessionTurn(replayed);
  }

  const api = {
    async create(options) {
      need(options !== undefined, 'options', 'create() takes { id?, metadata, initialHistory? }');
      const { id, metadata, initialHistory } = plain(options, 'options', ['id', 'metadata', 'initialHistory']);
      if (id !== undefined) checkId(id);
      const text = json(metadata, 'metadata');
      const history = initialHistory === undefined ? null : importedHistory(initialHistory, newId);
      return parse(await call(() => manager.create(id ?? newId(), text, history)));
    },
    async get(id) {
      checkId(id);
      return parse(await call(() => manager.get(id)));
    },
    async list() {
      return summaries.list((known) => call(() => manager.listSince(known)));
    },
    async send(id, options) {
      const { message, prompt, abortSignal, submissionId } = plain(options, 'options', ['message', 'prompt', 'abortSignal', 'submissionId']);
      need(typeof message === 'string' || (message !== null && typeof message === 'object'), 'message', 'message must be a string or a UIMessage');
      need(prompt === undefined || typeof prompt === 'string', 'prompt', 'prompt must be a string');
      const turn = turnOptions(options);
      const submission = submissionOf(submissionId, ['send', message, prompt, turn]);
      const request = { message, prompt, messageId: newId(), replyId: newId(), submission, ...turn };
      return startTurn(id, abortSignal, turn.output != null, (turnId) =>
        manager.send(id, json({ ...request, turnId }, 'message')),
      );
    },
    async continue(id, options) {
      const { message, toolApprovalContinuations, toolResultContinuations, abortSignal, submissionId } = plain(options, 'options', [
        'message',
        'toolApprovalContinuations',
        'toolResultContinuations',
        'abortSignal',
        'submissionId',
      ]);
      need(message === undefined || (message !== null && typeof message === 'object'), 'message', 'message must be a UIMessage');
      need(toolApprovalContinuations === undefined || Array.isArray(toolApprovalContinuations), 'toolApprovalContinuations', 'toolApprovalContinuations must be an array');
      need(toolResultContinuations === undefined || Array.isArray(toolResultContinuations), 'toolResultContinuations', 'toolResultContinuations must be an array');
      const turn = turnOptions(options);
      const submission = submissionOf(submissionId, ['continue', message, toolApprovalContinuations, toolResultContinuations, turn]);
      const request = { message, toolApprovalContinuations, toolResultContinuations, submission, ...turn };
      return startTurn(id, abortSignal, turn.output != null, (turnId) =>
        manager.continue(id, json({ ...request, turnId }, 'message')),
      );
    },
    async exec(id, options) {
      checkId(id);
      need(options !== undefined, 'options', 'exec() takes { command, key?, abortSignal?, maxOutputBytes? }');
      const { command, key, abortSignal, maxOutputBytes } = plain(options, 'options', [
        'command',
        'key',
        'abortSignal',
        'maxOutputBytes',
      ], { refuseOthers: true });
      need(typeof command === 'string' && command.trim().length > 0, 'command', 'command must be a non-empty string');
      need(key === undefined || (typeof key === 'string' && key.length > 0), 'key', 'key must be a non-empty string');
      need(abortSignal === undefined || abortSignal instanceof AbortSignal, 'abortSignal', 'abortSignal must be an AbortSignal');
      need(
        maxOutputBytes === undefined || (Number.isSafeInteger(maxOutputBytes) && maxOutputBytes >= 0),
        'maxOutputBytes',
        'maxOutputBytes must be a whole number of bytes, zero or more',
      );
      abortSignal?.throwIfAborted();
      const execId = turns.reserve();
      const cut = () => manager.cancelWaiting(execId);
      if (abortSignal !== undefined) {
        execSignals.set(execId, abortSignal);
        manager.willWait(execId);
        abortSignal.addEventListener('abort', cut, { once: true });
      }
      try {
        const request = { execId, command, key, maxOutputBytes };
        return JSON.parse(await holding(manager.exec(id, json(request, 'options'))));
      } catch (error) {
        if (abortSignal?.aborted && isCutBeforeStart(error)) throw abortSignal.reason;
        throw fromNative(error);
      } finally {
        if (abortSignal !== undefined) {
          execSignals.delete(execId);
          abortSignal.removeEventListener('abort', cut);
          manager.forgetWaiting(execId);
        }
      }
    },
    async reconnect(id) {
      checkId(id);
      const turn = turns.reconnect(id);
      return turn === undefined ? undefined : sessionTurn(turn);
    },
    async update(id, changes) {
      checkId(id);
      const read = plain(changes, 'changes', ['metadata']);
      need(changes !== undefined && read.metadata !== undefined, 'metadata', 'update() takes { metadata }');
      const change = read.metadata;
      if (typeof change !== 'function') {
        return parse(await call(() => manager.update(id, json(change, 'metadata'))));
      }
      // A function of the metadata as they stand: the engine calls it under the session's command
      // lock, so that no other command (another update, plain or not) comes between the read and
      // the write. What it throws is thrown here, and nothing changes.
      let thrown;
      const changed = async (metadataJson) => {
        try {
          return json(change(JSON.parse(metadataJson)), 'metadata');
        } catch (error) {
          thrown = { error };
          return null;
        }
      };
      try {
        return parse(await call(() => manager.updateWith(id, changed)));
      } catch (error) {
        throw thrown === undefined ? error : thrown.error;
      }
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
 * What the engine is given of `create()`'s `initialHistory`: `{ items, messageIds }` as JSON, the
 * transcript read once (a getter that throws is bad input) and an id from `generateId` for each
 * item, enough for every message the engine makes of it. The engine checks the transcript.
 */
function importedHistory(initialHistory, newId) {
  const items = json(initialHistory, 'initialHistory');
  const read = JSON.parse(items);
  need(Array.isArray(read), 'initialHistory', 'initialHistory must be an array');
  const messageIds = read.map(() => newId());
  return `{"items":${items},"messageIds":${JSON.stringify(messageIds)}}`;
}

/** The longest `submissionId`. */
const MOST_SUBMISSION_ID_LENGTH = 512;

/**
 * A request's `submissionId` with the digest of what it submits (`request`), for the engine;
 * `undefined` without one.
 */
function submissionOf(submissionId, request) {
  if (submissionId === undefined) return undefined;
  need(
    typeof submissionId === 'string' &&
      submissionId.length > 0 &&
      submissionId.length <= MOST_SUBMISSION_ID_LENGTH &&
      submissionId.isWellFormed(),
    'submissionId',
    `submissionId must be a non-empty string of at most ${MOST_SUBMISSION_ID_LENGTH} characters`,
  );
  let text;
  try {
    text = JSON.stringify(request);
  } catch {
    text = undefined;
  }
  need(typeof text === 'string', 'message', 'message must be JSON');
  return { id: submissionId, digest: createHash('sha256').update(text).digest('hex') };
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

/**
 * The options of one turn `send()` and `continue()` may be given (`instructionAddendum`,
 * `limits: { maxSteps?, timeoutMs? }`, `output: { schema, name?, description? }`): read here,
 * checked by the engine (`output` wholly: its shape and its schema).
 */
function turnOptions(options) {
  const read = plain(options, 'options', ['instructionAddendum', 'limits', 'output']);
  const { instructionAddendum, limits } = read;
  // As JSON here, so that what is not JSON is named `output`; its shape is checked by the engine.
  const output = read.output === undefined ? undefined : JSON.parse(json(read.output, 'output'));
  need(instructionAddendum === undefined || typeof instructionAddendum === 'string', 'instructionAddendum', 'instructionAddendum must be a string');
  if (limits === undefined) return { instructionAddendum, output };
  const { maxSteps, timeoutMs } = plain(limits, 'limits', ['maxSteps', 'timeoutMs'], { refuseOthers: true });
  need(maxSteps === undefined || (Number.isSafeInteger(maxSteps) && maxSteps >= 1), 'limits.maxSteps', 'limits.maxSteps must be a whole number, one or more');
  checkDuration(timeoutMs, 'limits.timeoutMs');
  return { instructionAddendum, limits: { maxSteps, timeoutMs }, output };
}

/** Whether `error` (from the native manager) is a command or message its caller cut before it started. */
function isCutBeforeStart(error) {
  return typeof error?.message === 'string' && error.message.includes('cut short by its caller before it started');
}

/** What a manager holds, for tests and benchmarks: `manager[DIAGNOSTICS]()`. */
const DIAGNOSTICS = Symbol.for('harness-sessions.diagnostics');

module.exports = { createSessionManager, DIAGNOSTICS };
