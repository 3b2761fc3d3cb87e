'use strict';
/**
 * Reading what callers pass, safely, before it reaches Rust. Objects are read once, into plain
 * snapshots, so that a getter or a Proxy that throws, or that answers differently the second
 * time, cannot slip past the checks or escape as a raw error.
 *
 * The rules of options and inputs live in Rust (`src/engine/input.rs` and the serde structs of
 * each domain), which refuses them naming the field path. JavaScript checks only what Rust cannot
 * see: functions, getters and Proxies, lone surrogates, `AbortSignal`s, byte arrays, and values
 * JSON cannot carry.
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

/**
 * Every own enumerable field of `value` (an object, or `undefined` for none), each read once,
 * as a plain object; a field that cannot be read is bad input at its path.
 */
function fields(value, path) {
  if (value === undefined) return {};
  need(value !== null && typeof value === 'object' && !Array.isArray(value), path, `${path} must be an object`);
  let keys;
  try {
    keys = Object.keys(value);
  } catch (error) {
    throw new SessionInputError({ path, message: `${path} could not be read: ${messageOf(error)}` });
  }
  return plain(value, path, keys);
}

/**
 * `value` as plain JSON data, for Rust to check: each field read once (one that cannot be read is
 * bad input at its path); a number JSON cannot carry (`NaN`, `Infinity`) written as its name, a
 * string that Rust refuses wherever it wants a number; what is not data at all (a function, a
 * symbol, a BigInt, a cycle, a lone surrogate) refused here, at its path. `path` is that of
 * `value`; `''` for the options of a call, whose fields are named alone (`idleTimeoutMs`).
 */
function data(value, path) {
  try {
    return copyData(value, path, new Set());
  } catch (error) {
    if (SessionInputError.isInstance(error)) throw error;
    // A stack overflow on deep nesting, or a revoked Proxy: nothing the engine could read.
    throw new SessionInputError({ path: path || 'options', message: `${path || 'options'} could not be read: ${messageOf(error)}` });
  }
}

function copyData(value, path, seen) {
  const at = path || 'options';
  switch (typeof value) {
    case 'undefined':
    case 'boolean':
      return value;
    case 'string':
      need(value.isWellFormed(), at, `${at} must be well-formed text (it holds a lone surrogate)`);
      return value;
    case 'number':
      return Number.isFinite(value) ? value : String(value);
    case 'object':
      if (value === null) return null;
      break;
    default:
      throw new SessionInputError({ path: at, message: `${at} must be JSON data, not a ${typeof value}` });
  }
  need(!seen.has(value), at, `${at} must be JSON data, not a cycle`);
  seen.add(value);
  try {
    if (Array.isArray(value)) {
      return Array.from({ length: read(value, 'length', at) }, (_, index) =>
        copyData(read(value, index, `${at}[${index}]`), `${at}[${index}]`, seen),
      );
    }
    const copy = {};
    for (const [key, field] of Object.entries(fields(value, at))) {
      if (field !== undefined) copy[key] = copyData(field, path === '' ? key : `${path}.${key}`, seen);
    }
    return copy;
  } finally {
    seen.delete(value);
  }
}

/**
 * `value`, unless JSON would drop it silently (a function or a symbol: the field would reach Rust
 * as absent); such a value is bad input at `path`.
 */
function kept(value, path) {
  need(typeof value !== 'function' && typeof value !== 'symbol', path, `${path} must be JSON data, not a ${typeof value}`);
  return value;
}

/** `value[name]`, read once; a read that throws is bad input at `path`. */
function read(value, name, path) {
  try {
    return value[name];
  } catch (error) {
    throw new SessionInputError({ path, message: `${path} could not be read: ${messageOf(error)}` });
  }
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

module.exports = { need, plain, fields, data, kept, json };
