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

const { keeper, SessionOutputError } = require('./errors.js');
const { hold } = require('./keep-alive.js');
const { ReadAhead } = require('./read-ahead.js');

/** The most chunks a batch holds before it is reported. */
const BATCH = 512;

/**
 * The deltas reported joined: a run of them for one part (same id, no field but `type`, `id` and
 * `delta`) is reported as one delta of their text, which the engine accumulates alike (one JSON
 * object to write and read instead of thousands); the client still gets each chunk as it came.
 */
const MERGED = { 'text-delta': true, 'reasoning-delta': true };

/** The chunks of a live turn kept for `reconnect()` before they are compacted: see `Replay`. */
const DEFAULT_RECONNECT_BUFFER_CHUNKS = 20_000;

class Turns {
  #native;
  #clientMessage;
  #turns = new Map();
  /** The turn under way of each session, by session id, for `reconnect()`. */
  #live = new Map();
  /**
   * The turns under way by the id of the reply they write, from the moment the agent is asked for
   * its stream: a `submissionId` sent again finds the live turn even before its first caller got
   * it back (the engine answers the second caller as soon as the first released the session).
   */
  #byReply = new Map();
  #bufferChunks;
  #next = 1;

  /**
   * @param {() => any} native the `NativeManager`, once it exists
   * @param {(error: unknown) => string} clientMessage what a client is told of an error
   *   (`clientMessenger()` of `js/harness-errors.js`)
   * @param {number} [bufferChunks] the chunks of a turn kept as they are for `reconnect()`
   */
  constructor(native, clientMessage, bufferChunks = DEFAULT_RECONNECT_BUFFER_CHUNKS) {
    this.#native = native;
    this.#clientMessage = clientMessage;
    this.#bufferChunks = bufferChunks;
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
   * @param {boolean} [asksOutput] whether the turn asks a structured answer (`output`)
   */
  open(callerSignal, asksOutput = false) {
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
      sessionId: undefined,
      replay: new Replay(this.#bufferChunks),
      followers: new Set(),
    };
    // A client that cancels only stops reading: the turn goes on, for the readers that
    // reconnect and for the store.
    turn.stream = new ReadableStream({
      start: (controller) => {
        turn.controller = controller;
      },
      cancel: () => {
        turn.gone = true;
      },
    });
    turn.done = new Promise((resolve, reject) => {
      turn.resolveDone = resolve;
      turn.rejectDone = reject;
    });
    turn.done.catch(() => {});
    turn.asksOutput = asksOutput;
    turn.output = new Promise((resolve, reject) => {
      turn.resolveOutput = resolve;
      turn.rejectOutput = reject;
    });
    // Nobody need read it: a rejection nobody reads is not an unhandled one.
    turn.output.catch(() => {});
    this.#turns.set(turnId, turn);
    return turn;
  }

  /**
   * The turn started for session `sessionId`, writing reply `replyId`: `reconnect(sessionId)`
   * finds it until it ends.
   */
  started(turn, sessionId, replyId) {
    if (turn.closed || !this.#turns.has(turn.turnId)) return;
    turn.sessionId = sessionId;
    turn.replyId = replyId;
    this.#live.set(sessionId, turn);
  }

  /**
   * The turn under way of session `sessionId` (`undefined` when none): a new stream of every
   * chunk its first client was sent, from the first, then the turn's chunks as they come.
   * Cancelling it stops this reader only.
   */
  reconnect(sessionId, replyId) {
    const turn = replyId === undefined ? this.#live.get(sessionId) : this.#byReply.get(replyId);
    if (turn === undefined || turn.closed) return undefined;
    if (replyId !== undefined && turn.replyId !== replyId) return undefined;
    if (turn.sessionId !== undefined && turn.sessionId !== sessionId) return undefined;
    let own;
    const stream = new ReadableStream({
      start: (controller) => {
        own = controller;
        for (const chunk of turn.replay.chunks()) controller.enqueue(chunk);
        turn.followers.add(controller);
      },
      cancel: () => {
        turn.followers.delete(own);
      },
    });
    return { stream, done: turn.done, output: turn.output };
  }

  /** Sends `chunk` to every reader of the turn and keeps it for those that reconnect. */
  #emit(turn, chunk) {
    if (!turn.gone) turn.controller.enqueue(chunk);
    turn.replay.push(chunk);
    if (turn.followers.size === 0) return;
    for (const follower of turn.followers) {
      try {
        follower.enqueue(chunk);
      } catch {
        turn.followers.delete(follower);
      }
    }
  }

  /** The turn is over: its readers' streams end; `reconnect()` no longer finds it. */
  #end(turn, error) {
    this.#turns.delete(turn.turnId);
    if (turn.sessionId !== undefined && this.#live.get(turn.sessionId) === turn) this.#live.delete(turn.sessionId);
    if (turn.replyId !== undefined && this.#byReply.get(turn.replyId) === turn) this.#byReply.delete(turn.replyId);
    turn.closed = true;
    for (const follower of turn.followers) {
      try {
        if (error === undefined) follower.close();
        else follower.error(error);
      } catch {}
    }
    turn.followers.clear();
    turn.replay.clear();
  }

  /** The turn opened for nothing (a submission seen before): forgotten, nobody read it. */
  forget(turn) {
    this.#end(turn);
    turn.release();
  }

  /** The turn could not start: its stream and promise end with `error`. */
  discard(turn, error) {
    this.#end(turn, error);
    turn.release();
    try {
      turn.controller.error(error);
    } catch {}
    turn.rejectDone(error);
    turn.rejectOutput(error);
  }

  /**
   * Starts the agent's turn (`stream` or `continueStream`), then pumps its UI message stream.
   * Resolves once the agent's stream exists; rejects when the agent refused the turn.
   */
  async start(entry, { turnId, input, messageId, continues, dropStart }) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined) throw new Error(`turn ${turnId} is unknown`);
    if (!turn.closed) {
      turn.replyId = messageId;
      this.#byReply.set(messageId, turn);
    }
    // The caller's signal with ours: a turn the caller aborted ends with the caller's reason.
    const abortSignal =
      turn.callerSignal === undefined ? turn.abort.signal : AbortSignal.any([turn.abort.signal, turn.callerSignal]);
    const result =
      input.prompt !== undefined
        ? await entry.agent.stream({ session: entry.session, prompt: input.prompt, abortSignal })
        : await entry.agent.continueStream({
            session: entry.session,
            toolApprovalContinuations: input.toolApprovalContinuations,
            // Absent when `approve` decided every approval: the reference passes only these keys.
            ...(input.toolResultContinuations === undefined ? {} : { toolResultContinuations: input.toolResultContinuations }),
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
    void this.#pump(turn, stream, result, { dropStart }, () => failure);
  }

  async #pump(turn, stream, result, { dropStart }, failureOf) {
    const native = this.#native();
    const { turnId } = turn;
    let batch = [];
    let counted = 0;
    // The delta the batch ends with, when it is one of ours (see `MERGED`): the next delta of the
    // same part is joined into it.
    let merged;
    let scheduled = false;
    const flush = () => {
      scheduled = false;
      if (batch.length === 0) return;
      const json = JSON.stringify(batch);
      batch = [];
      counted = 0;
      merged = undefined;
      native.feed(turnId, json);
    };
    let thrown;
    let reader;
    try {
      reader = new ReadAhead(stream);
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        const type = value.type;
        // `finish` and `abort` are sent by the engine at the end (after the metadata of a cut
        // reply); approval requests once the stream that carried them ends (then the answers
        // `approve` gave them), as the reference sends them.
        const held =
          type === 'finish' ||
          type === 'abort' ||
          type === 'tool-approval-request' ||
          (dropStart && type === 'start');
        if (!held && !turn.closed) this.#emit(turn, value);
        if (MERGED[type] === true && typeof value.delta === 'string' && plainDelta(value)) {
          if (merged !== undefined && merged.type === type && merged.id === value.id) merged.delta += value.delta;
          else batch.push((merged = { type, id: value.id, delta: value.delta }));
        } else {
          merged = undefined;
          batch.push(value);
        }
        if (++counted >= BATCH) flush();
        else if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      }
    } catch (error) {
      thrown = error;
    }
    reader?.stop();
    try {
      flush();
    } catch (error) {
      thrown ??= error;
    }
    const failure = failureOf() ?? thrown;
    const end = { usage: await usageOf(result) };
    // Cut by the caller's own signal: the engine closes the reply's open parts, as for any cut.
    if (turn.callerSignal?.aborted === true) end.callerAborted = true;
    if (failure !== undefined) {
      end.error = { message: messageOf(failure), origin: keeper.keep(failure) };
      if (thrown !== undefined && failureOf() === undefined && !turn.closed) {
        this.#emit(turn, { type: 'error', errorText: this.#clientMessage(thrown) });
      }
    }
    native.feedEnd(turnId, JSON.stringify(end));
  }

  /** Chunks the engine sends the client of turn `turnId`. */
  deliver(turnId, chunks) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined || turn.closed) return;
    for (const chunk of chunks) this.#emit(turn, chunk);
  }

  /** What became of the structured answer of turn `turnId`: `turn.output` settles with it. */
  answer(turnId, outcome) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined) return;
    settleOutput(turn, outcome);
  }

  /**
   * The turn is over and the session written: the client's stream ends, `done` resolves; and
   * `output`, when no answer settled it: `undefined` when none was asked, else `output_missing`
   * (the turn was cut short before its answer was judged).
   */
  finish(turnId, session) {
    const turn = this.#turns.get(turnId);
    if (turn === undefined) return;
    settleOutput(
      turn,
      turn.asksOutput
        ? { code: 'output_missing', message: 'The turn ended before its answer was judged.' }
        : { value: undefined },
    );
    this.#end(turn);
    turn.release();
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
}

/**
 * The chunks a turn's first client was sent, kept for the readers that reconnect: as they are up
 * to `bound` chunks, so that a replay is byte for byte what the first client got. Past the bound
 * the kept chunks are compacted (the deltas of one text, reasoning or tool input joined into one
 * chunk, as the reply stored so far would rebuild them), and again each time they double.
 */
class Replay {
  #kept = [];
  #bound;
  #next;

  constructor(bound) {
    this.#bound = bound;
    this.#next = bound;
  }

  push(chunk) {
    this.#kept.push(chunk);
    if (this.#kept.length > this.#next) {
      this.#kept = compact(this.#kept);
      this.#next = Math.max(this.#bound, 2 * this.#kept.length);
    }
  }

  chunks() {
    return this.#kept;
  }

  clear() {
    this.#kept = [];
  }
}

/** Settles `turn.output` with `outcome` (`{ value }` or `{ code, message, errors }`), once. */
function settleOutput(turn, outcome) {
  if (turn.outputSettled) return;
  turn.outputSettled = true;
  if (outcome !== null && typeof outcome === 'object' && 'code' in outcome) {
    turn.rejectOutput(new SessionOutputError(outcome));
  } else {
    turn.resolveOutput(outcome?.value);
  }
}

/** The delta chunk types, each with the field that holds its text. */
const DELTAS = { 'text-delta': 'delta', 'reasoning-delta': 'delta', 'tool-input-delta': 'inputTextDelta' };

/** `chunks` with each run of deltas of one part joined into one chunk. */
function compact(chunks) {
  const out = [];
  for (const chunk of chunks) {
    const field = DELTAS[chunk?.type];
    const last = out[out.length - 1];
    const sameId = chunk?.type === 'tool-input-delta' ? chunk.toolCallId === last?.toolCallId : chunk?.id === last?.id;
    if (field !== undefined && last?.type === chunk.type && sameId && typeof last[field] === 'string') {
      out[out.length - 1] = { ...last, [field]: last[field] + chunk[field] };
    } else {
      out.push(chunk);
    }
  }
  return out;
}

/** Whether delta `chunk` has no field but `type`, `id` and `delta`: one that can be joined. */
function plainDelta(chunk) {
  for (const key in chunk) {
    if (key !== 'type' && key !== 'id' && key !== 'delta') return false;
  }
  return true;
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

module.exports = { Turns, messageOf, settleOutput, DEFAULT_RECONNECT_BUFFER_CHUNKS };
