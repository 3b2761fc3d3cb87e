'use strict';
/**
 * The host: the one function through which the engine reaches what the application supplied
 * (its agent, sandboxes, store and hooks) and the streams of the turns.
 *
 * Each call is one JSON text, `{ op, ...arguments }` (the protocol of `src/binding/protocol.rs`,
 * whose `HostOp` lists every operation); `dispatcher()` hands it to the function of that name.
 * The answer is always a promise of `{ ok: true, value }` or `{ ok: false, error: { message,
 * origin } }`, never a rejection: the original JavaScript error stays here (`keeper`) and crosses
 * as a number, so that `onError` and a rejected `send()` see the very error the application threw.
 */

const { keeper, fromDetails } = require('./errors.js');
const { Handles, ok, failed, failure } = require('./handles.js');
const { isUnfinished } = require('./turns.js');

const DONE = Promise.resolve('{"ok":true,"value":null}');

/**
 * @param {object} seams
 * @param {(session: { id: string, metadata: unknown }) => any} seams.agent
 * @param {any} seams.sandboxes the application's `SessionSandboxes`
 * @param {any} [seams.store] a `SessionStore` written in JavaScript, when not a native one
 * @param {import('./turns.js').Turns} seams.turns
 * @param {(event: any) => void} seams.emit
 * @param {(error: unknown, context: { action: string, sessionId?: string }) => void} seams.onError
 * @param {(error: unknown) => string} seams.clientMessage what a client is told of an error
 *   (`clientMessenger()` of `js/harness-errors.js`)
 * @param {Function} [seams.approve]
 * @param {(number: number) => any} [seams.nativeSandbox] the sandbox a native strategy handed out
 *   as `number` (`{ native: number }`), when `sandboxes` is one
 * @param {Map<number, AbortSignal>} [seams.execSignals] the `abortSignal`s of the commands of
 *   `exec()` under way, by their number
 */
function createHost({ agent, sandboxes, store, turns, emit, onError, clientMessage, approve, nativeSandbox, execSignals }) {
  const agents = new Handles('agent');
  const sessions = new Handles('harness session');
  const leases = new Handles('lease');

  const ops = {
    // agent() is called before the sandbox is acquired, as the reference does: one that throws
    // never acquires a sandbox.
    async 'agent.choose'({ sessionId, metadata }) {
      const sessionAgent = await agent({ id: sessionId, metadata });
      if (sessionAgent == null || typeof sessionAgent.createSession !== 'function') {
        throw new TypeError('agent() must return a SessionAgent, such as a HarnessAgent');
      }
      return { agent: agents.put(sessionAgent) };
    },
    'agent.forget'({ agent: chosen }) {
      agents.forget(chosen);
    },
    async 'agent.open'({ sandbox, resumeFrom, sessionId, agent: chosen }) {
      const sessionAgent = agents.take(chosen);
      const sandboxSession =
        sandbox?.js !== undefined
          ? leases.get(sandbox.js).sandboxSession
          : sandbox?.native !== undefined
            ? nativeSandbox(sandbox.native)
            : undefined;
      const options = { sessionId, sandboxSession };
      if (resumeFrom !== undefined) options.resumeFrom = resumeFrom;
      const session = await sessionAgent.createSession(options);
      const opened = { session: sessions.put({ agent: sessionAgent, session, sandboxSession }) };
      // What the engine asks next, told with the answer: no crossing of its own.
      try {
        opened.unfinished = isUnfinished(session);
      } catch {
        // Left out: the engine asks (`session.unfinished`), and reports what it throws.
      }
      return opened;
    },
    // exec(): the command, unchanged, through the sandbox's run(), in the directory the harness
    // works in (a HarnessAgent session's `sessionWorkDir`), else the sandbox's default one.
    async 'session.exec'({ session, execId, command }) {
      const { session: handle, sandboxSession } = sessions.get(session);
      if (sandboxSession == null || typeof sandboxSession.run !== 'function') {
        throw new Error('The session has no sandbox to run a command in.');
      }
      const workingDirectory =
        typeof handle?.sessionWorkDir === 'string' && handle.sessionWorkDir.length > 0
          ? handle.sessionWorkDir
          : sandboxSession.defaultWorkingDirectory;
      const options = { command };
      if (typeof workingDirectory === 'string') options.workingDirectory = workingDirectory;
      const abortSignal = execSignals?.get(execId);
      if (abortSignal !== undefined) options.abortSignal = abortSignal;
      const result = await sandboxSession.run(options);
      if (result == null || !Number.isInteger(result.exitCode)) {
        throw new TypeError("the sandbox's run() must give { exitCode, stdout, stderr }");
      }
      return {
        exitCode: result.exitCode,
        stdout: typeof result.stdout === 'string' ? result.stdout : '',
        stderr: typeof result.stderr === 'string' ? result.stderr : '',
      };
    },
    // A turn the agent refused (its stream() or continueStream() threw) is answered as data,
    // `{ refused: { error, unfinished } }`, with what the engine asks next: the refusal crosses
    // once, and the error (kept) is translated once, when send() or continue() rejects with it.
    async 'session.turn'(args) {
      const entry = sessions.get(args.session);
      try {
        await turns.start(entry, args);
        return null;
      } catch (error) {
        const refused = { error: failure(error) };
        try {
          refused.unfinished = isUnfinished(entry.session);
        } catch {
          // Left out: the engine asks (`session.unfinished`), and reports what it throws.
        }
        return { refused };
      }
    },
    'session.unfinished'({ session }) {
      return isUnfinished(sessions.get(session).session);
    },
    async 'session.stop'({ session }) {
      const entry = sessions.take(session);
      return { resumeState: await entry.session.stop() };
    },
    async 'session.destroy'({ session }) {
      const entry = sessions.take(session);
      await entry.session.destroy();
      return null;
    },
    'turn.abort'({ turnId, reason }) {
      turns.abort(turnId, reason);
    },
    'client.deliver'({ turnId, chunks }) {
      turns.deliver(turnId, chunks);
    },
    'client.answer'({ turnId, outcome }) {
      turns.answer(turnId, outcome);
    },
    'client.finish'({ turnId, session }) {
      turns.finish(turnId, session);
    },
    event({ event }) {
      emit(event);
    },
    error({ error, action, sessionId }) {
      const context = sessionId === undefined ? { action } : { action, sessionId };
      onError(fromDetails(error), context);
    },
    clientMessage({ error }) {
      const original = error.origin !== undefined ? keeper.peek(error.origin) : undefined;
      return clientMessage(original ?? new Error(error.message));
    },
    async approve({ approval, session }) {
      const verdict = await approve(approval, { session });
      if (verdict === undefined || verdict === null) return null;
      if (typeof verdict !== 'object' || typeof verdict.approved !== 'boolean') {
        throw new TypeError('approve() must give { approved: boolean, reason?: string } or undefined');
      }
      if (verdict.reason !== undefined && typeof verdict.reason !== 'string') {
        throw new TypeError('approve() gave a reason that is not a string');
      }
      return verdict.reason === undefined ? { approved: verdict.approved } : { approved: verdict.approved, reason: verdict.reason };
    },
    async 'store.save'({ record, resumeState }) {
      await store.save(record, resumeState);
      return null;
    },
    async 'store.get'({ id }) {
      return (await store.get(id)) ?? null;
    },
    async 'store.list'() {
      return await store.list();
    },
    async 'store.getResumeState'({ id }) {
      return (await store.getResumeState(id)) ?? null;
    },
    async 'store.delete'({ id }) {
      await store.delete(id);
      return null;
    },
    async 'sandboxes.acquire'({ sessionId, resume }) {
      const lease = await sandboxes.acquire(sessionId, { resume, abortSignal: new AbortController().signal });
      if (lease == null || typeof lease !== 'object') {
        throw new TypeError('sandboxes.acquire() must give a lease { sandboxSession, suspend(), close() }');
      }
      return { lease: leases.put(lease) };
    },
    async 'lease.suspend'({ lease }) {
      await leases.take(lease).suspend?.();
      return null;
    },
    async 'lease.close'({ lease }) {
      await leases.take(lease).close?.();
      return null;
    },
    async 'sandboxes.discard'({ sessionId }) {
      await sandboxes.discard?.(sessionId);
      return null;
    },
    async 'sandboxes.shutdown'() {
      await sandboxes.shutdown?.();
      return null;
    },
  };

  const host = dispatcher(ops, 'the host');
  host.handles = () => ({ agents: agents.size, sessions: sessions.size, leases: leases.size });
  return host;
}

/**
 * The host function over `ops`, the functions of the operations by name: `host(call)` runs the
 * operation `call` (JSON text, `{ op, ...arguments }`) names, with the call as its argument.
 *
 * @param {Record<string, (call: any) => any>} ops
 * @param {string} what whose operations they are, for the error of an unknown one
 * @returns {(call: string) => Promise<string>}
 */
function dispatcher(ops, what) {
  return function host(text) {
    try {
      const call = JSON.parse(text);
      const run = Object.hasOwn(ops, call.op) ? ops[call.op] : undefined;
      if (run === undefined) throw new Error(`${what} has no operation ${call.op}`);
      const result = run(call);
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
        return result.then(ok, failed);
      }
      return result === undefined ? DONE : Promise.resolve(ok(result));
    } catch (error) {
      return Promise.resolve(failed(error));
    }
  };
}

module.exports = { createHost, dispatcher };
