'use strict';
/**
 * The stores the package ships, in Rust: `createMemorySessionStore()` and
 * `createSqliteSessionStore({ path })`. Each is a `SessionStore` applications can call; the
 * manager, given one, uses the native store directly.
 */

const native = require('../binding.js');
const { fromNative, SessionInputError } = require('./errors.js');

/** The native store behind a store object. */
const NATIVE_STORE = Symbol.for('harness-sessions.native-store');

function wrap(nativeStore) {
  const call = async (f) => {
    try {
      return await f();
    } catch (error) {
      throw fromNative(error);
    }
  };
  const parse = (text) => (text == null ? undefined : JSON.parse(text));
  const json = (value, path) => {
    try {
      return JSON.stringify(value);
    } catch (error) {
      throw new SessionInputError({ path, message: `${path} must be JSON: ${error.message}` });
    }
  };
  return {
    [NATIVE_STORE]: nativeStore,
    save: (record, resumeState) =>
      call(() =>
        nativeStore.save(json(record, 'record'), resumeState === undefined ? null : json(resumeState, 'resumeState')),
      ),
    get: async (id) => parse(await call(() => nativeStore.get(id))),
    list: async () => parse(await call(() => nativeStore.list())),
    getResumeState: async (id) => parse(await call(() => nativeStore.getResumeState(id))),
    delete: (id) => call(() => nativeStore.delete(id)),
  };
}

/** Sessions kept in memory, lost with the process: the default store. */
function createMemorySessionStore() {
  return wrap(native.NativeStore.memory());
}

module.exports = { createMemorySessionStore, NATIVE_STORE, wrap };
