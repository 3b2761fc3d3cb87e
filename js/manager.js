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
const { SessionNotFoundError, SessionOutputError, translating, fromNative } = require('./errors.js');
const { need, plain, fields, data, kept, json } = require('./input.js');
const { createHost } = require('./host.js');
const { Turns } = require('./turns.js');
const { toUIMessageStreamResponse } = require('./sse.js');
const { messageChunks, streamOf } = require('./replay.js');
const { nativeStoreOf } = require('./stores.js');
const { Summaries } = require('./summaries.js');
const { nativeSandboxesOf } = require('./strategies.js');
const { clientMessenger } = require('./harness-errors.js');
const { hold, holding } = require('./keep-alive.js');

/** The options that are functions: JavaScript's to check and keep. */
const FUNCTION_OPTIONS = ['agent', 'approve', 'generateId', 'errorMessage', 'onError'];

/**
 * Checks what only JavaScript can see of the options (the functions, the store and the
 * sandboxes' `acquire`); gives them with `settings`, the data options as JSON for the engine,
 * which checks them and refuses any option it does not know.
 */
function checkOptions(given) {
  need(given !== undefined, 'options', 'createSessionManager() takes an options object');
  const { sandboxes, store, ...rest } = fields(given, 'options');
  const functions = {};
  for (const name of FUNCTION_OPTIONS) {
    functions[name] = rest[name];
    delete rest[name];
  }
  need(typeof functions.agent === 'function', 'agent', 'agent must be a function ({ id, metadata }) => SessionAgent');
  for (const name of FUNCTION_OPTIONS.slice(1)) {
    need(functions[name] === undefined || typeof functions[name] === 'function', name, `${name} must be a function`);
  }
  need(sandboxes !== null && typeof sandboxes === 'object', 'sandboxes', 'sandboxes must be a SessionSandboxes: sharedSandbox(), sandboxPerSession() or your own');
  const { acquire, capacity } = plain(sandboxes, 'sandboxes', ['acquire', 'capacity']);
  need(typeof acquire === 'function', 'sandboxes.acquire', 'sandboxes.acquire must be a function');
  need(store === undefined || (store !== null && typeof store === 'object'), 'store', 'store must be a SessionStore');
  if (store !== undefined && nativeStoreOf(store) === undefined) {
    const methods = plain(store, 'store', ['save', 'get', 'list', 'getResumeState', 'delete']);
    for (const [method, f] of Object.entries(methods)) {
      need(typeof f === 'function', `store.${method}`, `store.${method} must be a function`);
    }
  }
  const options = data({ ...rest, sandboxes: { capacity } }, '');
  const settings = json({ options, approves: functions.approve !== undefined }, 'options');
  return { ...functions, sandboxes, store, reconnectBufferChunks: options.reconnectBufferChunks, settings };
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
  const nativeStore = nativeStoreOf(store);
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
    store: nativeStore === undefined ? store : undefined,
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

  manager = translating(
    () =>
      new native.NativeManager(
        host,
        options.settings,
        nativeStore ?? null,
        nativeSandboxes?.native ?? null,
      ),
  );

  const parse = (text) => (text == null ? undefined : JSON.parse(text));
  /**
   * The end of the first `shutdown()`, settled either way, once one was asked for: a message it
   * cuts is refused no earlier than it ends (as the reference's, whose shutdown settles both in
   * one turn), so that its rejection is never one with no handler while the caller still awaits
   * the shutdown.
   */
  let shutdownEnd;
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
      if (shutdownEnd !== undefined) await shutdownEnd;
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
      const text = json(metadata, 'metadata');
      const history = initialHistory === undefined ? null : importedHistory(initialHistory, newId);
      // The id is the engine's to check (`null` is refused there, not taken for none).
      return parse(await call(() => manager.create(id === undefined ? newId() : id, text, history)));
    },
    async get(id) {
      return parse(await call(() => manager.get(id)));
    },
    async list() {
      return summaries.list((known) => call(() => manager.listSince(known)));
    },
    async send(id, options) {
      const { message, prompt, abortSignal, submissionId } = plain(options, 'options', ['message', 'prompt', 'abortSignal', 'submissionId']);
      const turn = turnOptions(options);
      const submission = submissionOf(submissionId, ['send', message, prompt, turn]);
      const request = { message: kept(message, 'message'), prompt: kept(prompt, 'prompt'), messageId: newId(), replyId: newId(), submission, ...turn };
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
      // `null` is no message to JSON: told apart from none here, the rest checked by the engine.
      need(message === undefined || (message !== null && typeof message === 'object'), 'message', 'message must be a UIMessage');
      const turn = turnOptions(options);
      const submission = submissionOf(submissionId, ['continue', message, toolApprovalContinuations, toolResultContinuations, turn]);
      const request = {
        message,
        toolApprovalContinuations: kept(toolApprovalContinuations, 'toolApprovalContinuations'),
        toolResultContinuations: kept(toolResultContinuations, 'toolResultContinuations'),
        submission,
        ...turn,
      };
      return startTurn(id, abortSignal, turn.output != null, (turnId) =>
        manager.continue(id, json({ ...request, turnId }, 'message')),
      );
    },
    async exec(id, options) {
      need(options !== undefined, 'options', 'exec() takes { command, key?, abortSignal?, maxOutputBytes? }');
      // The signal is JavaScript's; the engine checks the rest (and refuses an option it does not know).
      const { abortSignal, ...rest } = fields(options, 'options');
      need(abortSignal === undefined || abortSignal instanceof AbortSignal, 'abortSignal', 'abortSignal must be an AbortSignal');
      const execOptions = data(rest, '');
      abortSignal?.throwIfAborted();
      const execId = turns.reserve();
      const cut = () => manager.cancelWaiting(execId);
      if (abortSignal !== undefined) {
        execSignals.set(execId, abortSignal);
        manager.willWait(execId);
        abortSignal.addEventListener('abort', cut, { once: true });
      }
      try {
        const request = { execId, options: execOptions };
        return JSON.parse(await holding(manager.exec(id, json(request, 'options'))));
      } catch (error) {
        if (abortSignal?.aborted && isCutBeforeStart(error)) throw abortSignal.reason;
        // As a message's: a command a shutdown cuts is refused no earlier than the shutdown's end.
        if (shutdownEnd !== undefined) await shutdownEnd;
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
      // The turns are kept here, so the engine only checks the id.
      translating(() => manager.checkId(id));
      const turn = turns.reconnect(id);
      return turn === undefined ? undefined : sessionTurn(turn);
    },
    async update(id, changes) {
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
      await call(() => manager.interrupt(id));
    },
    async suspend(id) {
      return parse(await call(() => manager.suspend(id)));
    },
    async close(id) {
      return parse(await call(() => manager.close(id)));
    },
    async delete(id) {
      await call(() => manager.delete(id));
    },
    subscribe(listener) {
      need(typeof listener === 'function', 'listener', 'subscribe() takes a function');
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async shutdown() {
      const ending = call(() => manager.shutdown());
      // The first one's end: a second shutdown() resolves at once (the engine does nothing).
      shutdownEnd ??= ending.then(
        () => {},
        () => {},
      );
      await ending;
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
 * `limits: { maxSteps?, timeoutMs? }`, `output: { schema, name?, description? }`): read here as
 * plain data, checked by the engine (`output` wholly: its shape and its schema).
 */
function turnOptions(options) {
  const read = plain(options, 'options', ['instructionAddendum', 'limits', 'output']);
  // As JSON here, so that what is not JSON is named `output`; its shape is checked by the engine.
  const output = read.output === undefined ? undefined : JSON.parse(json(read.output, 'output'));
  return { instructionAddendum: data(read.instructionAddendum, 'instructionAddendum'), limits: data(read.limits, 'limits'), output };
}

/** Whether `error` (from the native manager) is a command or message its caller cut before it started: its code says so. */
function isCutBeforeStart(error) {
  return error?.code === 'SESSION_CUT_BEFORE_START';
}

/** What a manager holds, for tests and benchmarks: `manager[DIAGNOSTICS]()`. */
const DIAGNOSTICS = Symbol.for('harness-sessions.diagnostics');

module.exports = { createSessionManager, DIAGNOSTICS };
