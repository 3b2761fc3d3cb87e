'use strict';
/**
 * What the JavaScript side of the engine's host functions shares: objects that stay in
 * JavaScript, known to Rust by number, and the answers a host function gives
 * (`{ ok: true, value }` or `{ ok: false, error: { message, origin } }`, as JSON text), which
 * `dispatcher()` of `js/host.js` sends.
 */

const { keeper } = require('./errors.js');
const { messageOf } = require('./turns.js');

/** Objects that stay in JavaScript, known to Rust by number. */
class Handles {
  #next = 1;
  #objects = new Map();

  /** @param {string} what what the objects are, for the error of an unknown number */
  constructor(what) {
    this.what = what;
  }

  put(object) {
    const id = this.#next++;
    this.#objects.set(id, object);
    return id;
  }

  get(id) {
    const object = this.#objects.get(id);
    if (object === undefined) throw new Error(`${this.what} ${id} is unknown`);
    return object;
  }

  /** The object numbered `id`, forgotten. */
  take(id) {
    const object = this.get(id);
    this.#objects.delete(id);
    return object;
  }

  forget(id) {
    this.#objects.delete(id);
  }

  get size() {
    return this.#objects.size;
  }
}

/** The answer of a host operation that gave `value`. */
const ok = (value) => JSON.stringify({ ok: true, value: value ?? null });

/** `error` as it crosses: its message, and the number it is kept under for its caller to get back. */
const failure = (error) => ({ message: messageOf(error), origin: keeper.keep(error) });

/** The answer of a host operation that failed with `error`. */
const failed = (error) => JSON.stringify({ ok: false, error: failure(error) });

module.exports = { Handles, ok, failed, failure };
