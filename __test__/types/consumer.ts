// A consumer of harness-sessions, written as the seed README shows it: this file only has to
// type-check (`tsc -p __test__/types`), against index.d.ts and the real `ai` and
// `@ai-sdk/harness` types.
import { HarnessAgent } from '@ai-sdk/harness/agent';
import type { HarnessV1 } from '@ai-sdk/harness';
import type { UIMessage, UIMessageChunk } from 'ai';
import {
  createMemorySessionStore,
  createPostgresSessionStore,
  createSessionManager,
  SessionCapacityError,
  SessionConflictError,
  SessionError,
  SessionInputError,
  SessionNotFoundError,
  SessionOutputError,
  SessionStoreUnavailableError,
  type ImportedItem,
  type SessionEvent,
  type SessionManager,
  type SessionSandboxes,
  type SessionStore,
  type SessionSummary,
  type SessionTurn,
  type SessionUsage,
} from 'harness-sessions';

declare const harness: HarnessV1;
declare const sandboxes: SessionSandboxes;

const agent = new HarnessAgent({ harness });

interface Metadata {
  title: string;
  grants?: string[];
}

const store: SessionStore<Metadata> = createMemorySessionStore<Metadata>();

export const sessions: SessionManager<Metadata> = createSessionManager<Metadata>({
  agent: () => agent,
  sandboxes,
  store,
  idleTimeoutMs: 10 * 60_000,
  approve: (approval, { session }) =>
    approval.toolName === 'read' || session.metadata.grants?.includes(approval.toolName)
      ? { approved: true }
      : undefined,
  onError: (error, { action, sessionId }) => console.error(action, sessionId, error),
});

export async function POST(request: Request): Promise<Response> {
  const { id, messages } = (await request.json()) as { id: string; messages: UIMessage[] };
  const message = messages.at(-1)!;
  if ((await sessions.get(id)) === undefined) {
    await sessions.create({ id, metadata: { title: 'New conversation' } });
  }
  try {
    const turn: SessionTurn<Metadata> =
      message.role === 'assistant'
        ? await sessions.continue(id, { message, abortSignal: request.signal })
        : await sessions.send(id, { message, abortSignal: request.signal });
    const stream: ReadableStream<UIMessageChunk> = turn.stream;
    void stream;
    const done: SessionSummary<Metadata> = await turn.done;
    void done.pendingInput?.approvals[0]?.decision?.approved;
    return turn.toUIMessageStreamResponse({ headers: { 'x-session': id } });
  } catch (error) {
    if (SessionConflictError.isInstance(error)) {
      return new Response(`${error.message} (${error.status})`, { status: error.statusCode });
    }
    if (SessionNotFoundError.isInstance(error)) return new Response(error.sessionId, { status: 404 });
    if (SessionCapacityError.isInstance(error)) return new Response(String(error.capacity), { status: 503 });
    if (SessionInputError.isInstance(error)) return new Response(error.path, { status: 400 });
    if (SessionError.isInstance(error)) return new Response(error.code, { status: error.statusCode });
    throw error;
  }
}

export async function grant(id: string, tool: string): Promise<void> {
  await sessions.update(id, {
    metadata: (metadata) => ({ ...metadata, grants: [...(metadata.grants ?? []), tool] }),
  });
  const unsubscribe = sessions.subscribe((event: SessionEvent<Metadata>) => {
    if (event.type === 'updated') console.log(event.session.status, event.session.metadata.title);
    else console.log(event.sessionId);
  });
  unsubscribe();
  const list: SessionSummary<Metadata>[] = await sessions.list();
  void list;
  // The record of the reference: ISO 8601 times, turns, usage with its three counts.
  const [first] = list;
  if (first !== undefined) {
    const when: Date = new Date(first.updatedAt);
    const created: string = first.createdAt;
    const turns: number = first.turns;
    const usage: SessionUsage = first.usage;
    const tokens: number = usage.inputTokens + usage.outputTokens + usage.totalTokens;
    void [when, created, turns, tokens];
  }
  await sessions.interrupt(id);
  await sessions.suspend(id);
  await sessions.close(id);
  await sessions.delete(id);
  await sessions.shutdown();
}

export const thrown = [
  new SessionNotFoundError('a'),
  new SessionConflictError('a', 'busy', 'The session is busy.'),
  new SessionConflictError('a', 'busy'),
  new SessionCapacityError(2),
  new SessionInputError('message', 'message must be a string'),
  new SessionInputError({ path: 'message', message: 'message must be a string' }),
  new SessionError('x', { cause: new Error('y') }),
];

// What the types must refuse: each line below is an error, or tsc fails on the directive.
export async function refused(): Promise<void> {
  // @ts-expect-error an unknown status
  const status: SessionSummary['status'] = 'sleeping';
  void status;
  // @ts-expect-error times are ISO 8601 strings, not epoch milliseconds
  const millis: SessionSummary['createdAt'] = 1;
  void millis;
  // @ts-expect-error the reference's constructors are positional
  new SessionNotFoundError({ sessionId: 'a' });
  // @ts-expect-error metadata of the wrong shape
  await sessions.create({ id: 'x', metadata: { title: 3 } });
  // @ts-expect-error send() needs a message
  await sessions.send('x', {});
  // @ts-expect-error an option that does not exist
  createSessionManager({ agent: () => agent, sandboxes, idleTimeout: 5 });
  // @ts-expect-error exec() needs a command
  await sessions.exec('x', { key: 'k' });
}

// The additions of issue 16: exec() and the options of one turn.
export async function additions(): Promise<number> {
  const result = await sessions.exec('x', { command: 'npm test', key: 'tests', maxOutputBytes: 4096 });
  await sessions.send('x', { message: 'hi', instructionAddendum: 'Be brief.', limits: { maxSteps: 3, timeoutMs: 60_000 } });
  const record = await sessions.get('x');
  return result.exitCode + result.stdoutCutBytes + (record?.commandResults?.length ?? 0);
}

// Structured answers: output on send() and continue(), turn.output, SessionOutputError.
export async function structured(): Promise<string> {
  const turn = await sessions.send('x', {
    message: 'summarise',
    output: { schema: { type: 'object', required: ['title'] }, name: 'summary', description: 'A summary.' },
  });
  await sessions.continue('x', { output: { schema: true } });
  // @ts-expect-error output needs a schema
  await sessions.send('x', { message: 'hi', output: { name: 'x' } });
  try {
    const value: unknown = await turn.output;
    return JSON.stringify(value);
  } catch (error) {
    if (SessionOutputError.isInstance(error)) {
      const code: 'output_invalid' | 'output_missing' | 'output_pending' = error.code;
      const status: 422 = error.statusCode;
      return `${code} ${status} ${error.errors.map((e) => `${e.instancePath}: ${e.message}`).join(', ')}`;
    }
    throw error;
  }
}

// The addition of issue 16: a conversation imported at create().
export async function imported(): Promise<boolean> {
  const history: ImportedItem[] = [
    { type: 'user', text: 'Check Atlas.' },
    { type: 'tool_call', callId: 'c', name: 'lookup', arguments: { name: 'Atlas' } },
    { type: 'tool_result', callId: 'c', output: '{"available":false}' },
    { type: 'assistant', text: 'Atlas is taken.' },
  ];
  const created = await sessions.create({ id: 'i', metadata: { title: 'Imported' }, initialHistory: history });
  // @ts-expect-error tool arguments are an object
  const bad: ImportedItem = { type: 'tool_call', callId: 'c', name: 'x', arguments: 'x' };
  void bad;
  // @ts-expect-error a system message is not in the format
  await sessions.create({ id: 'j', metadata: { title: 'x' }, initialHistory: [{ type: 'system', text: 'x' }] });
  return created.importPending === true;
}

// The PostgreSQL store: every option, and its error class.
const postgresStore: SessionStore<Metadata> & { close(): Promise<void> } = createPostgresSessionStore<Metadata>({
  url: 'postgres://app@db.internal:5432/app?sslmode=verify-full',
  schema: 'harness_sessions',
  leaseTtlMs: 15_000,
  instanceId: 'web-1',
  listenUrl: 'postgres://app@db.internal:5432/app',
  encryptionKey: new Uint8Array(32),
});
void postgresStore.close();
const unavailable: SessionStoreUnavailableError = new SessionStoreUnavailableError('down');
const unavailableCode: 'SESSION_STORE_UNAVAILABLE' = unavailable.code;
void unavailableCode;
if (SessionStoreUnavailableError.isInstance(unavailable as unknown)) void unavailable.statusCode;
