// The error classes beside those of `ai-sdk-harness-sessions` 0.2.0: its positional constructors
// and messages, and each package's `isInstance()` recognising the other's errors (an application
// moving over may have both loaded). The reference's classes are recreated here from their
// published shape: an own property keyed `Symbol.for('ai-sdk-harness-sessions.<Name>')`, set to
// `true` as a class field, and an `isInstance()` that checks `MARKER in error`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import * as pkg from '../index.js';
import { testManager } from './support/sessions.mjs';

const NOT_FOUND = Symbol.for('ai-sdk-harness-sessions.SessionNotFoundError');
const CONFLICT = Symbol.for('ai-sdk-harness-sessions.SessionConflictError');
const CAPACITY = Symbol.for('ai-sdk-harness-sessions.SessionCapacityError');

/** The reference's three classes, as its 0.2.0 source declares them. */
const reference = {
  SessionNotFoundError: class SessionNotFoundError extends Error {
    [NOT_FOUND] = true;
    constructor(sessionId) {
      super(`No session ${sessionId}.`);
      this.sessionId = sessionId;
      this.name = 'SessionNotFoundError';
    }
    static isInstance(error) {
      return typeof error === 'object' && error !== null && NOT_FOUND in error;
    }
  },
  SessionConflictError: class SessionConflictError extends Error {
    [CONFLICT] = true;
    constructor(sessionId, status, message) {
      super(message);
      this.sessionId = sessionId;
      this.status = status;
      this.name = 'SessionConflictError';
    }
    static isInstance(error) {
      return typeof error === 'object' && error !== null && CONFLICT in error;
    }
  },
  SessionCapacityError: class SessionCapacityError extends Error {
    [CAPACITY] = true;
    constructor(capacity) {
      super(`${capacity} sessions are live, the most the sandboxes take: close or suspend one first.`);
      this.capacity = capacity;
      this.name = 'SessionCapacityError';
    }
    static isInstance(error) {
      return typeof error === 'object' && error !== null && CAPACITY in error;
    }
  },
};

const NAMES = ['SessionNotFoundError', 'SessionConflictError', 'SessionCapacityError'];
const make = (classes) => [
  new classes.SessionNotFoundError('a'),
  new classes.SessionConflictError('a', 'busy', 'The session is busy.'),
  new classes.SessionCapacityError(2),
];

describe('errors beside those of ai-sdk-harness-sessions', () => {
  test('the same positional constructors, messages, fields and names', () => {
    const ours = make(pkg);
    const theirs = make(reference);
    for (const [index, name] of NAMES.entries()) {
      assert.equal(ours[index].name, name);
      assert.equal(ours[index].name, theirs[index].name);
      assert.equal(ours[index].message, theirs[index].message);
      for (const field of ['sessionId', 'status', 'capacity']) {
        assert.equal(ours[index][field], theirs[index][field], `${name}.${field}`);
      }
    }
    assert.equal(ours[0].message, 'No session a.');
    assert.deepEqual([ours[1].sessionId, ours[1].status], ['a', 'busy']);
    assert.equal(ours[2].capacity, 2);
    // What we add stays.
    assert.deepEqual(ours.map((e) => [e.code, e.statusCode]), [['SESSION_NOT_FOUND', 404], ['SESSION_CONFLICT', 409], ['SESSION_CAPACITY', 503]]);
    assert.ok(ours.every((e) => e instanceof pkg.SessionError && pkg.SessionError.isInstance(e)));
  });

  test("each package's isInstance() recognises the other's errors, of that class only", () => {
    const ours = make(pkg);
    const theirs = make(reference);
    for (const [index, name] of NAMES.entries()) {
      for (const [other, otherName] of NAMES.map((n, i) => [i, n])) {
        const same = other === index;
        assert.equal(reference[name].isInstance(ours[other]), same, `reference ${name} of our ${otherName}`);
        assert.equal(pkg[name].isInstance(theirs[other]), same, `our ${name} of the reference's ${otherName}`);
        assert.equal(pkg[name].isInstance(ours[other]), same, `our ${name} of our ${otherName}`);
      }
      assert.equal(pkg[name].isInstance(new Error('x')), false);
      assert.equal(pkg[name].isInstance(null), false);
      assert.equal(pkg[name].isInstance('SessionNotFoundError'), false);
    }
    // The reference's marker is an own property of ours, as its class field is of its errors.
    assert.ok(Object.getOwnPropertySymbols(ours[0]).includes(NOT_FOUND));
    assert.equal(pkg.SessionInputError.isInstance(theirs[0]), false);
  });

  test("the errors the manager throws are recognised by the reference's isInstance()", async () => {
    const { sessions } = testManager({ sandboxes: { capacity: 1, acquire: async () => ({ sandboxSession: {}, suspend: async () => {}, close: async () => {} }) } });
    const missing = await sessions.send('nobody', { message: 'hi' }).catch((e) => e);
    assert.ok(reference.SessionNotFoundError.isInstance(missing), String(missing));
    assert.equal(missing.message, 'No session nobody.');
    await sessions.create({ id: 'x', metadata: {} });
    const taken = await sessions.create({ id: 'x', metadata: {} }).catch((e) => e);
    assert.ok(reference.SessionConflictError.isInstance(taken), String(taken));
    assert.equal(taken.sessionId, 'x');
    await sessions.close('x');
    const closed = await sessions.send('x', { message: 'hi' }).catch((e) => e);
    assert.ok(reference.SessionConflictError.isInstance(closed), String(closed));
    assert.equal(closed.status, 'closed');
    await sessions.shutdown();
  });
});
