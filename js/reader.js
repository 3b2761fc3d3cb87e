'use strict';
/**
 * One reader of a turn (its first client's stream, or a `reconnect()`): a `ReadableStream` fed
 * from a queue of its own, counted in bytes.
 *
 * The stream's own queue is kept near empty (chunks are handed over as its reader asks for them,
 * a few at a time): Node 20 and 22 take a chunk off a stream's queue with `Array.prototype.shift`,
 * which costs the length of a long queue each time, so that a reader that fell 100,000 chunks
 * behind cost time quadratic in them. This queue takes from its head by an index, in constant time.
 * Its `backlog` is the bytes queued live (the replay a `reconnect()` starts with is shared with
 * the turn, not counted), which the turn bounds (`readerBufferBytes`).
 */

/** The most chunks handed to the stream's own queue at one pull. */
const HANDED_AT_ONCE = 16;

class TurnReader {
  #items = [];
  #sizes = [];
  #head = 0;
  #backlog = 0;
  #controller;
  #wanted = false;
  #closing = false;
  #done = false;
  /** Whether chunks wait for `release()`: those that go before them are not known yet. */
  #held = false;

  /** @param {() => void} [onCancel] called when the reader cancels its stream */
  constructor(onCancel) {
    this.stream = new ReadableStream(
      {
        start: (controller) => {
          this.#controller = controller;
        },
        pull: () => this.#hand(),
        cancel: () => {
          this.#drop();
          this.#done = true;
          onCancel?.();
        },
      },
      { highWaterMark: 0 },
    );
  }

  /** The bytes queued live and not read yet. */
  get backlog() {
    return this.#backlog;
  }

  /** Whether the stream ended (read to its end, failed or cancelled). */
  get done() {
    return this.#done;
  }

  /** Queues `chunk` of about `size` bytes (0: shared with the turn's replay, not counted). */
  push(chunk, size) {
    if (this.#done || this.#closing) return;
    if (this.#wanted && !this.#held && this.#head === this.#items.length) {
      this.#wanted = false;
      this.#controller.enqueue(chunk);
      return;
    }
    this.#items.push(chunk);
    this.#sizes.push(size);
    this.#backlog += size;
  }

  /** Hands nothing to the stream until `release()`: what goes first is not known yet. */
  hold() {
    this.#held = true;
  }

  /**
   * Puts `chunks` ahead of those queued (not counted against the bound: the reader's own copy
   * of what it asked to be brought up to), and hands the queue to the stream again.
   */
  release(chunks) {
    if (!this.#held) return;
    this.#held = false;
    if (this.#done) return;
    if (chunks.length > 0) {
      this.#items = chunks.concat(this.#items.slice(this.#head));
      this.#sizes = new Array(chunks.length).fill(0).concat(this.#sizes.slice(this.#head));
      this.#head = 0;
    }
    if (this.#wanted) {
      this.#wanted = false;
      this.#hand();
    }
    if (this.#closing && this.#head === this.#items.length) this.#finish();
  }

  /** Ends the stream once its reader has read what is queued. */
  close() {
    if (this.#done || this.#closing) return;
    this.#closing = true;
    if (!this.#held && this.#head === this.#items.length) this.#finish();
  }

  /** Ends the stream at once with `error`; what was queued is let go of. */
  error(error) {
    if (this.#done) return;
    this.#drop();
    this.#done = true;
    try {
      this.#controller.error(error);
    } catch {}
  }

  #hand() {
    if (this.#done) return;
    if (this.#held) {
      this.#wanted = true;
      return;
    }
    const items = this.#items;
    const end = Math.min(items.length, this.#head + HANDED_AT_ONCE);
    if (this.#head === end) {
      this.#wanted = true;
      return;
    }
    for (let i = this.#head; i < end; i++) {
      this.#controller.enqueue(items[i]);
      this.#backlog -= this.#sizes[i];
      items[i] = undefined;
    }
    this.#head = end;
    if (end === items.length) {
      this.#items = [];
      this.#sizes = [];
      this.#head = 0;
      if (this.#closing) this.#finish();
    } else if (this.#head > 4096 && this.#head * 2 > items.length) {
      this.#items = items.slice(this.#head);
      this.#sizes = this.#sizes.slice(this.#head);
      this.#head = 0;
    }
  }

  #finish() {
    this.#done = true;
    try {
      this.#controller.close();
    } catch {}
  }

  #drop() {
    this.#items = [];
    this.#sizes = [];
    this.#head = 0;
    this.#backlog = 0;
  }
}

module.exports = { TurnReader };
