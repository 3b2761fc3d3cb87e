'use strict';
/**
 * Each chunk of an agent's stream checked on its own before anyone sees it: what a turn's client is
 * sent is exactly what its reply stores, or the turn ends with an error of its own.
 *
 * A chunk is written as JSON by itself, inside a `try`: a `BigInt`, a cycle, a getter that throws,
 * or nesting past the engine's stack fails that chunk (a `SessionError` with code `SESSION_CHUNK`),
 * never the batch around it nor the process. A lone surrogate (an emoji cut in half), which JSON
 * can write but no store can hold, becomes U+FFFD in the chunk the client is sent and in the one
 * reported alike. Then the engine checks the JSON (`checkChunk` of the addon: nesting, each field's
 * type, as the reply will read it); a chunk it would not take fails the same way. The plain deltas
 * of text and reasoning, the hot path, are checked here in a few comparisons instead.
 */

const { SessionError } = require('./errors.js');

/** The code of the error a chunk that cannot be carried ends its turn with. */
const CHUNK_ERROR_CODE = 'SESSION_CHUNK';

/** A `\uDxxx` escape `JSON.stringify` wrote for a lone surrogate (not one after an escaped `\`). */
const LONE_SURROGATE = /(?<!\\)((?:\\\\)*)\\ud[89a-f][0-9a-f]{2}/g;

/** The error a turn ends with when chunk `chunk` cannot be carried: `reason` says why. */
function chunkError(chunk, reason, cause) {
  let type;
  try {
    type = typeof chunk?.type === 'string' ? chunk.type : undefined;
  } catch {}
  const error = new SessionError(
    `The agent's stream gave a chunk${type === undefined ? '' : ` of type ${JSON.stringify(type)}`} that cannot be carried: ${reason}`,
    cause === undefined ? undefined : { cause },
  );
  error.code = CHUNK_ERROR_CODE;
  if (type !== undefined) error.chunkType = type;
  return error;
}

/**
 * Whether `chunk` is a delta the engine takes as it is without asking: a text or reasoning delta
 * with string `id` and `delta` and no other field, both well formed.
 */
function plainDelta(chunk) {
  if (typeof chunk.delta !== 'string' || typeof chunk.id !== 'string') return false;
  for (const key in chunk) {
    if (key !== 'type' && key !== 'id' && key !== 'delta') return false;
  }
  return true;
}

/** The message of `error`, for a chunk's reason, read without trusting it. */
function reasonOf(error) {
  try {
    if (error instanceof Error) return String(error.message);
    return String(error);
  } catch {
    return 'it cannot be written as JSON';
  }
}

/**
 * Checks `chunk` (not a plain delta) for the client and the engine alike.
 * @param {unknown} chunk what the agent's stream gave
 * @param {(json: string) => string | null} check the engine's check of the chunk's JSON
 * @returns {{ chunk: unknown, json: string }} the chunk to send the client (a copy when a lone
 *   surrogate was made U+FFFD) and its JSON, to report
 * @throws {SessionError} code `SESSION_CHUNK`, when the chunk cannot be carried
 */
function encodeChunk(chunk, check) {
  let json;
  try {
    json = JSON.stringify(chunk);
  } catch (error) {
    throw chunkError(chunk, `it cannot be written as JSON (${reasonOf(error)})`, error);
  }
  if (typeof json !== 'string' || json.charCodeAt(0) !== 0x7b) {
    throw chunkError(chunk, 'it is not an object');
  }
  if (json.includes('\\ud')) {
    const mended = json.replace(LONE_SURROGATE, '$1\ufffd');
    if (mended !== json) {
      json = mended;
      chunk = JSON.parse(json);
    }
  }
  const problem = check(json);
  if (problem != null) throw chunkError(chunk, problem);
  return { chunk, json };
}

/**
 * A plain delta (see `plainDelta`) with its lone surrogates, if any, made U+FFFD: `chunk` itself
 * when it has none.
 */
function wellFormedDelta(chunk) {
  if (chunk.delta.isWellFormed() && chunk.id.isWellFormed()) return chunk;
  return { type: chunk.type, id: chunk.id.toWellFormed(), delta: chunk.delta.toWellFormed() };
}

/**
 * `value` as JSON the engine can read, or `undefined` when it cannot be written (a cycle, a getter
 * that throws): a `BigInt` as the number nearest it, a lone surrogate as U+FFFD.
 */
function jsonText(value) {
  try {
    const json = JSON.stringify(value, (_key, item) => (typeof item === 'bigint' ? Number(item) : item));
    return json?.includes('\\ud') ? json.replace(LONE_SURROGATE, '$1\ufffd') : json;
  } catch {
    return undefined;
  }
}

module.exports = { CHUNK_ERROR_CODE, chunkError, encodeChunk, jsonText, plainDelta, wellFormedDelta };
