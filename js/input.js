'use strict';
/**
 * Reading what callers pass, safely: every argument is checked before anything reaches Rust, and
 * a bad one gets a `SessionInputError` naming it. Objects are read once, into plain snapshots, so
 * that a getter or a Proxy that throws, or that answers differently the second time, cannot slip
 * past the checks or escape as a raw error.
 */

const { SessionInputError } = require('./errors.js');

function need(condition, path, message) {
  if (!condition) throw new SessionInputError({ path, message });
}

/**
 * A plain copy of the `names` fields of `value` (an object, or `undefined` for none), each read
 * once; a field that cannot be read is bad input at `<path>.<name>`.
 */
function plain(value, path, names, { refuseOthers = false } = {}) {
  if (value === undefined) return {};
  need(value !== null && typeof value === 'object' && !Array.isArray(value), path, `${path} must be an object`);
  const copy = {};
  if (refuseOthers) {
    let keys;
    try {
      keys = Object.keys(value);
    } catch (error) {
      throw new SessionInputError({ path, message: `${path} could not be read: ${messageOf(error)}` });
    }
    for (const key of keys) need(names.includes(key), key, `${key} is not an option`);
  }
  for (const name of names) {
    try {
      copy[name] = value[name];
    } catch (error) {
      const at = path === 'options' ? name : `${path}.${name}`;
      throw new SessionInputError({ path: at, message: `${at} could not be read: ${messageOf(error)}` });
    }
  }
  return copy;
}

/** An id: a non-empty string of well-formed UTF-16 (a lone surrogate would reach Rust changed). */
function checkId(id, path = 'id') {
  need(typeof id === 'string' && id.length > 0, path, `${path} must be a non-empty string`);
  need(id.isWellFormed(), path, `${path} must be well-formed text (it holds a lone surrogate)`);
}

/** A duration in milliseconds: absent, or a finite number, zero or more. */
function checkDuration(value, path) {
  need(
    value === undefined || (typeof value === 'number' && Number.isFinite(value) && value >= 0),
    path,
    `${path} must be a number of milliseconds, zero or more`,
  );
}

/** JSON text of `value`, or a `SessionInputError` naming `path` when it is not JSON. */
function json(value, path) {
  let text;
  try {
    text = JSON.stringify(value === undefined ? null : value);
  } catch (error) {
    throw new SessionInputError({ path, message: `${path} must be JSON: ${messageOf(error)}` });
  }
  need(typeof text === 'string', path, `${path} must be JSON`);
  return text;
}

function messageOf(error) {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return 'it threw';
  }
}

module.exports = { need, plain, checkId, checkDuration, json };
