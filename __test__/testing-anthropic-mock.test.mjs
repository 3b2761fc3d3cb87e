// harness-sessions/testing's mock of the Anthropic Messages API and its request catcher, read as a
// client reads them: server-sent events parsed, blocks rebuilt from their deltas.
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { createAnthropicMock, createRequestCatcher, requestTexts, requestToolResults } from 'harness-sessions/testing';

let mock;
before(async () => {
  mock = await createAnthropicMock({ fallback: { text: 'Fallback answer.' } });
});
after(() => mock.close());

const body = (extra = {}) => ({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'Hello there' }], ...extra });
const post = (path, value) =>
  fetch(`${mock.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) });

/** The events of a server-sent-event body, as `{ event, data }`. */
async function events(response) {
  const text = await response.text();
  return text
    .split('\n\n')
    .filter((frame) => frame.trim() !== '')
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(frame)[1]);
      assert.equal(data.type, event, 'each event names its data type');
      return data;
    });
}

/** Rebuilds the content blocks and the stop reason from the events, as the SDKs do. */
function rebuild(list) {
  const blocks = [];
  let stop;
  for (const e of list) {
    if (e.type === 'content_block_start') blocks[e.index] = { ...e.content_block, json: '' };
    if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') blocks[e.index].text += e.delta.text;
    if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') blocks[e.index].json += e.delta.partial_json;
    if (e.type === 'message_delta') stop = e;
  }
  return { blocks: blocks.map(({ json, ...b }) => (b.type === 'tool_use' ? { ...b, input: JSON.parse(json) } : b)), stop };
}

test('a streamed text answer: message_start, one text block in deltas, message_delta with usage, message_stop', async () => {
  mock.reply({ text: 'Hello from the mock model.' });
  const response = await post('/v1/messages?beta=true', body({ stream: true }));
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type'), /^text\/event-stream/);
  const list = await events(response);
  assert.deepEqual(
    list.map((e) => e.type),
    ['message_start', 'content_block_start', 'ping', ...Array(5).fill('content_block_delta'), 'content_block_stop', 'message_delta', 'message_stop'],
  );
  assert.equal(list[0].message.role, 'assistant');
  assert.equal(list[0].message.model, 'claude-test');
  const { blocks, stop } = rebuild(list);
  assert.deepEqual(blocks, [{ type: 'text', text: 'Hello from the mock model.' }]);
  assert.equal(stop.delta.stop_reason, 'end_turn');
  assert.ok(stop.usage.output_tokens > 0);
  const logged = mock.requests.at(-1);
  assert.equal(logged.path, '/v1/messages');
  assert.equal(logged.query, '?beta=true');
  assert.equal(logged.stream, true);
  assert.deepEqual(requestTexts(logged), ['Hello there']);
});

test('a streamed tool call: text, then a tool_use block whose input arrives as input_json_delta', async () => {
  mock.reply({ text: 'Writing it.', toolUse: { name: 'Write', id: 'toolu_1', input: { file_path: '/w/a.txt', content: 'hi' } } });
  const list = await events(await post('/v1/messages', body({ stream: true })));
  const { blocks, stop } = rebuild(list);
  assert.deepEqual(blocks, [
    { type: 'text', text: 'Writing it.' },
    { type: 'tool_use', id: 'toolu_1', name: 'Write', input: { file_path: '/w/a.txt', content: 'hi' } },
  ]);
  assert.ok(list.filter((e) => e.delta?.type === 'input_json_delta').length >= 2);
  assert.equal(stop.delta.stop_reason, 'tool_use');
});

test('non-streaming answers, count_tokens, a reply made from the request, the fallback', async () => {
  mock.reply((request) => ({ text: `You said: ${requestTexts(request).join(' ')}` }));
  const message = await (await post('/v1/messages', body())).json();
  assert.equal(message.type, 'message');
  assert.deepEqual(message.content, [{ type: 'text', text: 'You said: Hello there' }]);
  assert.equal(message.stop_reason, 'end_turn');
  const fallback = await (await post('/v1/messages', body())).json();
  assert.deepEqual(fallback.content, [{ type: 'text', text: 'Fallback answer.' }]);
  const count = await (await post('/v1/messages/count_tokens', body())).json();
  assert.ok(Number.isInteger(count.input_tokens) && count.input_tokens > 0);
});

test('errors: a scripted HTTP error, an error event mid-stream, 404 elsewhere, 400 without messages; all logged', async () => {
  const before = mock.requests.length;
  mock.reply({ error: { status: 529, type: 'overloaded_error', message: 'Overloaded' } }, { text: 'cut short', streamError: {} });
  const failed = await post('/v1/messages', body({ stream: true }));
  assert.equal(failed.status, 529);
  assert.deepEqual(await failed.json(), { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
  const list = await events(await post('/v1/messages', body({ stream: true })));
  assert.equal(list.at(-1).type, 'error');
  assert.ok(!list.some((e) => e.type === 'message_stop'));
  assert.equal((await fetch(`${mock.url}/api/hello`)).status, 404);
  assert.equal((await post('/v1/messages', { model: 'x' })).status, 400);
  assert.deepEqual(
    mock.requests.slice(before).map((r) => `${r.method} ${r.path}`),
    ['POST /v1/messages', 'POST /v1/messages', 'GET /api/hello', 'POST /v1/messages'],
  );
});

test('tool results of the conversation are read back, and waitForRequest finds a request as it comes', async () => {
  const waiting = mock.waitForRequest((r) => requestToolResults(r).length > 0, { timeoutMs: 10_000 });
  await post('/v1/messages', {
    ...body(),
    messages: [
      { role: 'user', content: 'write it' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_9', name: 'Write', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_9', content: 'done' }] },
    ],
  });
  const found = await waiting;
  assert.deepEqual(requestToolResults(found).map((r) => r.tool_use_id), ['toolu_9']);
  assert.deepEqual(requestTexts(found, 'user'), ['write it']);
});

test('the request catcher refuses and logs plain requests and CONNECT tunnels', async () => {
  const catcher = await createRequestCatcher();
  try {
    const env = catcher.proxyEnv();
    assert.equal(env.HTTPS_PROXY, catcher.url);
    assert.equal(env.NO_PROXY, '127.0.0.1,localhost');
    const plain = await new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: catcher.port, path: 'http://example.com/x', headers: { host: 'example.com' } }, resolve);
      req.on('error', reject);
      req.end();
    });
    assert.equal(plain.statusCode, 403);
    plain.resume();
    const tunnel = await new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: catcher.port, method: 'CONNECT', path: 'statsig.anthropic.com:443' });
      req.on('connect', (res, socket) => {
        socket.destroy();
        resolve(res.statusCode);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(tunnel, 403);
    assert.deepEqual(catcher.requests.map((r) => `${r.method} ${r.target}`), ['GET http://example.com/x', 'CONNECT statsig.anthropic.com:443']);
  } finally {
    await catcher.close();
  }
});
