// The UI message stream of the Rust engine against the real `ai` package (7.0.112): the recorded
// vectors, thousands of generated chunk sequences read by both `readUIMessageStream` and the
// addon (every snapshot, the final message and the errors must be identical, key order included);
// and the SSE body our `toUIMessageStreamResponse()` (js/sse.js) writes for the recorded vectors
// and generated sequences, byte for byte that of `createUIMessageStreamResponse`, headers too.
//
// UI_FUZZ_CASES sets how many sequences (default 2000); UI_FUZZ_SEED the first seed.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { createUIMessageStreamResponse, readUIMessageStream, UI_MESSAGE_STREAM_HEADERS } from 'ai';

// `tool-input-error` on a static tool logs a deprecation warning for `rawInput`: not ours to read.
globalThis.AI_SDK_LOG_WARNINGS = false;

const require = createRequire(import.meta.url);
const binding = require('../binding.js');
const { toUIMessageStreamResponse } = require('../js/sse.js');

// A tenth of them in the inner loop (HARNESS_SESSIONS_QUICK=1, `npm run test:quick`).
const CASES = Number(process.env.UI_FUZZ_CASES ?? (process.env.HARNESS_SESSIONS_QUICK === '1' ? 200 : 2000));
const FIRST_SEED = Number(process.env.UI_FUZZ_SEED ?? 20250101);

const fixturesDir = new URL('./fixtures/ui-message-stream/', import.meta.url);
const fixtures = readdirSync(fixturesDir)
  .filter((name) => name.endsWith('.json'))
  .sort()
  .map((name) => ({ file: name, ...JSON.parse(readFileSync(new URL(name, fixturesDir), 'utf8')) }));

/** A deep copy through JSON: what both readers get, so `undefined` means the same to both. */
const viaJson = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

/** The real reader: every snapshot (as JSON text), the last one, and the error messages. */
async function readReal(inputMessage, chunks) {
  const errors = [];
  const snapshots = [];
  const copies = viaJson(chunks);
  const stream = new ReadableStream({
    start(controller) {
      for (const chunk of copies) controller.enqueue(chunk);
      controller.close();
    },
  });
  const messages = readUIMessageStream({
    message: inputMessage == null ? undefined : viaJson(inputMessage),
    stream,
    onError: (error) => errors.push(error instanceof Error ? error.message : String(error)),
  });
  for await (const message of messages) snapshots.push(JSON.stringify(message));
  return { final: snapshots.length > 0 ? snapshots[snapshots.length - 1] : 'null', snapshots, errors };
}

/** The addon, in the same shape. */
function readRust(inputMessage, chunks) {
  const out = JSON.parse(
    binding.accumulateUiMessage(
      inputMessage == null ? null : JSON.stringify(inputMessage),
      JSON.stringify(chunks),
      true,
    ),
  );
  assert.equal(out.snapshotCount, out.snapshots.length);
  return {
    final: JSON.stringify(out.message),
    snapshots: out.snapshots.map((s) => JSON.stringify(s)),
    errors: out.errors,
  };
}

/** What differs between the two readings, or null. */
function difference(real, rust) {
  if (real.final !== rust.final) return `final message\n  real: ${real.final}\n  rust: ${rust.final}`;
  if (JSON.stringify(real.errors) !== JSON.stringify(rust.errors)) {
    return `errors\n  real: ${JSON.stringify(real.errors)}\n  rust: ${JSON.stringify(rust.errors)}`;
  }
  if (real.snapshots.length !== rust.snapshots.length) {
    return `snapshot count: real ${real.snapshots.length}, rust ${rust.snapshots.length}`;
  }
  for (let i = 0; i < real.snapshots.length; i++) {
    if (real.snapshots[i] !== rust.snapshots[i]) {
      return `snapshot ${i}\n  real: ${real.snapshots[i]}\n  rust: ${rust.snapshots[i]}`;
    }
  }
  return null;
}

async function compare({ input, chunks }) {
  return difference(await readReal(input, chunks), readRust(input, chunks));
}

/** The smallest case (chunks and input parts dropped one at a time) that still differs. */
async function shrink(failing) {
  let current = failing;
  let progress = true;
  while (progress) {
    progress = false;
    const candidates = [];
    if (current.input != null) candidates.push({ ...current, input: null });
    for (let i = current.chunks.length - 1; i >= 0; i--) {
      candidates.push({ ...current, chunks: current.chunks.filter((_, j) => j !== i) });
    }
    const parts = current.input?.parts;
    if (Array.isArray(parts)) {
      for (let i = parts.length - 1; i >= 0; i--) {
        candidates.push({ ...current, input: { ...current.input, parts: parts.filter((_, j) => j !== i) } });
      }
    }
    for (const candidate of candidates) {
      let differs;
      try {
        differs = (await compare(candidate)) !== null;
      } catch {
        differs = false;
      }
      if (differs) {
        current = candidate;
        progress = true;
        break;
      }
    }
  }
  return current;
}

// ---------------------------------------------------------------------------------------------
// A seeded generator of realistic chunk sequences.

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generator(seed) {
  const random = mulberry32(seed);
  const int = (n) => Math.floor(random() * n);
  const chance = (p) => random() < p;
  const pick = (items) => items[int(items.length)];
  const maybe = (p, make) => (chance(p) ? make() : undefined);

  const STRINGS = [
    '', 'hello', 'Hello, world.', 'héllo wörld', 'line\nbreak', 'quote " and \\ backslash', 'tab\tcr\r',
    '\u0001\u001f control', 'emoji 😀 and 𝄞', 'sep \u2028 \u2029', 'ünïcödé', '<b>html</b>', '{"not":"json"}',
  ];
  const KEYS = ['a', 'b', 'city', 'path', 'zeta', 'Δ', '1', '10', '2', 'nested', 'list', 'constructor', '__proto__'];
  const NUMBERS = [
    0, 1, -1, 42, 3.5, -0.25, 1e21, 1e-7, 123e-20, 0.1 + 0.2, 2 ** 53, 2 ** 53 + 2, 2 ** 60, -(2 ** 62),
    1e300, 5e-324, 1.7976931348623157e308, 100, 0.000001, 123456789.123,
  ];

  const number = () => (chance(0.5) ? pick(NUMBERS) : chance(0.5) ? random() * 10 ** (int(30) - 10) : int(1000) - 500);
  const text = () => (chance(0.7) ? pick(STRINGS) : randomAscii());
  function randomAscii() {
    let s = '';
    const n = int(12);
    for (let i = 0; i < n; i++) s += String.fromCharCode(32 + int(95));
    return s;
  }
  /** An object with own keys, `__proto__` included. */
  function object(entries) {
    const out = {};
    for (const [key, value] of entries) {
      Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  function value(depth = 0) {
    const r = random();
    if (depth > 3 || r < 0.3) return pick([null, true, false, number(), text(), number()]);
    if (r < 0.5) return Array.from({ length: int(4) }, () => value(depth + 1));
    return object(Array.from({ length: int(5) }, () => [pick(KEYS), value(depth + 1)]));
  }
  /** A plain object of data (no prototype keys), for tool inputs and metadata. */
  function record(depth = 0) {
    return object(
      Array.from({ length: 1 + int(3) }, () => [
        pick(KEYS.slice(0, 11)),
        depth < 2 && chance(0.3) ? record(depth + 1) : value(3),
      ]),
    );
  }
  const metadata = () => (chance(0.85) ? record() : pick([5, 'str', true, [1, 2], null, { nested: { a: 1 } }]));
  const providerMetadata = () => ({ [pick(['openai', 'anthropic'])]: { itemId: randomAscii(), n: int(9) } });
  const extra = () => (chance(0.05) ? { [pick(['x-extra', 'note', 'zz'])]: value(2) } : {});

  const toolNames = ['weather', 'bash', 'read_file', 'deleteFile', 'multi-part-name', 'search'];

  /** A tool input's JSON text, cut into deltas (between code points, as a provider's decoded
   * stream cuts them); sometimes truncated or broken. */
  function inputDeltas(input) {
    let json = Array.from(JSON.stringify(input, null, chance(0.3) ? 2 : undefined) ?? 'null');
    if (chance(0.1)) json = json.slice(0, int(json.length + 1));
    if (chance(0.05)) {
      json = Array.from(pick(['{bad', '{"a":tru', '[1,2', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{}}}', '  ', '"str', '-', '{"a":1e5', '{"a":"\\u00', '{"a":"😀', '[nul', '{"a":-']));
    }
    const deltas = [];
    let at = 0;
    while (at < json.length) {
      const n = 1 + int(Math.max(1, Math.ceil(json.length / 3)));
      deltas.push(json.slice(at, at + n).join(''));
      at += n;
    }
    if (deltas.length === 0 && chance(0.5)) deltas.push('');
    return deltas;
  }

  let counter = 0;
  const fresh = (prefix) => `${prefix}${++counter}`;

  function textBlock(type) {
    const id = chance(0.2) ? pick(['t1', 't2', 'r1']) : fresh(type === 'text' ? 't' : 'r');
    const out = [{ type: `${type}-start`, id, providerMetadata: maybe(0.15, providerMetadata), ...extra() }];
    for (let i = int(5); i > 0; i--) {
      out.push({ type: `${type}-delta`, id, delta: text(), providerMetadata: maybe(0.1, providerMetadata) });
    }
    if (chance(0.9)) out.push({ type: `${type}-end`, id, providerMetadata: maybe(0.1, providerMetadata) });
    return out;
  }

  function toolBlock(state) {
    const toolCallId = chance(0.1) ? pick(['c1', 'c2']) : fresh('call');
    const toolName = pick(toolNames);
    const dynamic = maybe(0.4, () => chance(0.6));
    const providerExecuted = maybe(0.25, () => chance(0.7));
    const title = maybe(0.15, () => pick(['Weather', 'Run', 'A title']));
    const toolMetadata = maybe(0.1, () => ({ origin: pick(['mcp', 'local']) }));
    const input = chance(0.9) ? record() : value();
    const out = [];
    if (chance(0.6)) {
      out.push({ type: 'tool-input-start', toolCallId, toolName, providerExecuted, providerMetadata: maybe(0.1, providerMetadata), toolMetadata, dynamic, title });
      for (const inputTextDelta of inputDeltas(input)) out.push({ type: 'tool-input-delta', toolCallId, inputTextDelta });
    }
    const outcome = random();
    if (outcome < 0.8) {
      out.push({
        type: 'tool-input-available', toolCallId, toolName, input,
        providerExecuted: chance(0.7) ? providerExecuted : maybe(0.5, () => chance(0.5)),
        providerMetadata: maybe(0.15, providerMetadata),
        toolMetadata: chance(0.7) ? maybe(0.5, () => toolMetadata) : maybe(0.5, () => ({ origin: 'late' })),
        dynamic: chance(0.93) ? dynamic : !dynamic,
        title: chance(0.6) ? maybe(0.5, () => title) : maybe(0.5, () => 'Late title'), ...extra(),
      });
    } else if (outcome < 0.95) {
      out.push({
        type: 'tool-input-error', toolCallId, toolName, input: chance(0.5) ? input : '{bad', errorText: 'Invalid input.',
        providerExecuted: chance(0.8) ? providerExecuted : maybe(0.5, () => true), providerMetadata: maybe(0.15, providerMetadata),
        toolMetadata, dynamic: chance(0.85) ? dynamic : !dynamic, title,
      });
      const after = random();
      if (after < 0.3) out.push({ type: 'tool-output-error', toolCallId, errorText: 'failed', dynamic, providerMetadata: maybe(0.2, providerMetadata) });
      else if (after < 0.5) out.push({ type: 'tool-output-available', toolCallId, output: value(1), providerExecuted: maybe(0.3, () => true) });
      else if (after < 0.6) out.push({ type: 'tool-approval-request', approvalId: fresh('ap'), toolCallId });
      return out;
    } else {
      return out;
    }
    if (chance(0.35)) {
      const approvalId = fresh('ap');
      out.push({
        type: 'tool-approval-request', approvalId, toolCallId,
        approvalDescriptor: maybe(0.1, () => (chance(0.8) ? { action: 'delete' } : null)),
        reason: maybe(0.3, () => 'It deletes files.'), isAutomatic: maybe(0.2, () => chance(0.5)),
        signature: maybe(0.1, () => 'sig'),
      });
      if (chance(0.3)) {
        const approved = chance(0.6);
        out.push({ type: 'tool-approval-response', approvalId, approved, reason: maybe(0.4, () => (approved ? 'ok' : 'no')), providerExecuted: maybe(0.5, () => true), providerMetadata: maybe(0.1, providerMetadata) });
        if (!approved) {
          if (chance(0.6)) out.push({ type: 'tool-output-denied', toolCallId });
          return out;
        }
      } else {
        state.pendingApprovals.push(toolCallId);
        return out;
      }
    }
    const result = random();
    if (result < 0.6) {
      for (let i = chance(0.3) ? 1 + int(2) : 0; i > 0; i--) {
        out.push({
          type: 'tool-output-available', toolCallId, output: value(1), preliminary: true, dynamic,
          providerExecuted: maybe(0.2, () => chance(0.5)), providerMetadata: maybe(0.2, providerMetadata),
        });
      }
      out.push({
        type: 'tool-output-available', toolCallId, output: chance(0.1) ? null : value(1),
        providerExecuted: maybe(0.3, () => providerExecuted ?? true), providerMetadata: maybe(0.15, providerMetadata),
        toolMetadata: maybe(0.1, () => toolMetadata), preliminary: maybe(0.1, () => false), dynamic, ...extra(),
      });
    } else if (result < 0.85) {
      out.push({ type: 'tool-output-error', toolCallId, errorText: pick(['exit 1', 'timeout']), providerExecuted, providerMetadata: maybe(0.15, providerMetadata), dynamic });
    }
    return out;
  }

  function singleChunk() {
    const r = random();
    if (r < 0.12) return { type: 'source-url', sourceId: fresh('s'), url: 'https://example.com/' + int(9), title: maybe(0.6, () => pick(STRINGS)), providerMetadata: maybe(0.2, providerMetadata) };
    if (r < 0.2) return { type: 'source-document', sourceId: fresh('d'), mediaType: 'application/pdf', title: 'Doc', filename: maybe(0.5, () => 'a.pdf'), providerMetadata: maybe(0.2, providerMetadata) };
    if (r < 0.3) return { type: pick(['file', 'reasoning-file']), mediaType: 'image/png', url: 'data:image/png;base64,iVBORw0K', providerMetadata: maybe(0.3, providerMetadata) };
    if (r < 0.36) return { type: 'custom', kind: 'openai.compaction', providerMetadata: maybe(0.5, providerMetadata) };
    if (r < 0.7) {
      return {
        type: `data-${pick(['progress', 'log', 'status'])}`,
        id: maybe(0.6, () => pick(['p1', 'p2', 'p3'])),
        data: chance(0.95) ? value(1) : undefined,
        transient: maybe(0.25, () => chance(0.6)),
        ...extra(),
      };
    }
    if (r < 0.82) return { type: 'message-metadata', messageMetadata: chance(0.9) ? metadata() : undefined };
    if (r < 0.9) return { type: 'error', errorText: pick(['An error occurred.', 'Rate limited.']) };
    if (r < 0.95) return { type: pick(['some-future-chunk', 'tool-input-end', 'raw']), payload: value(1) };
    return { type: 'finish-step' };
  }

  /** Interleaves blocks: each keeps its order, the blocks run side by side. */
  function interleave(blocks) {
    const out = [];
    const live = blocks.filter((b) => b.length > 0).map((b) => ({ b, i: 0 }));
    while (live.length > 0) {
      const k = chance(0.6) ? 0 : int(live.length);
      const cur = live[k];
      out.push(cur.b[cur.i++]);
      if (cur.i >= cur.b.length) live.splice(k, 1);
    }
    return out;
  }

  function violation(state) {
    return pick([
      () => ({ type: 'text-delta', id: 'nope', delta: 'x' }),
      () => ({ type: 'text-end', id: 'nope' }),
      () => ({ type: 'reasoning-delta', id: 'nope', delta: 'x' }),
      () => ({ type: 'reasoning-end', id: 'nope' }),
      () => ({ type: 'tool-input-delta', toolCallId: 'nope', inputTextDelta: '{' }),
      () => ({ type: 'tool-output-available', toolCallId: 'nope', output: 1 }),
      () => ({ type: 'tool-output-error', toolCallId: 'nope', errorText: 'x' }),
      () => ({ type: 'tool-output-denied', toolCallId: 'nope' }),
      () => ({ type: 'tool-approval-request', approvalId: 'apx', toolCallId: 'nope' }),
      () => ({ type: 'tool-approval-response', approvalId: 'nope', approved: true }),
      () => ({ type: 'message-metadata', messageMetadata: { a: 1 } }),
      () => ({ type: 'tool-output-available', toolCallId: pick(state.toolIds.length ? state.toolIds : ['c1']), output: 'late' }),
    ])();
  }

  /** An assistant message the stream continues, with the tool parts that wait for answers. */
  function inputMessage(state) {
    const parts = [{ type: 'step-start' }];
    if (chance(0.5)) parts.push({ type: 'reasoning', id: 'r0', text: 'Thinking.', state: 'done' });
    if (chance(0.6)) parts.push({ type: 'text', text: 'Let me check.', state: chance(0.8) ? 'done' : 'streaming' });
    for (let n = 1 + int(3); n > 0; n--) {
      const toolCallId = fresh('in');
      const dynamic = chance(0.25);
      const head = dynamic
        ? (chance(0.05) ? { type: 'dynamic-tool', toolCallId } : { type: 'dynamic-tool', toolName: pick(toolNames), toolCallId })
        : { type: `tool-${pick(toolNames)}`, toolCallId };
      const kind = random();
      if (kind < 0.45) {
        const approved = chance(0.7);
        parts.push({ ...head, state: 'approval-responded', input: record(), approval: { id: `ap-${toolCallId}`, approved, ...(chance(0.3) ? { reason: 'because' } : {}) }, ...(chance(0.3) ? { title: 'T' } : {}) });
        state.continuations.push({ toolCallId, approvalId: `ap-${toolCallId}`, approved, responded: true });
      } else if (kind < 0.75) {
        parts.push({ ...head, state: 'approval-requested', input: record(), approval: { id: `ap-${toolCallId}`, ...(chance(0.3) ? { isAutomatic: true } : {}) }, ...(chance(0.2) ? { providerExecuted: true } : {}) });
        state.continuations.push({ toolCallId, approvalId: `ap-${toolCallId}`, approved: chance(0.7), responded: false });
      } else if (kind < 0.9) {
        parts.push({ ...head, state: 'input-available', input: record(), ...(chance(0.3) ? { callProviderMetadata: providerMetadata() } : {}) });
        state.continuations.push({ toolCallId, approved: true, responded: true });
      } else if (kind < 0.95) {
        parts.push({ ...head, state: 'output-available', input: record(), output: value(1), ...(chance(0.3) ? { providerExecuted: true } : {}) });
        state.continuations.push({ toolCallId, approved: true, responded: true });
      } else {
        parts.push({ ...head, state: 'output-error', ...(chance(0.5) ? { input: undefined, rawInput: '{bad' } : { input: record() }), errorText: 'Invalid input.' });
        state.continuations.push({ toolCallId, approved: true, responded: true });
      }
      state.toolIds.push(toolCallId);
    }
    if (chance(0.3)) parts.push({ type: 'data-progress', id: 'p1', data: value(1) });
    if (chance(0.15)) parts.push({ type: 'step-start' });
    const message = { id: 'm-in', role: 'assistant', parts };
    if (chance(0.3)) {
      Object.defineProperty(message, 'metadata', { value: metadata(), enumerable: true, writable: true, configurable: true });
    }
    if (chance(0.1)) return { parts, role: 'assistant', id: 'm-in' }; // another key order
    return message;
  }

  return function makeCase() {
    const state = { pendingApprovals: [], toolIds: [], continuations: [] };
    let input = null;
    const r = random();
    if (r < 0.3) input = inputMessage(state);
    else if (r < 0.34) input = { id: 'u-1', role: 'user', parts: [{ type: 'text', text: 'Hi' }] };

    const chunks = [];
    if (chance(0.92)) {
      chunks.push({
        type: 'start',
        messageId: maybe(0.9, () => (input?.role === 'assistant' ? input.id : fresh('msg-'))),
        messageMetadata: maybe(0.3, metadata),
      });
    }
    for (const c of state.continuations) {
      if (c.approvalId !== undefined && (!c.responded || chance(0.2))) {
        if (chance(0.9)) chunks.push({ type: 'tool-approval-response', approvalId: c.approvalId, approved: c.approved, reason: maybe(0.3, () => 'said so'), providerExecuted: maybe(0.4, () => chance(0.5)) });
      }
      if (!c.approved) {
        if (chance(0.5)) chunks.push({ type: 'tool-output-denied', toolCallId: c.toolCallId });
      } else if (chance(0.8)) {
        if (chance(0.3)) {
          chunks.push({ type: 'tool-output-available', toolCallId: c.toolCallId, output: value(1), preliminary: true, providerMetadata: maybe(0.4, providerMetadata) });
        }
        chunks.push(chance(0.8)
          ? { type: 'tool-output-available', toolCallId: c.toolCallId, output: value(1), providerExecuted: maybe(0.3, () => chance(0.5)), providerMetadata: maybe(0.1, providerMetadata) }
          : { type: 'tool-output-error', toolCallId: c.toolCallId, errorText: 'exit 2', providerMetadata: maybe(0.1, providerMetadata) });
      }
    }
    if (input?.role === 'assistant' && chance(0.08)) chunks.push({ type: 'text-delta', id: 't-earlier', delta: 'more' });

    for (let steps = 1 + int(3); steps > 0; steps--) {
      if (chance(0.93)) chunks.push({ type: 'start-step' });
      const blocks = [];
      for (let n = int(6); n > 0; n--) {
        const k = random();
        if (k < 0.35) blocks.push(textBlock('text'));
        else if (k < 0.5) blocks.push(textBlock('reasoning'));
        else if (k < 0.8) blocks.push(toolBlock(state));
        else blocks.push([singleChunk()]);
      }
      chunks.push(...interleave(blocks));
      if (chance(0.08)) {
        chunks.push({ type: 'reset-step' });
        if (chance(0.7)) chunks.push(...textBlock('text'));
      }
      if (chance(0.85)) chunks.push({ type: 'finish-step' });
    }
    const end = random();
    if (end < 0.7) {
      chunks.push({ type: 'finish', finishReason: maybe(0.8, () => pick(['stop', 'tool-calls', 'length', 'error', 'other'])), messageMetadata: maybe(0.3, metadata) });
    } else if (end < 0.8) {
      chunks.push({ type: 'abort', reason: maybe(0.5, () => 'user') });
    } else if (end < 0.9) {
      chunks.push({ type: 'error', errorText: 'An error occurred.' });
    }
    if (chance(0.12)) {
      for (let n = 1 + int(2); n > 0; n--) chunks.splice(int(chunks.length + 1), 0, violation(state));
    }
    if (chance(0.03)) chunks.splice(int(chunks.length + 1), 0, { type: 'start', messageMetadata: 5 });
    // Some chunks with their keys in another order than the AI SDK writes them.
    const shuffled = chunks.map((chunk) => {
      if (!chance(0.05)) return chunk;
      const entries = Object.entries(chunk);
      for (let i = entries.length - 1; i > 0; i--) {
        const j = int(i + 1);
        [entries[i], entries[j]] = [entries[j], entries[i]];
      }
      return object(entries);
    });
    return { input: viaJson(input), chunks: viaJson(shuffled) };
  };
}

function generatedCases() {
  const cases = [];
  for (let i = 0; i < CASES; i++) {
    const seed = FIRST_SEED + i;
    cases.push({ seed, ...generator(seed)() });
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------

test('the recorded vectors come out of the addon as ai 7.0.112 reads them', async () => {
  assert.equal(fixtures.length, 9);
  for (const fixture of fixtures) {
    const expected = fixture.server_ai_7_0_112;
    const rust = readRust(fixture.inputMessage, fixture.chunks);
    assert.equal(rust.final, JSON.stringify(expected.final), `final of ${fixture.file}`);
    assert.deepEqual(rust.errors, expected.errors, `errors of ${fixture.file}`);
    assert.equal(rust.snapshots.length, expected.snapshots.length, `snapshots of ${fixture.file}`);
    // And the live reader agrees with the recording.
    const real = await readReal(fixture.inputMessage, fixture.chunks);
    assert.equal(real.final, JSON.stringify(expected.final), `live final of ${fixture.file}`);
  }
});

test('the comparison sees a difference when there is one', async () => {
  const { input, chunks } = fixtures.find((f) => f.file === 'text-reasoning.json');
  const real = await readReal(input, chunks);
  assert.equal(difference(real, readRust(input, chunks)), null);
  const tampered = readRust(input, chunks.slice(0, -1));
  assert.notEqual(difference(real, tampered), null);
  assert.notEqual(difference(real, { ...readRust(input, chunks), errors: ['x'] }), null);
});

test(`${CASES} generated chunk sequences read the same in the addon and in readUIMessageStream`, async (t) => {
  const cases = generatedCases();
  const kinds = new Map();
  let withErrors = 0;
  let continuations = 0;
  const errorKinds = new Map();
  const failures = [];
  for (const c of cases) {
    for (const chunk of c.chunks) kinds.set(chunk.type, (kinds.get(chunk.type) ?? 0) + 1);
    if (c.input?.role === 'assistant') continuations++;
    const real = await readReal(c.input, c.chunks);
    if (real.errors.length > 0) withErrors++;
    for (const error of real.errors) {
      const kind = error.replace(/".*$/, '').trim();
      errorKinds.set(kind, (errorKinds.get(kind) ?? 0) + 1);
    }
    const diff = difference(real, readRust(c.input, c.chunks));
    if (diff !== null) failures.push({ seed: c.seed, case: c, diff });
  }
  t.diagnostic(`${cases.length} sequences, ${continuations} continuations, ${withErrors} with reported errors`);
  t.diagnostic(`errors: ${[...errorKinds.entries()].sort().map(([k, n]) => `${k} (${n})`).join('; ')}`);
  t.diagnostic(`chunk types: ${[...kinds.entries()].sort().map(([k, n]) => `${k}=${n}`).join(' ')}`);
  // Every chunk type of the protocol was exercised.
  for (const type of [
    'start', 'finish', 'abort', 'error', 'message-metadata', 'start-step', 'finish-step', 'reset-step',
    'text-start', 'text-delta', 'text-end', 'reasoning-start', 'reasoning-delta', 'reasoning-end', 'custom',
    'tool-input-start', 'tool-input-delta', 'tool-input-available', 'tool-input-error', 'tool-approval-request',
    'tool-approval-response', 'tool-output-available', 'tool-output-error', 'tool-output-denied',
    'source-url', 'source-document', 'file', 'reasoning-file', 'data-progress',
  ]) {
    assert.ok(kinds.has(type), `no ${type} chunk was generated`);
  }
  if (failures.length > 0) {
    const first = failures[0];
    const minimal = await shrink(first.case);
    const diff = await compare(minimal);
    assert.fail(
      `${failures.length} of ${cases.length} sequences differ (seeds ${failures.slice(0, 10).map((f) => f.seed).join(', ')}).\n` +
        `Minimal case from seed ${first.seed}:\n` +
        `  input: ${JSON.stringify(minimal.input)}\n` +
        `  chunks: ${JSON.stringify(minimal.chunks)}\n` +
        `${diff}`,
    );
  }
});

/** A stream of (copies of) `chunks`. */
function streamOf(chunks) {
  const copies = viaJson(chunks);
  return new ReadableStream({
    start(controller) {
      for (const chunk of copies) controller.enqueue(chunk);
      controller.close();
    },
  });
}

/** The body and headers of `response`. */
async function bodyOf(response) {
  return { body: Buffer.from(await response.arrayBuffer()), headers: response.headers };
}

test('the SSE body is byte for byte that of createUIMessageStreamResponse', async () => {
  const sequences = [[], ...fixtures.map((f) => f.chunks), ...generatedCases().slice(0, 500).map((c) => c.chunks)];
  // Numbers and strings where JSON.stringify has opinions.
  sequences.push([
    { type: 'data-numbers', data: [1e21, 1e-7, 0.1 + 0.2, 2 ** 53 + 2, 2 ** 64, -1e-300, 123456789012345680000, 5e-324, 1.5] },
    { type: 'data-strings', data: ['\u0000\u001f\u007f', '"\\/', '\u2028\u2029', '😀', 'é'] },
    { zz: 1, type: 'text-delta', delta: 'd', id: 't' },
    { type: 'unknown-kind', nested: { b: 1, a: [null, false] } },
  ]);
  let bytes = 0;
  for (const chunks of sequences) {
    const real = await bodyOf(createUIMessageStreamResponse({ stream: streamOf(chunks) }));
    const ours = await bodyOf(toUIMessageStreamResponse(streamOf(chunks)));
    if (!real.body.equals(ours.body)) {
      assert.equal(ours.body.toString('utf8'), real.body.toString('utf8'), `chunks: ${JSON.stringify(chunks)}`);
      assert.fail('same text, different bytes');
    }
    assert.deepEqual([...ours.headers], [...real.headers]);
    bytes += ours.body.length;
  }
  assert.ok(bytes > 10_000);
  const { headers } = await bodyOf(toUIMessageStreamResponse(streamOf([])));
  // Headers iterate sorted by name.
  assert.deepEqual([...headers], Object.entries(UI_MESSAGE_STREAM_HEADERS).sort(([a], [b]) => a.localeCompare(b)));
});

test('each recorded chunk is one data event, in order, then [DONE]', async () => {
  assert.ok(fixtures.length > 0);
  for (const fixture of fixtures) {
    const { body } = await bodyOf(toUIMessageStreamResponse(streamOf(fixture.chunks)));
    const events = body.toString('utf8').split('\n\n');
    assert.equal(events.pop(), '', fixture.file);
    assert.equal(events.pop(), 'data: [DONE]', fixture.file);
    assert.deepEqual(
      events.map((event) => JSON.parse(event.replace(/^data: /, ''))),
      fixture.chunks,
      fixture.file,
    );
  }
});

test('chunks that are not chunks are refused with an input error', () => {
  const refused = (json, path) =>
    assert.throws(
      () => binding.accumulateUiMessage(null, json),
      (error) => {
        // Errors cross as data: the code and the fields of its class are properties.
        assert.equal(error.code, 'SESSION_INPUT');
        assert.equal(error.details.path, path);
        return true;
      },
    );
  refused('{', 'chunksJson');
  refused('[{"type":"text-delta","id":"t"}]', 'chunksJson[0]');
  refused('[{"type":"start"},{"type":7}]', 'chunksJson[1]');
  assert.throws(() => binding.accumulateUiMessage('{', '[]'), /inputMessageJson/);
});
