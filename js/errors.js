'use strict';
/**
 * The error classes of harness-sessions, and the one place native errors become them.
 *
 * Each class marks its instances with an own `Symbol.for` property, and its static `isInstance()`
 * checks that marker rather than the prototype chain: an error thrown by another copy of the
 * package (Next.js may load two) is recognized all the same.
 */

const markerOf = (name) => Symbol.for(`harness-sessions.error.${name}`);
/**
 * The marker `ai-sdk-harness-sessions` puts on its errors (an own property, `true`) and its
 * `isInstance` looks for: ours carry it too, and ours recognise its errors, so that an application
 * with both packages loaded while it moves over tells their errors apart the same way.
 */
const referenceMarkerOf = (name) => Symbol.for(`ai-sdk-harness-sessions.${name}`);

class SessionError extends Error {
  /**
   * @param {string} message
   * @param {{ cause?: unknown }} [options]
   */
  constructor(message, options) {
    super(message, options);
    this.name = 'SessionError';
    /** A stable string: what went wrong, for programs. */
    this.code = 'SESSION_ERROR';
    /** The HTTP status an API answers with. */
    this.statusCode = 500;
    mark(this, 'SessionError');
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionError');
  }
}

/** No session has this id. An HTTP API answers 404. */
class SessionNotFoundError extends SessionError {
  /** @param {string} sessionId */
  constructor(sessionId) {
    super(`No session ${sessionId}.`);
    this.name = 'SessionNotFoundError';
    this.code = 'SESSION_NOT_FOUND';
    this.statusCode = 404;
    this.sessionId = sessionId;
    mark(this, 'SessionNotFoundError', true);
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionNotFoundError', true);
  }
}

/** The session cannot do this in its status. An HTTP API answers 409. */
class SessionConflictError extends SessionError {
  /**
   * @param {string} sessionId
   * @param {string} status the session's status when it refused
   * @param {string} [message] default: `The session is <status>.`
   */
  constructor(sessionId, status, message = `The session is ${status}.`) {
    super(message);
    this.name = 'SessionConflictError';
    this.code = 'SESSION_CONFLICT';
    this.statusCode = 409;
    this.sessionId = sessionId;
    this.status = status;
    mark(this, 'SessionConflictError', true);
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionConflictError', true);
  }
}

/** Every sandbox slot is taken. An HTTP API answers 503. */
class SessionCapacityError extends SessionError {
  /** @param {number} capacity how many sessions may be live at once */
  constructor(capacity) {
    super(`${capacity} sessions are live, the most the sandboxes take: close or suspend one first.`);
    this.name = 'SessionCapacityError';
    this.code = 'SESSION_CAPACITY';
    this.statusCode = 503;
    this.capacity = capacity;
    mark(this, 'SessionCapacityError', true);
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionCapacityError', true);
  }
}

/** An argument of the wrong shape. An HTTP API answers 400. */
class SessionInputError extends SessionError {
  /**
   * `new SessionInputError(path, message?)`, or `new SessionInputError({ path, message? })`.
   * @param {string | { path: string, message?: string }} path
   * @param {string} [message] default: `<path> is not valid.`
   */
  constructor(path, message) {
    if (path !== null && typeof path === 'object') ({ path, message } = path);
    super(message ?? `${path} is not valid.`);
    this.name = 'SessionInputError';
    this.code = 'SESSION_INPUT';
    this.statusCode = 400;
    /** The argument, field or path at fault: `message.parts[2].type`. */
    this.path = path;
    mark(this, 'SessionInputError');
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionInputError');
  }
}

/**
 * The turn's structured answer (`output`) is missing or does not match its schema: what
 * `turn.output` rejects with. An HTTP API answers 422. `code` is `'output_invalid'` (JSON, none of
 * it valid: `errors` are those of the last candidate), `'output_missing'` (no JSON in the final
 * text, or the turn was cut short before it was judged) or `'output_pending'` (the turn paused
 * awaiting input: pass `output` again to `continue()`).
 */
class SessionOutputError extends SessionError {
  /**
   * @param {{ code: string, message?: string, errors?: { instancePath: string, message: string }[] }} details
   */
  constructor({ code, message, errors = [] }) {
    super(message ?? 'The answer does not match the output schema.');
    this.name = 'SessionOutputError';
    this.code = code;
    this.statusCode = 422;
    /** Each validation error: the JSON Pointer of the value at fault, and what is wrong. */
    this.errors = errors.map(({ instancePath, message: text }) => ({ instancePath, message: text }));
    mark(this, 'SessionOutputError');
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionOutputError');
  }
}

/**
 * The store's database cannot be reached: the PostgreSQL server refuses or does not answer, the
 * login or the TLS handshake is refused. The message names the server (`host:port/database as
 * user`), never the password. An HTTP API answers 503.
 */
class SessionStoreUnavailableError extends SessionError {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'SessionStoreUnavailableError';
    this.code = 'SESSION_STORE_UNAVAILABLE';
    this.statusCode = 503;
    mark(this, 'SessionStoreUnavailableError');
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionStoreUnavailableError');
  }
}

/** Marks `error` as a `name`; with `reference`, with the marker of `ai-sdk-harness-sessions` too. */
function mark(error, name, reference = false) {
  Object.defineProperty(error, markerOf(name), { value: true, enumerable: false });
  // As the reference's class field defines it: an own, enumerable, writable property.
  if (reference) error[referenceMarkerOf(name)] = true;
}

/** Whether `error` carries our marker of `name`, or (with `reference`) the reference's. */
function hasMarker(error, name, reference = false) {
  if (error == null || typeof error !== 'object') return false;
  return error[markerOf(name)] === true || (reference && referenceMarkerOf(name) in error);
}

/**
 * Where the original JavaScript errors of the application's callbacks wait while the engine
 * handles their failure: the engine holds their number, and gets the very error back to JavaScript.
 */
class ErrorKeeper {
  /** The most errors kept: the oldest goes when a newer one comes. */
  static LIMIT = 1000;
  #next = 1;
  #errors = new Map();

  /** Keeps `error`; returns its number. */
  keep(error) {
    const id = this.#next++;
    this.#errors.set(id, error);
    if (this.#errors.size > ErrorKeeper.LIMIT) {
      this.#errors.delete(this.#errors.keys().next().value);
    }
    return id;
  }

  /** The error numbered `id`, kept. */
  peek(id) {
    return this.#errors.get(id);
  }
}

const keeper = new ErrorKeeper();

/**
 * The error to throw for `error`, a native one or any other: a native error (an `Error` with a
 * `SESSION_*` `code` and the `details` of its class, as `src/binding/error.rs` builds it)
 * becomes its class, an application's error comes back as itself.
 */
function fromNative(error) {
  if (
    !(error instanceof Error) ||
    typeof error.code !== 'string' ||
    !error.code.startsWith('SESSION_') ||
    error.details === null ||
    typeof error.details !== 'object'
  ) {
    return error;
  }
  return fromDetails({ ...error.details, code: error.code, message: error.message });
}

/**
 * The error of the engine's failure `details` (`{ code, message, sessionId?, status?, capacity?,
 * path?, origin? }`): its class, or the application's own error when it is the origin.
 */
function fromDetails(details) {
  switch (details.code) {
    case 'SESSION_NOT_FOUND':
      return new SessionNotFoundError(details.sessionId);
    case 'SESSION_CONFLICT':
      return new SessionConflictError(details.sessionId, details.status, details.message);
    case 'SESSION_CAPACITY':
      return new SessionCapacityError(details.capacity);
    case 'SESSION_INPUT':
      return new SessionInputError(details.path, details.message);
    case 'SESSION_HOST': {
      if (details.origin !== undefined) {
        const original = keeper.peek(details.origin);
        if (original !== undefined) return original;
      }
      const failure = new SessionError(details.message);
      failure.code = 'SESSION_HOST';
      return failure;
    }
    case 'SESSION_LEASE_LOST': {
      const failure = new SessionError(details.message);
      failure.code = 'SESSION_LEASE_LOST';
      failure.statusCode = 503;
      failure.sessionId = details.sessionId;
      return failure;
    }
    case 'SESSION_STORE_UNAVAILABLE':
      return new SessionStoreUnavailableError(details.message);
    case 'SESSION_SHUT_DOWN': {
      const failure = new SessionError(details.message);
      failure.code = 'SESSION_SHUT_DOWN';
      failure.statusCode = 503;
      return failure;
    }
    default: {
      const failure = new SessionError(details.message);
      failure.code = details.code;
      return failure;
    }
  }
}

/** Calls `f`, throwing a native error as its class. */
function translating(f) {
  try {
    const result = f();
    if (result && typeof result.then === 'function') {
      return result.then(undefined, (error) => {
        throw fromNative(error);
      });
    }
    return result;
  } catch (error) {
    throw fromNative(error);
  }
}

module.exports = {
  SessionError,
  SessionNotFoundError,
  SessionConflictError,
  SessionCapacityError,
  SessionInputError,
  SessionOutputError,
  SessionStoreUnavailableError,
  fromNative,
  fromDetails,
  translating,
  keeper,
};
