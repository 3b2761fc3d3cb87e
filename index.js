'use strict';
/**
 * harness-sessions: sessions for AI SDK harness agents, with a Rust core.
 *
 * This file only gathers what the package exports; the pieces live in `js/` (thin JavaScript
 * glue) and in the native addon (`binding.js`, generated).
 */

const {
  SessionError,
  SessionNotFoundError,
  SessionConflictError,
  SessionCapacityError,
  SessionInputError,
} = require('./js/errors.js');
const { createSessionManager } = require('./js/manager.js');
const { createMemorySessionStore } = require('./js/stores.js');
const { getHarnessErrorMessage } = require('./js/harness-errors.js');

module.exports = {
  createSessionManager,
  createMemorySessionStore,
  getHarnessErrorMessage,
  SessionError,
  SessionNotFoundError,
  SessionConflictError,
  SessionCapacityError,
  SessionInputError,
};
