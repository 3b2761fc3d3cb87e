// What the reliability and security tests share: a seeded PRNG, generators of hostile input for
// every public entry point, the classification of answers, latency figures, and the second SQLite
// reader (a Node 24 child with `node:sqlite`, see fixtures/programs/crash-sqlite.mjs).
//
// Every generated case is `{ category, why, args, expect }`: `why` says in words what is wrong
// with it (the value itself may be a cycle, a Proxy or 4 MB long), `expect` the answers that are
// legal: names of error classes, or `'undefined'` for a result of `undefined` (get() of an
// unknown id), or `'rethrown'` when the very error an application callback threw may come back.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const PROGRAMS = join(ROOT, '__test__', 'fixtures', 'programs');
/** The longer run: `HARNESS_SESSIONS_LONG=1`. */
export const LONG = process.env.HARNESS_SESSIONS_LONG === '1';

/** The inner loop's shorter run: `HARNESS_SESSIONS_QUICK=1` (`npm run test:quick` sets it). */
export const QUICK = !LONG && process.env.HARNESS_SESSIONS_QUICK === '1';

/** How many rounds: `normal`, `long` with HARNESS_SESSIONS_LONG=1, a tenth of `normal` when quick. */
export function roundsOf(normal, long) {
  return LONG ? long : QUICK ? Math.max(1, Math.round(normal / 10)) : normal;
}

// ─── A seeded PRNG ──────────────────────────────────────────────────────────────────────────────

/** A seed from `HARNESS_SESSIONS_SEED`, else a fresh one: print it with any failure. */
export function seedOf(offset = 0) {
  const given = process.env.HARNESS_SESSIONS_SEED;
  const base = given !== undefined && given !== '' ? Number(given) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
  return (base + offset) >>> 0;
}

/** mulberry32: small, fast, and the same sequence for the same seed everywhere. */
export function createRandom(seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const random = {
    seed,
    next,
    /** An integer in [0, n). */
    int: (n) => Math.floor(next() * n),
    /** An integer in [low, high]. */
    between: (low, high) => low + Math.floor(next() * (high - low + 1)),
    chance: (p) => next() < p,
    pick: (items) => items[Math.floor(next() * items.length)],
    shuffle: (items) => {
      const copy = [...items];
      for (let i = copy.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [copy[i], copy[j]] = [copy[j], copy[i]];
      }
      return copy;
    },
  };
  return random;
}

// ─── Hostile values ─────────────────────────────────────────────────────────────────────────────

/**
 * Keys that pollute prototypes when an object is merged naively. (Not `toJSON`: a function there
 * would make JSON.stringify replace the object, poison included, and the input would be valid.)
 */
export const POLLUTION_KEYS = ['__proto__', 'constructor', 'prototype', '__defineGetter__', 'hasOwnProperty', 'toString', 'valueOf', 'isAdmin'];

/** A string with a lone surrogate: not valid UTF-16, not representable in UTF-8. */
export function loneSurrogate(random) {
  const surrogate = String.fromCharCode(random.pick([0xd800, 0xdbff, 0xdc00, 0xdfff, random.between(0xd800, 0xdfff)]));
  const text = randomText(random, random.int(12));
  const at = random.int(text.length + 1);
  // A high surrogate followed by another high one, or at the end; a low one alone.
  return text.slice(0, at) + surrogate + (surrogate.charCodeAt(0) < 0xdc00 ? random.pick(['', 'x', '\ud800']) : '') + text.slice(at);
}

/** Well-formed text: ASCII, controls, NUL, right-to-left marks, emoji (proper pairs), CJK. */
export function randomText(random, length) {
  const alphabets = ['abcdefghij', '\u0000\u0001\u001f\u007f', '\u202e\u200b\ufeff', '😀🧪', '漢字かな', '"\\\'<>&%$', ' \t\n\r'];
  let text = '';
  while (text.length < length) {
    const alphabet = [...random.pick(alphabets)];
    text += random.pick(alphabet);
  }
  return text;
}

/** A big string: 64 KiB to 4 MiB (UTF-16 code units). */
export function hugeString(random) {
  const size = random.chance(0.9) ? random.pick([65_536, 1 << 18, 1 << 20]) : 4 << 20;
  return random.pick(['x', 'é', '😀', '\u0000']).repeat(size / 2);
}

/** An array or object nested `depth` levels deep around `leaf`. */
export function nested(depth, leaf = 1, kind = 'array') {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = kind === 'array' ? [value] : { a: value };
  return value;
}

/**
 * A value that is not JSON by any reading: JSON.stringify throws on it, or its text is refused by a
 * strict parser (lone surrogates), or it nests deeper than the package accepts (`minDepth`).
 */
export function poison(random, { minDepth = 70 } = {}) {
  const kinds = [
    () => ({ value: BigInt(random.int(1e9)), why: 'a BigInt' }),
    () => {
      const cycle = { a: 1 };
      cycle.self = cycle;
      return { value: cycle, why: 'a cycle' };
    },
    () => {
      const cycle = [1];
      cycle.push([cycle]);
      return { value: cycle, why: 'an array cycle' };
    },
    () => ({
      value: Object.defineProperty({ ok: 1 }, 'boom', { enumerable: true, get: () => { throw new Error('getter boom'); } }),
      why: 'a getter that throws',
    }),
    () => ({ value: { toJSON: () => { throw new Error('toJSON boom'); } }, why: 'a toJSON that throws' }),
    () => ({ value: { toJSON: () => 1n }, why: 'a toJSON giving a BigInt' }),
    () => ({
      value: new Proxy({ a: 1 }, { get: () => { throw new Error('proxy get boom'); } }),
      why: 'a Proxy whose get throws',
    }),
    () => ({
      value: new Proxy({ a: 1 }, { ownKeys: () => { throw new Error('proxy ownKeys boom'); } }),
      why: 'a Proxy whose ownKeys throws',
    }),
    () => {
      const { proxy, revoke } = Proxy.revocable({}, {});
      revoke();
      return { value: proxy, why: 'a revoked Proxy' };
    },
    () => ({ value: loneSurrogate(random), why: 'a string with a lone surrogate' }),
    () => {
      const key = loneSurrogate(random);
      return { value: { [key]: 1 }, why: 'a key with a lone surrogate' };
    },
    () => {
      const depth = random.pick([minDepth, minDepth + 10, 200, 1000, 20_000]);
      return { value: nested(depth, 1, random.pick(['array', 'object'])), why: `nesting ${depth} deep` };
    },
  ];
  return random.pick(kinds)();
}

/** Droppable oddities JSON accepts (or turns into null): noise around a poison. */
function noise(random) {
  return random.pick([
    () => undefined,
    () => null,
    () => NaN,
    () => -0,
    () => Infinity,
    () => 1e308,
    () => Number.MAX_SAFE_INTEGER + 2,
    () => () => 'a function',
    () => Symbol('s'),
    () => new Date(0),
    () => /re/g,
    () => new Map([[1, 2]]),
    () => new Set([1]),
    () => new Uint8Array([1, 2, 3]),
    () => Object.create(null),
    () => JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}'),
    () => randomText(random, random.int(20)),
    () => [1, , 3],
    () => Object.freeze({ frozen: true }),
    () => (random.chance(0.05) ? hugeString(random) : 'not huge this time'),
  ])();
}

/** A JSON-ish tree with pollution keys and noise, with `leaf` put somewhere inside. */
export function around(random, leaf, depth = random.int(4)) {
  if (depth === 0) return leaf;
  if (random.chance(0.5)) {
    const items = Array.from({ length: random.int(3) }, () => noise(random));
    items.splice(random.int(items.length + 1), 0, around(random, leaf, depth - 1));
    return items;
  }
  const object = {};
  for (let i = random.int(3); i > 0; i--) {
    Object.defineProperty(object, random.pick([...POLLUTION_KEYS, 'x', 'data']), { value: noise(random), enumerable: true, configurable: true, writable: true });
  }
  Object.defineProperty(object, random.pick([...POLLUTION_KEYS, 'inner', 'value']), {
    value: around(random, leaf, depth - 1),
    enumerable: true,
    configurable: true,
    writable: true,
  });
  return object;
}

/**
 * An imported transcript (`create()`'s `initialHistory`) that breaks a rule: a poison as a text,
 * as a call's arguments or as a result's output (`kind` 0, 1, 2), or (otherwise) a transcript of
 * the wrong shape or order. `{ value, why }`.
 */
function badHistory(random, kind) {
  const user = { type: 'user', text: 'hi' };
  const call = (args) => ({ type: 'tool_call', callId: 'c', name: 'x', arguments: args });
  const result = (output) => ({ type: 'tool_result', callId: 'c', output });
  const { value: poisonValue, why } = poisoned(random);
  switch (kind) {
    case 0:
      return { value: [user, { type: 'assistant', text: poisonValue }], why: `a text ${why}` };
    case 1:
      return { value: [user, call(poisonValue), result('ok')], why: `arguments ${why}` };
    case 2:
      return { value: [user, call({}), result(poisonValue)], why: `an output ${why}` };
    default:
      return random.pick([
        () => ({ value: { 0: user }, why: 'not an array' }),
        () => ({ value: [{ type: 'assistant', text: 'a' }], why: 'not starting with a user item' }),
        () => ({ value: [user, call({})], why: 'a call without its result' }),
        () => ({ value: [user, result('a')], why: 'a result without its call' }),
        () => ({ value: [user, call({}), result(1), result(2)], why: 'a second result' }),
        () => ({ value: [user, call([]), result(1)], why: 'arguments not an object' }),
        () => ({ value: [user, { type: 'system', text: 'a' }], why: 'a system item' }),
        () => ({ value: Array.from({ length: 257 }, () => user), why: '257 items' }),
        () => ({ value: [{ ...user, text: 'a'.repeat(256_001) }], why: 'a text too long' }),
        () => ({ value: [user, noise(random)], why: 'an item of noise' }),
      ])();
  }
}

/** A poison hidden inside noise: `{ value, why }`. */
export function poisoned(random, options) {
  const { value, why } = poison(random, options);
  return { value: around(random, value), why };
}

// ─── Ids ────────────────────────────────────────────────────────────────────────────────────────

/** A well-formed id no session has. */
export function unknownId(random) {
  return random.pick([
    () => `unknown-${random.int(1e9)}`,
    () => randomText(random, random.between(1, 40)),
    () => 'u'.repeat(random.pick([1000, 100_000])),
    () => `../../etc/passwd-${random.int(1e6)}`,
    () => `'; DROP TABLE sessions; --${random.int(1e6)}`,
    () => `%s%n${random.int(1e6)}`,
    () => `__proto__${random.int(10)}`,
    () => `\u0000nul-${random.int(1e6)}`,
  ])();
}

/**
 * An id that is not a session id: `{ value, why, category }`. Ids with lone surrogates are their
 * own category (the engine sees them through UTF-8, where they are all U+FFFD).
 */
export function malformedId(random) {
  return random.pick([
    () => ({ value: undefined, why: 'no id' }),
    () => ({ value: null, why: 'null' }),
    () => ({ value: '', why: 'an empty string' }),
    () => ({ value: random.int(1000), why: 'a number' }),
    () => ({ value: NaN, why: 'NaN' }),
    () => ({ value: 1n, why: 'a BigInt' }),
    () => ({ value: true, why: 'a boolean' }),
    () => ({ value: Symbol('id'), why: 'a symbol' }),
    () => ({ value: () => 'id', why: 'a function' }),
    () => ({ value: {}, why: 'an object' }),
    () => ({ value: ['a'], why: 'an array' }),
    () => ({ value: { toString: () => 'idle' }, why: 'an object whose toString names a session' }),
    () => ({ value: new String('idle'), why: 'a String object' }),
    () => ({ value: new Proxy({}, { get: () => { throw new Error('id proxy'); } }), why: 'a Proxy that throws' }),
  ])();
}

/** An id with a lone surrogate: the same, seen through UTF-8, as an id with U+FFFD in its place. */
export function loneSurrogateId(prefix, random) {
  return `${prefix}${String.fromCharCode(random.between(0xd800, 0xdfff))}`;
}

// ─── Messages and continuations ─────────────────────────────────────────────────────────────────

/** A UIMessage from the user that send() accepts. */
export function validUserMessage(random, id = `m-${random.int(1e9)}`) {
  return { id, role: 'user', parts: [{ type: 'text', text: randomText(random, random.between(1, 20)) }] };
}

/** A message of the wrong shape, or with a poison inside: `{ value, why }`. */
export function malformedMessage(random, { role = 'user' } = {}) {
  const base = () => ({ id: `m-${random.int(1e9)}`, role, parts: [{ type: 'text', text: 'hello' }] });
  return random.pick([
    () => ({ value: undefined, why: 'no message' }),
    () => ({ value: null, why: 'null' }),
    () => ({ value: random.int(100), why: 'a number' }),
    () => ({ value: true, why: 'a boolean' }),
    () => ({ value: 2n, why: 'a BigInt' }),
    () => ({ value: Symbol('m'), why: 'a symbol' }),
    () => ({ value: () => 'hi', why: 'a function' }),
    () => ({ value: [], why: 'an array' }),
    () => ({ value: loneSurrogate(random), why: 'text with a lone surrogate' }),
    () => ({ value: { ...base(), role: random.pick([undefined, null, 1, 'tool', 'USER', '', {}]) }, why: 'a bad role' }),
    () => ({ value: { ...base(), role: random.pick(role === 'user' ? ['assistant', 'system'] : ['user', 'system']) }, why: 'the wrong role', wrongRole: true }),
    () => ({ value: { ...base(), parts: random.pick([undefined, null, 'text', 1, {}, { 0: { type: 'text', text: 'x' } }]) }, why: 'parts not an array' }),
    () => ({ value: { ...base(), parts: [random.pick([null, 1, 'text', [], true])] }, why: 'a part that is not an object' }),
    () => ({ value: { ...base(), parts: [{ type: random.pick([undefined, null, 1, {}, ['text']]) }] }, why: 'a part type that is not a string' }),
    () => ({ value: { ...base(), parts: [{ type: 'text', text: random.pick([undefined, null, 1, {}, ['x']]) }] }, why: 'a text part without a string text' }),
    () => ({ value: { ...base(), id: random.pick([1, null, {}, [], true]) }, why: 'an id that is not a string' }),
    () => ({ value: { ...base(), parts: [{ type: 'text', text: 'hi', extra: nested(70) }] }, why: 'a part nested 70 deep' }),
    () => ({ value: { ...base(), metadata: nested(random.pick([66, 100])) }, why: 'metadata nested too deep' }),
    () => {
      const { value, why } = poisoned(random);
      const message = base();
      Object.defineProperty(message, random.pick(['metadata', 'x', ...POLLUTION_KEYS]), { value, enumerable: true });
      return { value: message, why: `${why} in the message` };
    },
    () => {
      const { value, why } = poisoned(random);
      const message = base();
      message.parts[0] = { type: 'text', text: 'hi', providerMetadata: value };
      return { value: message, why: `${why} in a part` };
    },
    () => ({ value: { ...base(), parts: [{ type: 'text', text: loneSurrogate(random) }] }, why: 'a part text with a lone surrogate' }),
    () =>
      random.chance(0.2)
        ? { value: { ...base(), role: 'tool', parts: [{ type: 'text', text: hugeString(random) }] }, why: 'a huge text with a bad role' }
        : { value: { ...base(), role: 'tool' }, why: 'a bad role' },
    () => (random.chance(0.2) ? { value: `${hugeString(random)}\udc00`, why: 'a huge text ending in a lone surrogate' } : { value: 'x\udc00', why: 'a lone surrogate' }),
  ])();
}

/** Answers of the wrong shape for continue(): `{ value, why, expect }`. */
export function malformedContinueOptions(random) {
  const approval = (over) => ({ type: 'tool-approval-response', approvalId: `a-${random.int(1e6)}`, approved: true, ...over });
  const result = (over) => ({ type: 'tool-result', toolCallId: `c-${random.int(1e6)}`, toolName: 't', output: { type: 'text', value: 'x' }, ...over });
  const input = ['SessionInputError'];
  return random.pick([
    () => ({ value: { toolApprovalContinuations: random.pick([{}, 'yes', 1, null, true]) }, why: 'toolApprovalContinuations not an array', expect: input }),
    () => ({ value: { toolResultContinuations: random.pick([{}, 'yes', 1, null, true]) }, why: 'toolResultContinuations not an array', expect: input }),
    () => ({ value: { toolApprovalContinuations: [random.pick([null, 1, 'a', [], true])] }, why: 'an approval answer that is not an object', expect: input }),
    () => ({ value: { toolApprovalContinuations: [approval({ approvalId: random.pick([undefined, null, 1, {}, []]) })] }, why: 'approvalId not a string', expect: input }),
    () => ({ value: { toolApprovalContinuations: [approval({ approved: random.pick([undefined, null, 'true', 1, 0, {}]) })] }, why: 'approved not a boolean', expect: input }),
    () => ({ value: { toolApprovalContinuations: [approval({ reason: random.pick([1, {}, [], true]) })] }, why: 'reason not a string', expect: input }),
    () => ({ value: { toolResultContinuations: [random.pick([null, 1, 'a', [], true])] }, why: 'a tool result that is not an object', expect: input }),
    () => ({ value: { toolResultContinuations: [result({ toolCallId: random.pick([undefined, null, 1, {}, []]) })] }, why: 'toolCallId not a string', expect: input }),
    () => ({ value: { toolResultContinuations: [result({ output: undefined })] }, why: 'a tool result without output', expect: input }),
    () => {
      const { value, why } = poisoned(random, { minDepth: 140 });
      return { value: { toolResultContinuations: [result({ output: value })] }, why: `${why} in a tool output`, expect: input };
    },
    () => {
      const { value, why } = poisoned(random, { minDepth: 140 });
      return { value: { toolApprovalContinuations: [approval({ providerMetadata: value })] }, why: `${why} in an approval answer`, expect: input };
    },
    () => {
      const { value, why, wrongRole } = malformedMessage(random, { role: 'assistant' });
      if (value === undefined) return { value: { message: null }, why: 'message null', expect: input };
      // A user message in place of the assistant's carries no answer: a conflict says so too.
      return { value: { message: value }, why: `message: ${why}`, expect: wrongRole ? input.concat('SessionConflictError') : input };
    },
    () => ({ value: { abortSignal: random.pick([{}, 'abort', 1, null, { aborted: false }]) }, why: 'abortSignal not an AbortSignal', expect: input }),
    // Well-formed, but answering nothing: a conflict, never a turn. (Answers to ids the session
    // does not wait for are no bad input: they reach the agent, as the reference passes them.)
    () => ({ value: {}, why: 'no answer at all', expect: ['SessionConflictError'] }),
  ])();
}

// ─── Per entry point ────────────────────────────────────────────────────────────────────────────

/**
 * The categories of input that the package does not yet answer with a typed error, or answers
 * wrongly: the main fuzz leaves them out (so that it guards everything else). Empty: the bugs
 * found (reliability-regressions.test.mjs) are fixed, and the fuzz covers every category.
 */
export const KNOWN_BUG_CATEGORIES = [];

/**
 * The entry points and their generators. `context` is what the fuzz made before: `{ ids: { idle,
 * awaiting, suspended, closed, replacement }, store, validOptions() }`. Each generator gives a
 * case `{ category, why, args, expect }`.
 */
export const ENTRY_POINTS = {
  createSessionManager(random, context) {
    const valid = context.validOptions();
    const input = ['SessionInputError'];
    const choice = random.int(16);
    const set = (name, value, why, category = 'bad-option') => {
      const options = { ...valid, [name]: value };
      return { category, why: `${name}: ${why}`, args: [options], expect: input };
    };
    switch (choice) {
      case 0:
        return { category: 'bad-options', why: 'options not an object', args: [random.pick([undefined, null, 1, 'o', true, Symbol('o'), () => valid])], expect: input };
      case 1:
        return { category: 'bad-option', why: 'an unknown option', args: [{ ...valid, [random.pick(['agents', 'sandbox', 'stores', 'timeout', '__proto__x', 'checkpointIntervalMs'])]: 1 }], expect: input };
      case 2:
        return set('agent', random.pick([undefined, null, 1, 'agent', {}, { createSession() {} }]), 'not a function');
      case 3:
        return set('sandboxes', random.pick([undefined, null, 1, 'x', {}, { acquire: 1 }, []]), 'not SessionSandboxes');
      case 4:
        if (random.chance(0.15)) return set('store', null, 'null', 'null-store-option');
        return set('store', random.pick([1, 'x', {}, { save() {} }, { save() {}, get() {}, list() {}, getResumeState() {}, delete: 1 }]), 'not a SessionStore');
      case 5: {
        const name = random.pick(['idleTimeoutMs', 'closeSuspendedAfterMs', 'turnTimeoutMs']);
        return set(name, random.pick([-1, -0.5, -1e9, '10', {}, [], true, 1n, 2e15]), 'not a number of milliseconds, zero or more');
      }
      case 6: {
        const name = random.pick(['idleTimeoutMs', 'closeSuspendedAfterMs', 'turnTimeoutMs']);
        return set(name, random.pick([NaN, -Infinity]), 'NaN or -Infinity', 'non-finite-number-option');
      }
      case 7:
        return set('suspendIdleWhenFull', random.pick([1, 0, 'true', {}, [], 1n]), 'not a boolean');
      case 8: {
        const name = random.pick(['approve', 'generateId', 'errorMessage', 'onError']);
        return set(name, random.pick([null, 1, 'f', {}, [], true]), 'not a function');
      }
      case 9:
        return set('sandboxes', { acquire: async () => ({}), capacity: random.pick([0, -1, 1.5, '2', {}, 1n, 2 ** 33]) }, 'a capacity that is not a whole number, one or more');
      case 10:
        return set('sandboxes', { acquire: async () => ({}), capacity: random.pick([NaN, -Infinity]) }, 'capacity NaN or -Infinity', 'non-finite-number-option');
      case 11: {
        const name = random.pick(['agent', 'sandboxes', 'store', 'idleTimeoutMs', 'approve']);
        const options = { ...valid };
        Object.defineProperty(options, name, { enumerable: true, get: () => { throw new Error('options getter boom'); } });
        return { category: 'throwing-options-object', why: `a getter that throws for ${name}`, args: [options], expect: input };
      }
      case 12:
        return { category: 'throwing-options-object', why: 'a Proxy whose traps throw', args: [new Proxy(valid, { ownKeys: () => { throw new Error('trap'); }, get: () => { throw new Error('trap'); } })], expect: input };
      case 13: {
        const { value, why } = poison(random);
        if (typeof value === 'string') return set('idleTimeoutMs', value, 'a string with a lone surrogate');
        return set(random.pick(['idleTimeoutMs', 'turnTimeoutMs']), value, why);
      }
      case 14:
        return set('sandboxes', { acquire: async () => ({}), capacity: poison(random).value }, 'a capacity that is not JSON');
      default:
        return { category: 'bad-options', why: 'an array', args: [[valid]], expect: input };
    }
  },

  create(random, context) {
    const input = ['SessionInputError'];
    const choice = random.int(11);
    if (choice === 0) return { category: 'null-options', why: 'create(null)', args: [null], expect: input };
    if (choice === 1) {
      return { category: 'primitive-create-options', why: 'create() of a primitive', args: [random.pick([1, 'options', true, 5n])], expect: input };
    }
    if (choice === 2) {
      const { value, why } = malformedId(random);
      if (value === undefined) return { category: 'bad-metadata', why: 'no id, metadata a BigInt', args: [{ metadata: 1n }], expect: input };
      return { category: 'bad-id', why: `id ${why}`, args: [{ id: value, metadata: {} }], expect: input };
    }
    if (choice === 3) {
      return { category: 'lone-surrogate-id', why: 'an id with a lone surrogate', args: [{ id: loneSurrogateId('fuzz-', random), metadata: {} }], expect: input };
    }
    if (choice === 4) {
      return { category: 'existing-id', why: 'the id of a session that exists', args: [{ id: random.pick(Object.values(context.ids)), metadata: {} }], expect: ['SessionConflictError'] };
    }
    if (choice >= 8) {
      const { value, why } = badHistory(random, choice - 8);
      return { category: 'bad-initial-history', why: `initialHistory ${why}`, args: [{ id: `new-${random.int(1e9)}`, metadata: {}, initialHistory: value }], expect: input };
    }
    const { value, why } = random.chance(0.2) ? { value: random.pick([Symbol('m'), () => 1]), why: 'a symbol or function' } : poisoned(random);
    return { category: 'bad-metadata', why: `metadata ${why}`, args: [{ id: `new-${random.int(1e9)}`, metadata: value }], expect: input };
  },

  get: idEntryPoint('get', ['undefined']),
  interrupt: idEntryPoint('interrupt', ['SessionNotFoundError']),
  suspend: idEntryPoint('suspend', ['SessionNotFoundError']),
  close: idEntryPoint('close', ['SessionNotFoundError']),
  delete: idEntryPoint('delete', ['SessionNotFoundError']),

  send(random, context) {
    const input = ['SessionInputError'];
    const target = context.ids.idle;
    const choice = random.int(10);
    if (choice === 0) {
      const { value, why } = malformedId(random);
      return { category: 'bad-id', why: `id ${why}`, args: [value, { message: validUserMessage(random) }], expect: input };
    }
    if (choice === 1) {
      return { category: 'unknown-id', why: 'an unknown id, a good message', args: [unknownId(random), { message: validUserMessage(random) }], expect: ['SessionNotFoundError'] };
    }
    if (choice === 2) {
      return { category: 'lone-surrogate-id', why: 'an id with a lone surrogate', args: [context.ids.replacement.replace('\ufffd', '\udc00'), { message: validUserMessage(random) }], expect: input.concat('SessionNotFoundError') };
    }
    if (choice === 3) return { category: 'null-options', why: 'send(id, null)', args: [target, null], expect: input };
    if (choice === 4) {
      const options = random.chance(0.5)
        ? Object.defineProperty({}, 'message', { enumerable: true, get: () => { throw new Error('send getter boom'); } })
        : new Proxy({}, { get: () => { throw new Error('send proxy boom'); } });
      return { category: 'throwing-options-object', why: 'options whose message getter throws', args: [target, options], expect: input };
    }
    if (choice === 5) {
      return { category: 'bad-prompt', why: 'a prompt that is not a string', args: [target, { message: 'hi', prompt: random.pick([1, null, {}, [], 1n, Symbol('p'), true]) }], expect: input };
    }
    if (choice === 6) {
      return { category: 'bad-signal', why: 'an abortSignal that is not one', args: [target, { message: 'hi', abortSignal: random.pick([{}, 'abort', 1, null, { aborted: true }, new AbortController()]) }], expect: input };
    }
    const { value, why } = malformedMessage(random);
    return { category: 'bad-message', why: `message ${why}`, args: [target, { message: value }], expect: input };
  },

  continue(random, context) {
    const input = ['SessionInputError'];
    const target = context.ids.awaiting;
    const choice = random.int(10);
    if (choice === 0) {
      const { value, why } = malformedId(random);
      return { category: 'bad-id', why: `id ${why}`, args: [value, { toolApprovalContinuations: [] }], expect: input };
    }
    if (choice === 1) return { category: 'unknown-id', why: 'an unknown id', args: [unknownId(random), {}], expect: ['SessionNotFoundError'] };
    if (choice === 2) return { category: 'null-options', why: 'continue(id, null)', args: [target, null], expect: input };
    if (choice === 3) {
      const options = Object.defineProperty({}, 'toolApprovalContinuations', { enumerable: true, get: () => { throw new Error('continue getter boom'); } });
      return { category: 'throwing-options-object', why: 'options whose getter throws', args: [target, options], expect: input };
    }
    if (choice === 4) {
      // An idle session waits for nothing: whatever the answers, a conflict or an input error.
      const { value, why } = malformedContinueOptions(random);
      return { category: 'bad-continuation', why: `to an idle session: ${why}`, args: [context.ids.idle, value], expect: ['SessionInputError', 'SessionConflictError'] };
    }
    const { value, why, expect } = malformedContinueOptions(random);
    return { category: 'bad-continuation', why, args: [target, value], expect };
  },

  update(random, context) {
    const input = ['SessionInputError'];
    const target = random.pick([context.ids.idle, context.ids.suspended, context.ids.closed]);
    const choice = random.int(9);
    if (choice === 0) {
      const { value, why } = malformedId(random);
      return { category: 'bad-id', why: `id ${why}`, args: [value, { metadata: {} }], expect: input };
    }
    if (choice === 1) return { category: 'unknown-id', why: 'an unknown id', args: [unknownId(random), { metadata: { a: 1 } }], expect: ['SessionNotFoundError'] };
    if (choice === 2) return { category: 'bad-changes', why: 'changes not { metadata }', args: [target, random.pick([undefined, null, 1, 'metadata', {}, [], { meta: 1 }])], expect: input };
    if (choice === 3) {
      const changes = random.chance(0.5)
        ? Object.defineProperty({}, 'metadata', { enumerable: true, get: () => { throw new Error('update getter boom'); } })
        : new Proxy({ metadata: 1 }, { get: () => { throw new Error('update proxy boom'); } });
      return { category: 'throwing-options-object', why: 'changes whose getter or get trap throws', args: [target, changes], expect: input };
    }
    if (choice === 4) {
      const { value, why } = poisoned(random);
      return { category: 'bad-metadata', why: `an updater giving ${why}`, args: [target, { metadata: () => value }], expect: input };
    }
    if (choice === 5) {
      return { category: 'throwing-updater', why: 'an updater that throws', args: [target, { metadata: () => { throw new Error('updater boom'); } }], expect: ['rethrown'] };
    }
    if (choice === 6) {
      return { category: 'bad-metadata', why: 'metadata a symbol', args: [target, { metadata: Symbol('m') }], expect: input };
    }
    const { value, why } = poisoned(random);
    return { category: 'bad-metadata', why: `metadata ${why}`, args: [target, { metadata: value }], expect: input };
  },

  subscribe(random) {
    return { category: 'bad-listener', why: 'a listener that is not a function', args: [random.pick([undefined, null, 1, 'f', {}, [], Symbol('l'), 1n])], expect: ['SessionInputError'] };
  },

  'store.save'(random, context) {
    const input = ['SessionInputError'];
    const record = () => ({ id: `store-${random.int(1e9)}`, status: 'idle', metadata: {}, createdAt: 1, updatedAt: 2, messages: [] });
    const choice = random.int(6);
    if (choice === 0) {
      return { category: 'store-non-string-argument', why: 'no record', args: [random.pick([undefined, Symbol('r'), () => 1])], expect: input };
    }
    if (choice === 1) {
      return { category: 'bad-record', why: 'a record of the wrong shape', args: [random.pick([null, 1, 'r', [], {}, { ...record(), status: 'sleeping' }, { ...record(), messages: 'none' }, { ...record(), createdAt: null }, { ...record(), updatedAt: {} }, { ...record(), turns: -1 }, { ...record(), usage: { inputTokens: 'many' } }, { ...record(), id: 1 }])], expect: input };
    }
    if (choice === 2) {
      // The store checks no depth of its own: past serde_json's 128 levels only.
      const { value, why } = poisoned(random, { minDepth: 140 });
      return { category: 'bad-record', why: `metadata ${why}`, args: [{ ...record(), metadata: value }], expect: input };
    }
    if (choice === 3) {
      const { value, why } = poisoned(random, { minDepth: 140 });
      return { category: 'bad-record', why: `a resume state ${why}`, args: [record(), value], expect: input };
    }
    if (choice === 4) {
      return { category: 'bad-record', why: 'a record id with a lone surrogate', args: [{ ...record(), id: loneSurrogateId('store-', random) }], expect: input };
    }
    return { category: 'bad-record', why: 'messages nested too deep', args: [{ ...record(), messages: [nested(200)] }], expect: input };
  },
  'store.get': storeIdEntryPoint(['undefined']),
  'store.getResumeState': storeIdEntryPoint(['undefined']),
  'store.delete': storeIdEntryPoint(['undefined']),

  createSqliteSessionStore(random, context) {
    const input = ['SessionInputError'];
    const choice = random.int(4);
    if (choice === 0) return { category: 'bad-store-options', why: 'path not a string', args: [{ path: random.pick([undefined, null, 1, {}, [], '', 1n]) }], expect: input };
    if (choice === 1 && random.chance(0.1)) {
      // An empty key given on purpose must not quietly mean "no encryption".
      return { category: 'empty-encryption-key', why: 'encryptionKey: an empty string', args: [{ path: context.path, encryptionKey: '' }], expect: input };
    }
    if (choice === 1) {
      return { category: 'bad-store-options', why: 'a key that is not 32 bytes', args: [{ path: context.path, encryptionKey: random.pick(['short', 'zz'.repeat(32), 'A'.repeat(44), new Uint8Array(31), new Uint8Array(33), 1, {}, []]) }], expect: input.concat('SessionError') };
    }
    if (choice === 2) return { category: 'null-options', why: 'createSqliteSessionStore(null)', args: [null], expect: input };
    return { category: 'bad-store-options', why: 'a path where no file can be', args: [{ path: random.pick(['/proc/self/nonexistent/x.db', `${context.path}/inside-a-file.db`, '/']) }], expect: ['SessionError'] };
  },
};

function idEntryPoint(method, unknownAnswer) {
  return (random, context) => {
    const choice = random.int(3);
    if (choice === 0) return { category: 'unknown-id', why: 'an unknown id', args: [unknownId(random)], expect: unknownAnswer };
    if (choice === 1) {
      return { category: 'lone-surrogate-id', why: 'an id with a lone surrogate', args: [context.ids.replacement.replace('\ufffd', random.pick(['\ud800', '\udc00', '\udbff']))], expect: ['SessionInputError'].concat(unknownAnswer) };
    }
    const { value, why } = malformedId(random);
    return { category: 'bad-id', why: `id ${why}`, args: [value], expect: ['SessionInputError'] };
  };
}

function storeIdEntryPoint(unknownAnswer) {
  return (random, context) => {
    const choice = random.int(3);
    if (choice === 0) return { category: 'unknown-id', why: 'an unknown id', args: [unknownId(random)], expect: unknownAnswer };
    if (choice === 1) {
      return { category: 'lone-surrogate-id', why: 'an id with a lone surrogate', args: [context.ids.replacement.replace('\ufffd', '\udfff')], expect: ['SessionInputError'].concat(unknownAnswer) };
    }
    const { value, why } = malformedId(random);
    // The store is a lower layer: get('') may well answer that no session has that id.
    if (value === '') return { category: 'bad-id', why: `id ${why}`, args: [value], expect: ['SessionInputError'].concat(unknownAnswer) };
    return { category: 'store-non-string-argument', why: `id ${why}`, args: [value], expect: ['SessionInputError'] };
  };
}

// ─── Answers ────────────────────────────────────────────────────────────────────────────────────

/** The name of what a call gave, to compare with a case's `expect`. */
export function answerName(outcome, errors) {
  if (!outcome.threw) return outcome.value === undefined ? 'undefined' : 'a value';
  const error = outcome.error;
  for (const name of ['SessionInputError', 'SessionNotFoundError', 'SessionConflictError', 'SessionCapacityError']) {
    if (errors[name].isInstance(error)) return name;
  }
  if (errors.SessionError.isInstance(error)) return 'SessionError';
  return `raw ${error?.constructor?.name ?? typeof error}`;
}

/** p50, p99 and max of `samples` (milliseconds). */
export function percentiles(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { n: sorted.length, p50: at(0.5), p99: at(0.99), max: sorted.at(-1) ?? 0 };
}

/** Everything an error carries, own properties and cause included, as text: for secret searches. */
export function deepText(value, seen = new Set()) {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' && typeof value !== 'function') return String(value);
  if (seen.has(value)) return '';
  seen.add(value);
  const parts = [];
  if (value instanceof Error) parts.push(String(value.name), String(value.message), String(value.stack));
  for (const key of Reflect.ownKeys(value)) {
    let inner;
    try {
      inner = value[key];
    } catch {
      continue;
    }
    parts.push(String(key), deepText(inner, seen));
  }
  if (value instanceof Error && value.cause !== undefined) parts.push(deepText(value.cause, seen));
  return parts.join(' ');
}

/** SHA-256 of the store's files (the database and its WAL) as they are on disk. */
export function fileDigest(path) {
  const hash = createHash('sha256');
  for (const file of [path, `${path}-wal`]) {
    hash.update(file);
    hash.update(existsSync(file) ? readFileSync(file) : Buffer.alloc(0));
  }
  return hash.digest('hex');
}

// ─── The second SQLite reader ───────────────────────────────────────────────────────────────────

/** A Node that has `node:sqlite`: this one (22.5+), else Node 24 from the npm registry. */
export async function nodeWithSqlite() {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major > 22 || (major === 22 && minor >= 5)) return process.execPath;
  const { nodeBinary } = await import('../../scripts/lib.mjs');
  return nodeBinary(24);
}

/**
 * The second reader: a long-lived child (crash-sqlite.mjs) that answers requests one at a time.
 * `await reader.ask({ op: 'check', path })`; `reader.close()`.
 */
export async function openSqliteReader() {
  const node = await nodeWithSqlite();
  const child = spawn(node, ['--no-warnings', join(PROGRAMS, 'crash-sqlite.mjs')], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const lines = createInterface({ input: child.stdout });
  const waiting = [];
  lines.on('line', (line) => waiting.shift()?.resolve(JSON.parse(line)));
  child.on('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`the sqlite reader exited (${code}): ${stderr}`));
  });
  return {
    ask(request) {
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        child.stdin.write(`${JSON.stringify(request)}\n`);
      });
    },
    close() {
      child.stdin.end();
      return new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
    },
  };
}
