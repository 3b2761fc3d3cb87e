'use strict';
/**
 * Reading a `ReadableStream` with reads kept outstanding: `reader.read()` is called a few reads
 * ahead and the reads are awaited in order, so that a chunk the stream produces goes straight to
 * a waiting read instead of through the stream's queue and a new read. Measured on a stream of
 * `ai`'s `createUIMessageStream`, a loop over a `ReadAhead` costs less than one awaiting one read
 * at a time (see docs/performance.md). What is read, and in what order, is the same.
 */

/** The reads kept outstanding. */
const AHEAD = 8;

const ignore = () => {};

class ReadAhead {
  #reader;
  #reads = [];
  #next = 0;

  /** Locks `stream` and asks its first reads. */
  constructor(stream) {
    this.#reader = stream.getReader();
    for (let i = 0; i < AHEAD; i++) this.#reads.push(this.#reader.read());
  }

  /** The next result of the stream, `{ done, value }`, as `reader.read()` gives it. */
  read() {
    const next = this.#next;
    const result = this.#reads[next];
    this.#reads[next] = this.#reader.read();
    this.#next = next + 1 === AHEAD ? 0 : next + 1;
    return result;
  }

  /**
   * Done reading (the stream ended, failed or is given up): the reads still outstanding settle as
   * the last did, and nobody is to see them (a failure among them is not an unhandled rejection).
   */
  stop() {
    for (const read of this.#reads) read.catch(ignore);
  }

  /** Cancels the stream with `reason` (the reads outstanding end as done). */
  cancel(reason) {
    this.stop();
    return this.#reader.cancel(reason);
  }
}

module.exports = { ReadAhead };
