// A new process on the same SQLite file: opens a manager on the real Claude Code with the
// configuration given as JSON in argv[2], sends one message to a session the parent suspended,
// and prints `{ status, text, error }` as JSON on its last line.
import { createRequire } from 'node:module';
import { readTurnResponse, textOf, userMessage } from './claude-code.mjs';

const require = createRequire(import.meta.url);
const { createSessionManager, createSqliteSessionStore, dockerSandbox, localSandbox, sandboxPerSession } = require('../../index.js');

const config = JSON.parse(process.argv[2]);
const { HarnessAgent } = await import('@ai-sdk/harness/agent');
const { createClaudeCode } = await import('@ai-sdk/harness-claude-code');
const agent = new HarnessAgent({
  harness: createClaudeCode({ auth: { anthropic: { apiKey: 'sk-ant-mock-key', baseUrl: config.mockUrl } } }),
  permissionMode: 'allow-reads',
});
const provider = config.docker ? dockerSandbox(config.docker) : localSandbox(config.local);
const sessions = createSessionManager({
  agent: () => agent,
  sandboxes: sandboxPerSession({ provider }),
  store: createSqliteSessionStore({ path: config.path }),
  onError: () => {},
});
let result;
try {
  const before = await sessions.get(config.id);
  const turn = await sessions.send(config.id, { message: userMessage(config.prompt) });
  const { message, session } = await readTurnResponse(turn);
  const full = await sessions.get(config.id);
  result = { before: before?.status, status: session.status, text: textOf(message), messages: full?.messages?.length };
} catch (error) {
  result = { error: String(error?.stack ?? error) };
}
await sessions.shutdown();
console.log(JSON.stringify(result));
