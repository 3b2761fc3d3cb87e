'use strict';
/**
 * The stores the package ships, in Rust: `createMemorySessionStore()` and
 * `createSqliteSessionStore({ path })`. Each is a `SessionStore` applications can call; the
 * manager, given one, uses the native store directly.
 */

const native = require('./native.js');
const { fromNative, translating } = require('./errors.js');
const { json: toJson, need, plain } = require('./input.js');
const { Summaries } = require('./summaries.js');

/** The native store behind a store object. */
const NATIVE_STORE = Symbol.for('harness-sessions.native-store');

/** The store methods of each store object this module made, as it made them. */
const MADE = new WeakMap();

/** The store methods the manager calls. */
const STORE_METHODS = ['save', 'get', 'list', 'getResumeState', 'delete'];

/**
 * The native store behind `store`, when the manager may use it directly: a store this module
 * made, whose methods are still the ones it made (a store whose methods were replaced before
 * `createSessionManager()`, to wrap or fail them, is called through them). Read once, by the
 * manager being made: a method replaced afterwards is not seen (the README says so).
 */
function nativeStoreOf(store) {
  const made = MADE.get(store);
  // A store of another copy of the package: its methods are that copy's to know.
  if (made === undefined) return store[NATIVE_STORE];
  return STORE_METHODS.every((name) => store[name] === made[name]) ? store[NATIVE_STORE] : undefined;
}

/** The store methods, each with the native method of the store that answers at once. */
const AT_ONCE = { save: 'saveNow', get: 'getNow', listSince: 'listSinceNow', getResumeState: 'getResumeStateNow', delete: 'deleteNow' };

/**
 * The native methods of `nativeStore`, their errors turned into the package's: a store that
 * answers at once (in memory) does its work on this thread (`*Now`: no promise of the engine's
 * threads, no thread hops), the others on the engine's threads.
 */
function nativeMethods(nativeStore) {
  const immediate = nativeStore.immediate === true;
  const method = (name) => {
    if (immediate) {
      const now = AT_ONCE[name];
      return (...args) => {
        try {
          return nativeStore[now](...args);
        } catch (error) {
          throw fromNative(error);
        }
      };
    }
    return async (...args) => {
      try {
        return await nativeStore[name](...args);
      } catch (error) {
        throw fromNative(error);
      }
    };
  };
  return Object.fromEntries(Object.keys(AT_ONCE).map((name) => [name, method(name)]));
}

/** What `f()` gives, as a promise; what it throws, as a rejected one. */
function settle(f) {
  try {
    return Promise.resolve(f());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** JSON text as the store gave it, read: `undefined` for none. */
const parse = (text) => (text == null ? undefined : JSON.parse(text));

function wrap(nativeStore) {
  const methods = nativeMethods(nativeStore);
  const summaries = new Summaries();
  const store = {
    [NATIVE_STORE]: nativeStore,
    save: (record, resumeState) =>
      settle(() => {
        // Its shape is the engine's to check (a `SessionRecord`), refused at `record`.
        const text = toJson(record, 'record');
        const state = resumeState === undefined ? null : toJson(resumeState, 'resumeState');
        return methods.save(text, state);
      }),
    get: (id) =>
      settle(() => {
        const text = methods.get(id);
        return typeof text?.then === 'function' ? text.then(parse) : parse(text);
      }),
    list: () => summaries.list(methods.listSince),
    getResumeState: (id) =>
      settle(() => {
        const text = methods.getResumeState(id);
        return typeof text?.then === 'function' ? text.then(parse) : parse(text);
      }),
    delete: (id) =>
      settle(() => {
        return methods.delete(id);
      }),
    /** Lets go of the store: a SQLite store closes its file, free for another store. */
    close: async () => {
      try {
        return await nativeStore.close();
      } catch (error) {
        throw fromNative(error);
      }
    },
  };
  MADE.set(store, Object.fromEntries(STORE_METHODS.map((name) => [name, store[name]])));
  return store;
}

/** Sessions kept in memory, lost with the process: the default store. */
function createMemorySessionStore() {
  return wrap(native.NativeStore.memory());
}

/** The environment variable a key to encrypt resume states with is read from. */
const KEY_VARIABLE = 'HARNESS_SESSIONS_ENCRYPTION_KEY';

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
  // The path and the key as they were given: the engine checks both (and reads the key: bytes,
  // hex or base64). The environment is read here, where `process.env` is seen as it stands.
  return wrap(
    translating(() =>
      encryptionKey !== undefined
        ? native.NativeStore.sqlite(path, encryptionKey, null)
        : native.NativeStore.sqlite(path, process.env[KEY_VARIABLE], KEY_VARIABLE),
    ),
  );
}

/**
 * Sessions kept in PostgreSQL (14 or later), in a schema of their own (`harness_sessions` by
 * default), created and migrated at the first use under a lock. `url` is a `postgres://`
 * connection string (TLS as its `sslmode` says); `leaseTtlMs`, `instanceId` and `listenUrl` are
 * for running one set of sessions on many instances; resume states are encrypted as the SQLite
 * store's are (`encryptionKey`, else `HARNESS_SESSIONS_ENCRYPTION_KEY`). Nothing connects before
 * the first use: a server that cannot be reached fails that call with a
 * `SessionStoreUnavailableError`.
 */
function createPostgresSessionStore(options) {
  need(
    options !== undefined,
    'options',
    'createPostgresSessionStore() takes { url, schema?, leaseTtlMs?, instanceId?, listenUrl?, encryptionKey? }',
  );
  const { url, schema, leaseTtlMs, instanceId, listenUrl, encryptionKey } = plain(options, 'options', [
    'url',
    'schema',
    'leaseTtlMs',
    'instanceId',
    'listenUrl',
    'encryptionKey',
  ]);
  // Every value as it was given: the engine checks them all.
  const ttl = leaseTtlMs === undefined ? null : leaseTtlMs;
  return wrap(
    translating(() =>
      encryptionKey !== undefined
        ? native.NativeStore.postgres(url, schema, ttl, instanceId, listenUrl, encryptionKey, null)
        : native.NativeStore.postgres(url, schema, ttl, instanceId, listenUrl, process.env[KEY_VARIABLE], KEY_VARIABLE),
    ),
  );
}

module.exports = {
  createMemorySessionStore,
  createSqliteSessionStore,
  createPostgresSessionStore,
  NATIVE_STORE,
  nativeStoreOf,
  wrap,
};
