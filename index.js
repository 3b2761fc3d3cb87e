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
  SessionOutputError,
  SessionStoreUnavailableError,
} = require('./js/errors.js');
const { createSessionManager } = require('./js/manager.js');
const { createMemorySessionStore, createSqliteSessionStore, createPostgresSessionStore } = require('./js/stores.js');
const { getHarnessErrorMessage } = require('./js/harness-errors.js');
const { sharedSandbox, sandboxPerSession } = require('./js/strategies.js');
const { dockerSandbox, localSandbox } = require('./js/sandbox.js');

/** Every status, in the order of the lifecycle. */
const SESSION_STATUSES = ['preparing', 'idle', 'busy', 'awaiting-input', 'suspended', 'closed', 'failed', 'interrupted'];
/** The statuses of a session held in memory, with a harness session and a sandbox. */
const LIVE_STATUSES = ['preparing', 'idle', 'busy', 'awaiting-input'];

module.exports = {
  createSessionManager,
  createMemorySessionStore,
  createSqliteSessionStore,
  createPostgresSessionStore,
  getHarnessErrorMessage,
  sharedSandbox,
  sandboxPerSession,
  dockerSandbox,
  localSandbox,
  SessionError,
  SessionNotFoundError,
  SessionConflictError,
  SessionCapacityError,
  SessionInputError,
  SessionOutputError,
  SessionStoreUnavailableError,
  SESSION_STATUSES,
  LIVE_STATUSES,
};
