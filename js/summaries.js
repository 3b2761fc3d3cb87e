'use strict';
/**
 * The summaries `list()` gave last, kept so that the next `list()` crosses and parses only what
 * changed since: the engine answers `[stamp]` when nothing changed since the stamp it was given,
 * else `[stamp, rows]` (see `SessionStore::list_since` in src/engine/store/mod.rs), each row a
 * summary, `[stamp, summary]` (one to keep), or a bare stamp (one kept from an earlier answer).
 * The kept summaries are never handed out: every `list()` gives copies of its own, which callers
 * may change freely.
 */

class Summaries {
  /** The stamp of the last answer read whole: what the engine is told we have. */
  #known = 0;
  /**
   * The kept summaries, by stamp: those of the last answer, and some of earlier ones (a stamp
   * names one summary as it was written, for good), dropped once they outnumber the others.
   */
  #kept = new Map();
  /** The last list, the kept summaries in its order: what an answer "nothing changed" gives. */
  #last = [];

  /**
   * The list, newest first: `fetch(known)` asks the engine for it (resolving to its JSON text).
   * @param {(known: number) => Promise<string> | string} fetch
   * @returns {Promise<object[]>}
   */
  async list(fetch) {
    const known = this.#known;
    const summaries = this.#read(await fetch(known));
    // A stamp no longer kept (another list() answered in between and dropped it): ask for all.
    return summaries ?? this.#read(await fetch(0));
  }

  /** The summaries of answer `text`, or `undefined` when it names one no longer kept. */
  #read(text) {
    const [stamp, rows] = JSON.parse(text);
    if (rows === undefined) {
      // Nothing changed since `stamp`: the last list, if it is still the one of that stamp.
      return stamp === this.#known ? copyAll(this.#last) : undefined;
    }
    const kept = this.#kept;
    const last = new Array(rows.length);
    const stamps = [];
    for (let i = 0; i < rows.length; i++) {
      const row = rows[i];
      let summary;
      if (typeof row === 'number') {
        summary = kept.get(row);
        if (summary === undefined) return undefined;
        stamps.push(row);
      } else if (Array.isArray(row)) {
        summary = row[1];
        kept.set(row[0], summary);
        stamps.push(row[0]);
      } else {
        summary = row;
      }
      last[i] = summary;
    }
    if (kept.size > 2 * stamps.length + 64) {
      // Mostly summaries listed no more: keep those of this answer only.
      this.#kept = new Map(stamps.map((at) => [at, kept.get(at)]));
    }
    this.#known = stamp;
    this.#last = last;
    return copyAll(last);
  }
}

/** Deep copies of `values`, values `JSON.parse` made. */
function copyAll(values) {
  const copies = new Array(values.length);
  for (let i = 0; i < values.length; i++) copies[i] = copyJson(values[i]);
  return copies;
}

/**
 * A deep copy of `value`, a value `JSON.parse` made. Spread copies own properties as data
 * properties, a key `__proto__` too (never the prototype).
 */
function copyJson(value) {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map(copyJson);
  const copy = { ...value };
  for (const key in copy) {
    const field = copy[key];
    if (typeof field === 'object' && field !== null) copy[key] = copyJson(field);
  }
  return copy;
}

module.exports = { Summaries, copyJson };
