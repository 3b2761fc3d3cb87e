'use strict';
/**
 * The stores the package ships, in Rust: `createMemorySessionStore()` and
 * `createSqliteSessionStore({ path })`. Each is a `SessionStore` applications can call; the
 * manager, given one, uses the native store directly.
 */

const native = require('./native.js');
const { fromNative, SessionInputError } = require('./errors.js');
const { checkId, json: toJson, need, plain } = require('./input.js');

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
  const checked = (f) => async (...args) => f(...args);
  return {
    [NATIVE_STORE]: nativeStore,
    save: checked((record, resumeState) => {
      need(record !== null && typeof record === 'object', 'record', 'record must be a session record');
      const text = toJson(record, 'record');
      const state = resumeState === undefined ? null : toJson(resumeState, 'resumeState');
      return call(() => nativeStore.save(text, state));
    }),
    get: checked(async (id) => {
      checkId(id);
      return parse(await call(() => nativeStore.get(id)));
    }),
    list: checked(async () => parse(await call(() => nativeStore.list()))),
    getResumeState: checked(async (id) => {
      checkId(id);
      return parse(await call(() => nativeStore.getResumeState(id)));
    }),
    delete: checked((id) => {
      checkId(id);
      return call(() => nativeStore.delete(id));
    }),
    /** Lets go of the store: a SQLite store closes its file, free for another store. */
    close: () => call(() => nativeStore.close()),
  };
}

/** Sessions kept in memory, lost with the process: the default store. */
function createMemorySessionStore() {
  return wrap(native.NativeStore.memory());
}

/** The environment variable a key to encrypt resume states with is read from. */
const KEY_VARIABLE = 'HARNESS_SESSIONS_ENCRYPTION_KEY';

/**
 * The key to encrypt resume states with: 32 bytes, given as bytes, as 64 hex digits or in base64.
 * @returns {Buffer | null}
 */
function readKey(key, path) {
  if (key === undefined || key === null) return null;
  let bytes;
  if (key instanceof Uint8Array) bytes = Buffer.from(key);
  else if (typeof key === 'string') bytes = /^[0-9a-fA-F]{64}$/.test(key) ? Buffer.from(key, 'hex') : Buffer.from(key, 'base64');
  if (bytes === undefined || bytes.length !== 32) {
    throw new SessionInputError({ path, message: `${path} must be 32 bytes: 64 hex digits, or base64` });
  }
  return bytes;
}

/**
 * Sessions kept in a SQLite file, across restarts: WAL, `synchronous=FULL`, the file created with
 * mode 0600 (its missing parent folders with mode 0700), the resume state apart and only while a
 * session is suspended, encrypted when a key is given (`encryptionKey`, else the
 * `HARNESS_SESSIONS_ENCRYPTION_KEY` environment variable). A relative `path` is resolved (by the
 * engine) against the working directory now; the file is opened at the first use of the store (or of the manager
 * given it), so that creating one at the top level of a module touches no file.
 */
function createSqliteSessionStore(options) {
  need(options !== undefined, 'options', 'createSqliteSessionStore() takes { path, encryptionKey? }');
  const { path, encryptionKey } = plain(options, 'options', ['path', 'encryptionKey']);
  // Only its type and well-formedness here (a lone surrogate would reach Rust changed): the
  // engine refuses an empty path or a NUL, and resolves a relative one.
  need(typeof path === 'string' && path.isWellFormed(), 'path', 'path must be the path of a file');
  // An empty variable is no key; an empty option is a mistake, never encryption turned off.
  const fromEnvironment = process.env[KEY_VARIABLE];
  const key =
    encryptionKey !== undefined
      ? readKey(encryptionKey, 'encryptionKey')
      : fromEnvironment === undefined || fromEnvironment === ''
        ? null
        : readKey(fromEnvironment, KEY_VARIABLE);
  try {
    return wrap(native.NativeStore.sqlite(path, key));
  } catch (error) {
    throw fromNative(error);
  }
}

module.exports = { createMemorySessionStore, createSqliteSessionStore, NATIVE_STORE, wrap };
