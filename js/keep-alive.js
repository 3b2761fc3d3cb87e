'use strict';
/**
 * Keeps Node's event loop alive while the engine works for JavaScript.
 *
 * The engine calls back into JavaScript through a weak function, which never keeps the process
 * alive by itself (an idle manager must not hold a script open). While a call into the engine is
 * pending, or a turn is under way, a timer holds the loop instead, so that a script awaiting
 * `turn.done` or `send()` is not cut short.
 */

let holds = 0;
let timer;

/** Holds the event loop open until the returned function is called (once). */
function hold() {
  if (holds++ === 0) timer = setInterval(() => {}, 1 << 30);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--holds === 0) clearInterval(timer);
  };
}

/**
 * Holds the event loop open until `promise` settles; returns it. A value that is no promise (a
 * call the engine answered at once) is returned as it is.
 */
function holding(promise) {
  if (promise === null || typeof promise !== 'object' || typeof promise.then !== 'function') return promise;
  const release = hold();
  promise.then(release, release);
  return promise;
}

module.exports = { hold, holding };
