'use strict';
/**
 * The error classes of harness-sessions, and the one place native errors become them.
 *
 * Each class marks its instances with an own `Symbol.for` property, and its static `isInstance()`
 * checks that marker rather than the prototype chain: an error thrown by another copy of the
 * package (Next.js may load two) is recognized all the same.
 */

const markerOf = (name) => Symbol.for(`harness-sessions.error.${name}`);

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

class SessionNotFoundError extends SessionError {
  constructor({ sessionId, message = `No session ${sessionId}.` }) {
    super(message);
    this.name = 'SessionNotFoundError';
    this.code = 'SESSION_NOT_FOUND';
    this.statusCode = 404;
    this.sessionId = sessionId;
    mark(this, 'SessionNotFoundError');
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionNotFoundError');
  }
}

class SessionConflictError extends SessionError {
  constructor({ sessionId, status, message = `The session is ${status}.` }) {
    super(message);
    this.name = 'SessionConflictError';
    this.code = 'SESSION_CONFLICT';
    this.statusCode = 409;
    this.sessionId = sessionId;
    this.status = status;
    mark(this, 'SessionConflictError');
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionConflictError');
  }
}

class SessionCapacityError extends SessionError {
  constructor({
    capacity,
    message = `${capacity} sessions are live, the most the sandboxes take: close or suspend one first.`,
  }) {
    super(message);
    this.name = 'SessionCapacityError';
    this.code = 'SESSION_CAPACITY';
    this.statusCode = 503;
    this.capacity = capacity;
    mark(this, 'SessionCapacityError');
  }

  static isInstance(error) {
    return hasMarker(error, 'SessionCapacityError');
  }
}

class SessionInputError extends SessionError {
  constructor({ path, message = `${path} is not valid.` }) {
    super(message);
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

function mark(error, name) {
  Object.defineProperty(error, markerOf(name), { value: true, enumerable: false });
}

function hasMarker(error, name) {
  return error != null && typeof error === 'object' && error[markerOf(name)] === true;
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
 * The error to throw for `error`, a native one or any other: a native error becomes its class
 * (its details are a JSON object in its message), an application's error comes back as itself.
 */
function fromNative(error) {
  if (!(error instanceof Error) || typeof error.message !== 'string' || !error.message.startsWith('{"code"')) {
    return error;
  }
  let details;
  try {
    details = JSON.parse(error.message);
  } catch {
    return error;
  }
  switch (details.code) {
    case 'SESSION_NOT_FOUND':
      return new SessionNotFoundError(details);
    case 'SESSION_CONFLICT':
      return new SessionConflictError(details);
    case 'SESSION_CAPACITY':
      return new SessionCapacityError(details);
    case 'SESSION_INPUT':
      return new SessionInputError(details);
    case 'SESSION_HOST': {
      if (details.origin !== undefined) {
        const original = keeper.peek(details.origin);
        if (original !== undefined) return original;
      }
      const failure = new SessionError(details.message);
      failure.code = 'SESSION_HOST';
      return failure;
    }
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
  fromNative,
  translating,
  keeper,
};
