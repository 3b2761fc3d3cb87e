'use strict';
/**
 * The turns under way: the client stream of each (a `ReadableStream<UIMessageChunk>`), and the
 * pump that reads the agent's stream into it.
 *
 * The hot path stays in JavaScript: each chunk of the agent's stream is enqueued into the client
 * stream as it is, and reported to the engine in batches (one JSON text and one crossing per
 * batch, never one per chunk). The engine builds the conversation from the reports and decides how
 * the turn ends: the pump holds `finish` back, and the engine sends it once the session is written.
 */

const { keeper } = require('./errors.js');
const { hold } = require('./keep-alive.js');

/** The most chunks a batch holds before it is reported. */
const BATCH = 512;

class Turns {
  #native;
  #errorMessage;
  #turns = new Map();
  #next = 1;

  /**
   * @param {() => any} native the `NativeManager`, once it exists
   * @param {(error: unknown) => string} errorMessage what a client is told of an error
   */
  constructor(native, errorMessage) {
    this.#native = native;
    this.#errorMessage = errorMessage;
  }

  /** A number no turn under way has: for a command of `exec()`, which shares their numbering. */
  reserve() {
    const id = this.#next;
    this.#next = this.#next >= 0xfffffffe ? 1 : this.#next + 1;
    return id;
  }

  /**
   * A new turn's number and client stream, before the engine starts it.
   * @param {AbortSignal} [callerSignal] the caller's signal: the agent's is it combined with ours
   */
  open(callerSignal) {
    const turnId = this.#next;
    this.#next = this.#next >= 0xfffffffe ? 1 : this.#next + 1;
    const turn = {
      turnId,
      controller: undefined,
      gone: false,
      closed: false,
      abort: new AbortController(),
      callerSignal,
      resolveDone: undefined,
      rejectDone: undefined,
      release: hold(),
    };
    turn.stream = new ReadableStream({
      start: (controller) => {
        turn.controller = controller;
      },
      cancel: () => {
        turn.gone = true;
        this.#native().clientGone(turnId);
      },
    });
    turn.done = new Promise((resolve, reject) => {
      turn.resolveDone = resolve;
      turn.rejectDone = reject;
    });
    turn.done.catch(() => {});
    this.#turns.set(turnId, turn);
    return turn;
  }

  /** The turn could not start: its stream and promise end with `error`. */
  discard(turn, error) {
    this.#turns.delete(turn.turnId);
    turn.release();
    try {
      turn.controller.error(error);
    } catch {}
    turn.rejectDone(error);
  }

  /**
   * Starts the agent's turn (`stream` or `continueStream`), then pumps its UI message stream.
   * Resolves once the agent's stream exists; rejects when the agent refused the turn.
   */
  async start(entry, { turnId, input, messageId, continues, dropStart, holdApprovals }) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined) throw new Error(`turn ${turnId} is unknown`);
    // The caller's signal with ours: a turn the caller aborted ends with the caller's reason.
    const abortSignal =
      turn.callerSignal === undefined ? turn.abort.signal : AbortSignal.any([turn.abort.signal, turn.callerSignal]);
    const result =
      input.prompt !== undefined
        ? await entry.agent.stream({ session: entry.session, prompt: input.prompt, abortSignal })
        : await entry.agent.continueStream({
            session: entry.session,
            toolApprovalContinuations: input.toolApprovalContinuations,
            toolResultContinuations: input.toolResultContinuations,
            abortSignal,
          });
    let failure;
    const stream = result.toUIMessageStream({
      originalMessages: continues ? [continues] : [],
      generateMessageId: () => messageId,
      onError: (error) => {
        failure ??= error;
        return this.#clientMessage(error);
      },
    });
    void this.#pump(turn, stream, result, { dropStart, holdApprovals }, () => failure);
  }

  async #pump(turn, stream, result, { dropStart, holdApprovals }, failureOf) {
    const native = this.#native();
    const { turnId } = turn;
    let batch = [];
    let scheduled = false;
    const flush = () => {
      scheduled = false;
      if (batch.length === 0) return;
      const json = JSON.stringify(batch);
      batch = [];
      native.feed(turnId, json);
    };
    let thrown;
    const reader = stream.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const type = value.type;
        // `finish` is sent by the engine at the end; approval requests, when `approve` answers
        // them first, with their answers.
        const held =
          type === 'finish' || (dropStart && type === 'start') || (holdApprovals && type === 'tool-approval-request');
        if (!held && !turn.gone) {
          turn.controller.enqueue(value);
        }
        batch.push(value);
        if (batch.length >= BATCH) flush();
        else if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      }
    } catch (error) {
      thrown = error;
    }
    try {
      flush();
    } catch (error) {
      thrown ??= error;
    }
    const failure = failureOf() ?? thrown;
    const end = { usage: await usageOf(result) };
    if (failure !== undefined) {
      end.error = { message: messageOf(failure), origin: keeper.keep(failure) };
      if (thrown !== undefined && failureOf() === undefined && !turn.gone) {
        turn.controller.enqueue({ type: 'error', errorText: this.#clientMessage(thrown) });
      }
    }
    native.feedEnd(turnId, JSON.stringify(end));
  }

  /** Chunks the engine sends the client of turn `turnId`. */
  deliver(turnId, chunks) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined || turn.gone || turn.closed) return;
    for (const chunk of chunks) turn.controller.enqueue(chunk);
  }

  /** The turn is over and the session written: the client's stream ends, `done` resolves. */
  finish(turnId, session) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined) return;
    this.#turns.delete(turnId);
    turn.release();
    turn.closed = true;
    if (!turn.gone) {
      try {
        turn.controller.close();
      } catch {}
    }
    turn.resolveDone(session);
  }

  /** Aborts the agent's turn with `reason`. */
  abort(turnId, reason) {
    const turn = this.#turns.get(turnId);
    if (turn !== undefined && !turn.abort.signal.aborted) turn.abort.abort(reason);
  }

  #clientMessage(error) {
    try {
      const text = this.#errorMessage(error);
      return typeof text === 'string' ? text : 'An error occurred.';
    } catch {
      return 'An error occurred.';
    }
  }
}

/** The turn's `totalUsage`, when it settles soon after the stream: the agent may never settle it. */
async function usageOf(result) {
  let timer;
  try {
    return await Promise.race([
      Promise.resolve(result.totalUsage).then(plainUsage, () => undefined),
      new Promise((resolve) => {
        timer = setTimeout(resolve, 2000);
        timer.unref?.();
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function plainUsage(usage) {
  return usage !== null && typeof usage === 'object' ? usage : undefined;
}

function messageOf(error) {
  if (error instanceof Error) return error.message;
  if (typeof error === 'string') return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

module.exports = { Turns, messageOf };
