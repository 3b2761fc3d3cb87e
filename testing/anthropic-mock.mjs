/**
 * A mock of the Anthropic Messages API on a loopback port, for tests that run a real client (the
 * Claude Code CLI, `@ai-sdk/anthropic`, the Anthropic SDK) without a model or a network.
 *
 * - `POST /v1/messages` answers as the real API does: server-sent events when the request says
 *   `stream: true` (`message_start`, `content_block_start`/`content_block_delta`/`content_block_stop`
 *   per block, `ping`, `message_delta` with `stop_reason` and usage, `message_stop`), one JSON
 *   message otherwise.
 * - `POST /v1/messages/count_tokens` answers `{ input_tokens }` (a rough count of the request).
 * - Anything else answers 404 with an Anthropic error body.
 *
 * Each `/v1/messages` request takes its reply from, in order: the `respond` function (when it
 * returns a reply), the queue of `reply()`, then `fallback`. Every request is logged, whatever its
 * path. Nothing here reaches the network.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

/** Creates and starts the mock; resolves once it listens. */
export async function createAnthropicMock(options = {}) {
  const { model = 'claude-mock', fallback = { text: 'OK' }, respond, host = '127.0.0.1', port = 0 } = options;
  const queue = [...(options.replies ?? [])];
  const requests = [];
  const waiters = new Set();
  const sockets = new Set();

  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      handle(req, Buffer.concat(chunks).toString('utf8'), res).catch((error) => {
        if (!res.headersSent) sendError(res, 500, 'api_error', `mock failure: ${error?.message ?? error}`);
        else res.destroy();
      });
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  async function handle(req, raw, res) {
    const url = new URL(req.url ?? '/', 'http://mock');
    let body;
    try {
      body = raw.length > 0 ? JSON.parse(raw) : undefined;
    } catch {
      body = undefined;
    }
    const entry = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.search,
      headers: { ...req.headers },
      body: body ?? (raw.length > 0 ? raw : undefined),
      stream: body?.stream === true,
      at: Date.now(),
      reply: undefined,
    };
    requests.push(entry);
    const isMessages = entry.method === 'POST' && entry.path === '/v1/messages';
    if (entry.method === 'POST' && entry.path === '/v1/messages/count_tokens') {
      entry.reply = { countTokens: true };
      notify();
      sendJson(res, 200, { input_tokens: countTokens(body) });
      return;
    }
    if (!isMessages) {
      notify();
      sendError(res, 404, 'not_found_error', `the mock does not serve ${entry.method} ${entry.path}`);
      return;
    }
    if (body === undefined || typeof body !== 'object' || !Array.isArray(body.messages)) {
      notify();
      sendError(res, 400, 'invalid_request_error', 'messages: a list of messages is required');
      return;
    }
    let reply = respond ? await respond(entry) : undefined;
    if (reply == null) reply = queue.length > 0 ? queue.shift() : fallback;
    if (typeof reply === 'function') reply = await reply(entry);
    entry.reply = reply;
    notify();
    if (reply.delayMs) await sleep(reply.delayMs);
    if (reply.error) {
      const { status = 500, type = 'api_error', message = 'mock error' } = reply.error;
      sendError(res, status, type, message);
      return;
    }
    const message = buildMessage(reply, body, model);
    if (entry.stream) streamMessage(res, message, reply);
    else sendJson(res, 200, message);
  }

  function notify() {
    for (const waiter of [...waiters]) {
      if (waiter.check()) {
        waiters.delete(waiter);
        waiter.resolve(waiter.value);
      }
    }
  }

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const url = `http://${host}:${address.port}`;

  return {
    url,
    port: address.port,
    requests,
    get messageRequests() {
      return requests.filter((r) => r.method === 'POST' && r.path === '/v1/messages');
    },
    get pending() {
      return queue.length;
    },
    reply(...replies) {
      queue.push(...replies);
    },
    clearReplies() {
      return queue.splice(0).length;
    },
    waitForRequest(predicate = () => true, { timeoutMs = 60_000 } = {}) {
      return new Promise((resolve, reject) => {
        const waiter = {
          check() {
            const found = requests.find((r) => r.reply !== undefined && predicate(r));
            waiter.value = found;
            return found !== undefined;
          },
          resolve,
        };
        if (waiter.check()) return resolve(waiter.value);
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`the Anthropic mock saw no matching request within ${timeoutMs} ms`));
        }, timeoutMs);
        timer.unref?.();
        waiter.resolve = (value) => {
          clearTimeout(timer);
          resolve(value);
        };
        waiters.add(waiter);
      });
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** The text of every `text` block of the request's messages of `role` (default: `user`), in order. */
export function requestTexts(request, role = 'user') {
  const texts = [];
  for (const message of request?.body?.messages ?? []) {
    if (role !== undefined && message.role !== role) continue;
    if (typeof message.content === 'string') texts.push(message.content);
    else for (const block of message.content ?? []) if (block?.type === 'text') texts.push(block.text);
  }
  return texts;
}

/** The `tool_result` blocks of the request's messages, in order. */
export function requestToolResults(request) {
  const results = [];
  for (const message of request?.body?.messages ?? []) {
    if (!Array.isArray(message.content)) continue;
    for (const block of message.content) if (block?.type === 'tool_result') results.push(block);
  }
  return results;
}

function buildMessage(reply, body, model) {
  const content = [];
  if (reply.thinking) content.push({ type: 'thinking', thinking: reply.thinking, signature: 'mock-signature' });
  if (reply.text) content.push({ type: 'text', text: reply.text });
  const toolUses = [...(reply.toolUse ? [reply.toolUse] : []), ...(reply.toolUses ?? [])];
  for (const use of toolUses) {
    content.push({ type: 'tool_use', id: use.id ?? `toolu_mock_${randomUUID().replaceAll('-', '')}`, name: use.name, input: use.input ?? {} });
  }
  const stopReason = reply.stopReason ?? (toolUses.length > 0 ? 'tool_use' : 'end_turn');
  return {
    id: `msg_mock_${randomUUID().replaceAll('-', '')}`,
    type: 'message',
    role: 'assistant',
    model: reply.model ?? body.model ?? model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage: {
      input_tokens: reply.usage?.inputTokens ?? countTokens(body),
      output_tokens: reply.usage?.outputTokens ?? Math.max(1, countWords(content)),
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  };
}

function streamMessage(res, message, reply) {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'request-id': `req_mock_${randomUUID().replaceAll('-', '')}`,
  });
  const send = (event, data) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  send('message_start', {
    type: 'message_start',
    message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } },
  });
  message.content.forEach((block, index) => {
    if (block.type === 'text') {
      send('content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      if (index === 0) send('ping', { type: 'ping' });
      for (const piece of splitText(block.text)) {
        send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } });
      }
    } else if (block.type === 'thinking') {
      send('content_block_start', { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } });
      for (const piece of splitText(block.thinking)) {
        send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: piece } });
      }
      send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } });
    } else {
      send('content_block_start', {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
      });
      const json = JSON.stringify(block.input);
      const cut = Math.ceil(json.length / 2);
      for (const part of [json.slice(0, cut), json.slice(cut)]) {
        send('content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } });
      }
    }
    send('content_block_stop', { type: 'content_block_stop', index });
  });
  if (reply.streamError) {
    const { type = 'overloaded_error', message: text = 'mock stream error' } = reply.streamError;
    send('error', { type: 'error', error: { type, message: text } });
    res.end();
    return;
  }
  send('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: message.stop_reason, stop_sequence: null },
    usage: { output_tokens: message.usage.output_tokens },
  });
  send('message_stop', { type: 'message_stop' });
  res.end();
}

/** Words with their following spaces: the deltas of a streamed text. */
function splitText(text) {
  const pieces = text.match(/\S+\s*|\s+/g) ?? [];
  return pieces.length > 0 ? pieces : [''];
}

function countWords(content) {
  let words = 0;
  for (const block of content) words += JSON.stringify(block).split(/\s+/).length;
  return words;
}

function countTokens(body) {
  return Math.max(1, Math.ceil(JSON.stringify(body ?? {}).length / 4));
}

function sendJson(res, status, value) {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res, status, type, message) {
  sendJson(res, status, { type: 'error', error: { type, message } });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
