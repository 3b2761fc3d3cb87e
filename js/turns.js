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

const { keeper, SessionError, SessionOutputError } = require('./errors.js');
const { hold } = require('./keep-alive.js');
const { ReadAhead } = require('./read-ahead.js');
const { TurnReader } = require('./reader.js');
const { liveChunks } = require('./replay.js');
const { CHUNK_ERROR_CODE, encodeChunk, jsonText, plainDelta, wellFormedDelta } = require('./chunks.js');
const { checkChunk } = require('./native.js');

/** The most chunks a batch holds before it is reported. */
const BATCH = 512;

/** The full batches read between two turns of the event loop. */
const YIELD_EVERY_BATCHES = 2;

/**
 * The deltas reported joined: a run of them for one part (same id, no field but `type`, `id` and
 * `delta`) is reported as one delta of their text, which the engine accumulates alike (one JSON
 * object to write and read instead of thousands); the client still gets each chunk as it came.
 */
const MERGED = { 'text-delta': true, 'reasoning-delta': true };

/** The chunks of a live turn kept for `reconnect()` before they are compacted: see `Replay`. */
const DEFAULT_RECONNECT_BUFFER_CHUNKS = 20_000;

/** The bytes of a live turn's chunks kept for `reconnect()`: 64 MiB. */
const DEFAULT_RECONNECT_BUFFER_BYTES = 64 * 1024 * 1024;

/** The bytes queued for one reader that is not reading before it is ended: 16 MiB. */
const DEFAULT_READER_BUFFER_BYTES = 16 * 1024 * 1024;

/** The code of the error a reader that fell too far behind is ended with. */
const READER_BEHIND_CODE = 'SESSION_READER_BEHIND';

/** How long a reader far behind may read nothing before the turn stops waiting for it. */
const STALL_MS = 1000;

/** The readers that stopped reading while far behind: the turn does not wait for them again. */
const STALLED = new WeakSet();

/** The size in bytes of chunks whose JSON the pump wrote (the others are estimated). */
const SIZES = new WeakMap();

/**
 * About the bytes `chunk` holds: its JSON's length when the pump wrote it, else its delta's and a
 * little. The queuing strategy of every reader of a turn counts with it.
 */
function chunkBytes(chunk) {
  const size = SIZES.get(chunk);
  if (size !== undefined) return size;
  const delta = chunk?.delta;
  return typeof delta === 'string' ? delta.length + 48 : 256;
}


/** The error a reader `bound` bytes behind is ended with. */
function readerBehind(bound) {
  const error = new SessionError(
    `This reader of the turn fell more than ${bound} bytes behind (readerBufferBytes) and was ended; the turn goes on: reconnect to read it again.`,
  );
  error.code = READER_BEHIND_CODE;
  error.statusCode = 503;
  return error;
}

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
  #bufferBytes;
  #readerBytes;
  #report;
  #next = 1;

  /**
   * @param {() => any} native the `NativeManager`, once it exists
   * @param {(error: unknown) => string} clientMessage what a client is told of an error
   *   (`clientMessenger()` of `js/harness-errors.js`)
   * @param {object} [options]
   * @param {number} [options.bufferChunks] the chunks of a turn kept as they are for `reconnect()`
   * @param {number} [options.bufferBytes] the bytes of a turn's chunks kept for `reconnect()`,
   *   past which none are kept (`reconnectBufferBytes`)
   * @param {number} [options.readerBytes] the bytes queued for one reader that does not read,
   *   past which it is ended (`readerBufferBytes`)
   * @param {(error: unknown, sessionId: string | undefined) => void} [options.report] told of a
   *   chunk that ended its turn (the application's `onError`, action `turn`)
   */
  constructor(
    native,
    clientMessage,
    {
      bufferChunks = DEFAULT_RECONNECT_BUFFER_CHUNKS,
      bufferBytes = DEFAULT_RECONNECT_BUFFER_BYTES,
      readerBytes = DEFAULT_READER_BUFFER_BYTES,
      report = () => {},
    } = {},
  ) {
    this.#native = native;
    this.#clientMessage = clientMessage;
    this.#bufferChunks = bufferChunks;
    this.#bufferBytes = bufferBytes;
    this.#readerBytes = readerBytes;
    this.#report = report;
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
   * @param {string} [owner] the session whose turn it is, for what is reported of it
   */
  open(callerSignal, asksOutput = false, owner = undefined) {
    const turnId = this.#next;
    this.#next = this.#next >= 0xfffffffe ? 1 : this.#next + 1;
    const turn = {
      turnId,
      client: undefined,
      gone: false,
      closed: false,
      abort: new AbortController(),
      callerSignal,
      resolveDone: undefined,
      rejectDone: undefined,
      release: hold(),
      sessionId: undefined,
      owner,
      replay: new Replay(this.#bufferChunks, this.#bufferBytes),
      followers: new Set(),
      /** The readers more than half their bound behind, since the last chunk. */
      behind: new Set(),
    };
    // A client that cancels only stops reading: the turn goes on, for the readers that
    // reconnect and for the store.
    turn.client = new TurnReader(() => {
      turn.gone = true;
    });
    turn.stream = turn.client.stream;
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
    const reader = new TurnReader(() => turn.followers.delete(reader));
    if (turn.replay.overflowed) {
      // Past `reconnectBufferBytes` nothing was kept: the reader is brought up to the turn from
      // the engine's reply, asked once the chunks sent so far are reported (so that it holds them
      // all), and the chunks that come meanwhile wait behind.
      reader.hold();
      turn.followers.add(reader);
      turn.flushNow?.();
      this.#native()
        .replySoFar(turn.turnId)
        .then(
          (text) => {
            if (text == null) throw new Error('the turn ended first');
            reader.release(liveChunks(JSON.parse(text)));
          },
          (error) => {
            throw error;
          },
        )
        .catch((error) => {
          turn.followers.delete(reader);
          reader.error(new SessionError(`This reader could not be brought up to the turn (${messageOf(error)}): read the session instead.`));
        });
    } else {
      // The replay's chunks are the turn's own (shared, not counted against the reader's bound).
      for (const chunk of turn.replay.chunks()) reader.push(chunk, 0);
      turn.followers.add(reader);
    }
    return { stream: reader.stream, done: turn.done, output: turn.output };
  }

  /** Sends `chunk` to every reader of the turn and keeps it for those that reconnect. */
  #emit(turn, chunk) {
    const bound = this.#readerBytes;
    const half = bound / 2;
    const size = chunkBytes(chunk);
    if (!turn.gone) {
      const client = turn.client;
      client.push(chunk, size);
      const backlog = client.backlog;
      if (backlog > bound) {
        // A client that does not read is ended, not kept: the turn goes on for the others.
        turn.gone = true;
        client.error(readerBehind(bound));
      } else if (backlog > half && !STALLED.has(client)) {
        turn.behind.add(client);
      }
    }
    turn.replay.push(chunk, size);
    if (turn.followers.size === 0) return;
    for (const follower of turn.followers) {
      follower.push(chunk, size);
      const backlog = follower.backlog;
      if (backlog > bound) {
        turn.followers.delete(follower);
        follower.error(readerBehind(bound));
      } else if (backlog > half && !STALLED.has(follower)) {
        turn.behind.add(follower);
      }
    }
  }

  /**
   * Waits while a reader of the turn is more than half its bound behind and still reading: the
   * agent's stream is then read no faster than that reader (a fast agent does not outrun a client
   * reading at the network's pace into an error). A reader that reads nothing for `STALL_MS` is
   * waited for no more: the turn goes on, and the reader is ended at its bound.
   */
  async #relieve(turn) {
    const half = this.#readerBytes / 2;
    for (const reader of turn.behind) {
      let last = reader.backlog;
      let since = Date.now();
      while (!turn.closed && !reader.done && reader.backlog > half) {
        await new Promise((resolve) => setTimeout(resolve, 2));
        const now = reader.backlog;
        if (now < last) {
          last = now;
          since = Date.now();
        } else if (Date.now() - since > STALL_MS) {
          STALLED.add(reader);
          break;
        }
      }
    }
    turn.behind.clear();
  }

  /** The turn is over: its readers' streams end; `reconnect()` no longer finds it. */
  #end(turn, error) {
    this.#turns.delete(turn.turnId);
    if (turn.sessionId !== undefined && this.#live.get(turn.sessionId) === turn) this.#live.delete(turn.sessionId);
    if (turn.replyId !== undefined && this.#byReply.get(turn.replyId) === turn) this.#byReply.delete(turn.replyId);
    turn.closed = true;
    for (const follower of turn.followers) {
      if (error === undefined) follower.close();
      else follower.error(error);
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
    turn.client.error(error);
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
    this.#pump(turn, stream, result, { dropStart }, () => failure).catch((error) =>
      this.#pumpFailed(turn.turnId, error),
    );
  }

  async #pump(turn, stream, result, { dropStart }, failureOf) {
    const native = this.#native();
    const { turnId } = turn;
    // Each chunk's JSON text (see `js/chunks.js`), or the merged delta it ends with (see `MERGED`):
    // the next delta of the same part is joined into it.
    let batch = [];
    let counted = 0;
    let slices = 0;
    let merged;
    let scheduled = false;
    let thrown;
    const flush = () => {
      scheduled = false;
      if (batch.length === 0) return;
      let json = '[';
      for (let i = 0; i < batch.length; i++) {
        const item = batch[i];
        if (i > 0) json += ',';
        json += typeof item === 'string' ? item : JSON.stringify(item);
      }
      json += ']';
      batch = [];
      counted = 0;
      merged = undefined;
      native.feed(turnId, json);
    };
    // Run by `setImmediate`: nothing it throws may reach the event loop.
    const flushSoon = () => {
      try {
        flush();
      } catch (error) {
        thrown ??= error;
      }
    };
    turn.flushNow = flushSoon;
    let reader;
    try {
      reader = new ReadAhead(stream);
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        let chunk = value;
        let type;
        let json;
        if (chunk !== null && typeof chunk === 'object' && MERGED[(type = chunk.type)] === true && plainDelta(chunk)) {
          chunk = wellFormedDelta(chunk);
        } else {
          ({ chunk, json } = encodeChunk(chunk, checkChunk));
          type = chunk.type;
          if (json.length > 256 && chunk !== null && typeof chunk === 'object') SIZES.set(chunk, json.length);
        }
        // `finish` and `abort` are sent by the engine at the end (after the metadata of a cut
        // reply); approval requests once the stream that carried them ends (then the answers
        // `approve` gave them), as the reference sends them.
        const held =
          type === 'finish' ||
          type === 'abort' ||
          type === 'tool-approval-request' ||
          (dropStart && type === 'start');
        if (!held && !turn.closed) this.#emit(turn, chunk);
        if (json === undefined) {
          if (merged !== undefined && merged.type === type && merged.id === chunk.id) merged.delta += chunk.delta;
          else batch.push((merged = { type, id: chunk.id, delta: chunk.delta }));
        } else {
          merged = undefined;
          batch.push(json);
        }
        if (++counted >= BATCH) {
          flush();
          // An agent whose chunks are all there at once is read in slices: the event loop runs
          // between them (other turns, timers, I/O), never blocked for the whole turn.
          if (++slices % YIELD_EVERY_BATCHES === 0) await new Promise(setImmediate);
        } else if (!scheduled) {
          scheduled = true;
          setImmediate(flushSoon);
        }
        // Only once the chunk is in the batch: a reader that reconnects meanwhile is rebuilt from
        // what the batches hold.
        if (turn.behind.size > 0) await this.#relieve(turn);
      }
    } catch (error) {
      thrown = error;
    }
    if (thrown !== undefined && reader !== undefined) {
      // The turn ends here: the agent's stream is not read further.
      reader.cancel(thrown).catch(() => {});
      if (thrown?.code === CHUNK_ERROR_CODE) {
        try {
          this.#report(thrown, turn.owner);
        } catch {}
      }
    } else {
      reader?.stop();
    }
    flushSoon();
    const failure = failureOf() ?? thrown;
    const usage = await usageOf(result);
    const end = {};
    // Cut by the caller's own signal: the engine closes the reply's open parts, as for any cut.
    if (turn.callerSignal?.aborted === true) end.callerAborted = true;
    if (failure !== undefined) {
      end.error = { message: messageOf(failure), origin: keeper.keep(failure) };
      if (thrown !== undefined && failureOf() === undefined && !turn.closed) {
        this.#emit(turn, { type: 'error', errorText: this.#clientMessage(thrown) });
      }
    }
    // A usage JSON cannot carry (a cycle) is left out rather than the end lost.
    native.feedEnd(turnId, jsonText({ usage, ...end }) ?? jsonText(end));
  }

  /**
   * The pump itself failed (the engine refused its end): the turn is ended with `error` as far as
   * can be, and nothing reaches the event loop.
   */
  #pumpFailed(turnId, error) {
    try {
      const end = { error: { message: messageOf(error), origin: keeper.keep(error) } };
      this.#native().feedEnd(turnId, jsonText(end) ?? '{}');
    } catch {}
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
    if (!turn.gone) turn.client.close();
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
  #bytes = 0;
  #maxBytes;
  /** Past `maxBytes`: nothing is kept, a reader that reconnects is rebuilt from the engine's reply. */
  overflowed = false;

  constructor(bound, maxBytes = DEFAULT_RECONNECT_BUFFER_BYTES) {
    this.#bound = bound;
    this.#next = bound;
    this.#maxBytes = maxBytes;
  }

  push(chunk, size) {
    if (this.overflowed) return;
    this.#bytes += size;
    if (this.#bytes > this.#maxBytes) {
      this.overflowed = true;
      this.#kept = [];
      return;
    }
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
  try {
    if (error instanceof Error) return String(error.message);
    if (typeof error === 'string') return error;
    return JSON.stringify(error) ?? String(error);
  } catch {
    try {
      return String(error);
    } catch {
      return 'The turn failed.';
    }
  }
}

module.exports = { Turns, messageOf, settleOutput, DEFAULT_RECONNECT_BUFFER_CHUNKS, DEFAULT_READER_BUFFER_BYTES, READER_BEHIND_CODE };
