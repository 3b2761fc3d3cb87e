/**
 * Test doubles for the session manager and for your own tests: `harness-sessions/testing`.
 */

import type {
  HarnessV1,
  HarnessV1NetworkSandboxSession,
  HarnessV1PendingToolApproval,
  HarnessV1PendingToolResult,
} from '@ai-sdk/harness';
import type { HarnessAgentResumeSessionState, HarnessAgentSession } from '@ai-sdk/harness/agent';
import type {
  LanguageModelUsage,
  TextStreamPart,
  ToolApprovalResponse,
  ToolResultPart,
  ToolSet,
  UIMessage,
  UIMessageChunk,
  UIMessageStreamOptions,
} from 'ai';

// ─── The scripted harness ───────────────────────────────────────────────────

export interface ScriptedHarnessOptions {
  /** Default: `'scripted'`. */
  harnessId?: string;
  /** The pause between two words of an answer, in milliseconds. Default: `0`. */
  wordDelayMs?: number;
  /**
   * Run sessions on a bridge, as Claude Code and Codex do: a process the state points at
   * (`data.bridge`), left running by `stop()` during an unfinished turn and stopped with the
   * sandbox (`stopBridges()`). A resume pointing at a bridge that is gone waits `startupTimeoutMs`
   * (default two minutes), then starts another, the unfinished turn lost.
   */
  bridge?: { startupTimeoutMs?: number };
}

/** A call the scripted harness received. */
export interface ScriptedHarnessCall {
  method:
    | 'doStart'
    | 'doPromptTurn'
    | 'doContinueTurn'
    | 'doSuspendTurn'
    | 'doCompact'
    | 'doDetach'
    | 'doStop'
    | 'doDestroy'
    | 'submitToolApproval'
    | 'submitToolResult'
    | 'bridgeWait';
  sessionId: string;
  /** What the call carried: the prompt, the answer, whether the session resumed… */
  detail?: unknown;
}

/** A `HarnessV1` that records the calls it receives. */
export type ScriptedHarness = HarnessV1 & {
  /** Every call its sessions received, in order. */
  readonly calls: ScriptedHarnessCall[];
  /** Stops the bridges of session `sessionId`, as stopping its sandbox does (with `bridge`). */
  stopBridges(sessionId: string): void;
};

/**
 * A harness without a model, deterministic, for `HarnessAgent`: it answers each prompt from what it
 * says (`list files`, `read notes.md`, `write hello.txt: hi there`, `run ls -la`,
 * `what did I say?`, `/tool`, `/tools`, `/ask`, `/sleep`, `/think`, `/say`, `/fail`, `/fail-harness`;
 * anything else is echoed). Its tools work in the session's working directory through the sandbox,
 * asking approval as the agent's `permissionMode` says. See `scripted-harness.mjs` for the whole
 * command language.
 */
export function createScriptedHarness(options?: ScriptedHarnessOptions): ScriptedHarness;

// ─── The fake sandbox ───────────────────────────────────────────────────────

export interface FakeSandboxOptions {
  /**
   * The folder the sandbox works in, created when missing. Default: a new temporary folder, removed
   * by `destroy()`; a folder you give is never removed.
   */
  root?: string;
  /** The ports it exposes. Default: `[4000]`. */
  ports?: readonly number[];
  /** Default: `fake-sandbox-<uuid>`. */
  id?: string;
  /** Environment variables of every command, over this process's environment. */
  env?: Record<string, string>;
}

/** What a sandbox or one of its views was asked. */
export interface FakeSandboxLogEntry {
  op: 'run' | 'spawn' | 'read' | 'write' | 'fork' | 'release' | 'stop' | 'destroy';
  /** The id of the sandbox or view that was asked. */
  id: string;
  command?: string;
  path?: string;
  ports?: readonly number[];
}

/** A sandbox in a folder of this host, or a view of one made by `fork()`. */
export interface FakeSandbox extends HarnessV1NetworkSandboxSession {
  /** The folder: also its `defaultWorkingDirectory`. */
  readonly root: string;
  /** What the sandbox and all its views were asked, in order. */
  readonly log: FakeSandboxLogEntry[];
  /** How many times this sandbox or view was asked each lifecycle call. */
  readonly counts: { fork: number; release: number; stop: number; destroy: number };
  /** The views `fork()` made of it. */
  readonly forks: FakeSandbox[];
  /**
   * `running`; `released`, `stopped` or `destroyed` once asked (a view's own state), or the
   * sandbox's when the sandbox itself was stopped or destroyed. Anything but `running` refuses
   * commands and files.
   */
  readonly state: 'running' | 'released' | 'stopped' | 'destroyed';
  /** A view of the same sandbox (same folder, same log) with ports of its own. */
  fork(options: { ports: readonly number[] }): FakeSandbox;
  /** Hands a view back without stopping the sandbox: kills the processes it started. */
  release(): Promise<void>;
  setPorts(ports: readonly number[]): Promise<void>;
}

/**
 * Creates a sandbox in a folder of this host: commands run with `sh -c` there (no isolation), files
 * are read and written there, a missing file reads as `null`.
 */
export function createFakeSandbox(options?: FakeSandboxOptions): FakeSandbox;

// ─── The fake agent ─────────────────────────────────────────────────────────

/** What a call does before it resolves. */
export interface FakeCallScript {
  /** Wait this long first. */
  delayMs?: number;
  /** Wait for it first: a call that hangs until released (see {@link createDeferred}). */
  gate?: PromiseLike<unknown>;
  /** Then reject with it. */
  fail?: unknown;
}

/** A tool call a turn ends on. */
export interface FakeToolCall {
  toolName: string;
  /** Default: `{}`. */
  input?: unknown;
  /** Default: generated. */
  toolCallId?: string;
  /** For an approval. Default: generated. */
  approvalId?: string;
}

/**
 * What a turn does: `stream()` or `continueStream()` first does what {@link FakeCallScript} says,
 * then the turn streams `start`, the approval responses of a continuation, whatever holds it back,
 * then its content, and ends.
 */
export interface FakeTurnScript extends FakeCallScript {
  /** The answer. Default: `You said: <prompt>`, or `Continued.` for a continuation. `''` for none. */
  text?: string;
  /** Reasoning streamed before the text. */
  reasoning?: string;
  /** More stream parts, after the text. */
  parts?: TextStreamPart<ToolSet>[];
  /** Tool calls that ask approval: the turn ends on them, unfinished. */
  approvals?: FakeToolCall[];
  /** Tool calls the application runs: the turn ends on them, unfinished. */
  toolCalls?: FakeToolCall[];
  /** Streams nothing after `start` until it settles: a turn under way. An abort ends it. */
  hold?: PromiseLike<unknown>;
  /** Streams nothing after `start` until the turn's signal aborts. */
  waitForAbort?: boolean;
  /** The turn fails with it after its content: an `error` chunk, and `totalUsage` rejects. */
  error?: unknown;
  /** Over the default usage (1 input, 2 output, 3 in all). */
  usage?: Partial<LanguageModelUsage>;
}

export interface FakeAgentScript {
  createSession?: FakeCallScript[];
  /** For `stream()` and `continueStream()` alike, in order. */
  turns?: FakeTurnScript[];
  stop?: FakeCallScript[];
  detach?: FakeCallScript[];
  destroy?: FakeCallScript[];
}

export interface FakeAgentCall {
  method: 'createSession' | 'stream' | 'continueStream' | 'detach' | 'stop' | 'destroy' | 'suspendTurn' | 'compact';
  sessionId: string;
  /** What the call was given. */
  options?: Record<string, unknown>;
}

export interface FakeSessionData {
  sessionId: string;
  /** The prompts of the session's turns. */
  prompts: string[];
}

export interface FakeContinueTurnState {
  type: 'continue-turn';
  harnessId: 'fake';
  specificationVersion: 'harness-v1';
  data: FakeSessionData;
  pendingToolApprovals?: HarnessV1PendingToolApproval[];
  pendingToolResults?: HarnessV1PendingToolResult[];
}

/** The resume state of a fake session: plain JSON, as a real one. */
export interface FakeResumeState {
  type: 'resume-session';
  harnessId: 'fake';
  specificationVersion: 'harness-v1';
  data: FakeSessionData;
  /** While a turn is unfinished. */
  continueFrom?: FakeContinueTurnState;
}

/** A turn's result: what the session manager reads of a `StreamTextResult`. */
export interface FakeStreamResult {
  readonly totalUsage: Promise<LanguageModelUsage>;
  /** Goes through `toUIMessageStream` of `ai`: its options behave as with a real agent. Callable again. */
  toUIMessageStream(options?: UIMessageStreamOptions<UIMessage>): ReadableStream<UIMessageChunk>;
}

/** A session of the fake agent, with the surface of a `HarnessAgentSession`. */
export declare class FakeAgentSession {
  readonly sessionId: string;
  readonly isResume: boolean;
  /** The sandbox it was given. */
  readonly sandboxSession: unknown;
  /** The prompts of its turns, those before a resume included. */
  readonly prompts: string[];
  readonly state: 'active' | 'detached' | 'stopped' | 'destroyed';
  readonly turnState: 'idle' | 'running' | 'awaiting-input' | 'suspended';
  /** What the unfinished turn waits for. */
  readonly pending: { approvals: HarnessV1PendingToolApproval[]; toolCalls: HarnessV1PendingToolResult[] };
  hasUnfinishedTurn(): boolean;
  detach(): Promise<FakeResumeState>;
  stop(): Promise<FakeResumeState>;
  destroy(): Promise<void>;
  suspendTurn(): Promise<FakeContinueTurnState>;
  compact(customInstructions?: string): Promise<void>;
}

export interface FakeAgent {
  /** The queues of the script, consumed in order: push more at any time. */
  readonly script: Required<FakeAgentScript>;
  /** Every call, in order. */
  readonly calls: FakeAgentCall[];
  /** Every session created. */
  readonly sessions: FakeAgentSession[];
  /**
   * Typed as a `HarnessAgentSession` too, so that the agent passes for a `SessionAgent`: only the
   * members of {@link FakeAgentSession} exist.
   */
  createSession(options?: {
    sessionId?: string;
    sandboxSession?: unknown;
    /** What `stop()` gave; typed as any resume state, so that the agent passes for a `SessionAgent`. */
    resumeFrom?: FakeResumeState | HarnessAgentResumeSessionState;
    abortSignal?: AbortSignal;
  }): Promise<FakeAgentSession & HarnessAgentSession>;
  stream(options: {
    session: FakeAgentSession | HarnessAgentSession;
    prompt: string;
    abortSignal?: AbortSignal;
  }): Promise<FakeStreamResult>;
  /** Continues the unfinished turn: every approval and tool call it waited for counts as answered. */
  continueStream(options: {
    session: FakeAgentSession | HarnessAgentSession;
    toolApprovalContinuations?: readonly ToolApprovalResponse[];
    toolResultContinuations?: readonly ToolResultPart[];
    abortSignal?: AbortSignal;
  }): Promise<FakeStreamResult>;
}

/**
 * An agent for fast lifecycle tests, without `HarnessAgent`, whose calls follow `script`; a call
 * with nothing queued does the default. It keeps the rules of `HarnessAgent`: one turn at a time,
 * an unfinished turn must be continued, a handle is dead after `detach()`/`stop()`/`suspendTurn()`,
 * an aborted turn ends with an `abort` chunk.
 */
export function createFakeAgent(script?: FakeAgentScript): FakeAgent;

/** A promise with what settles it: a call that hangs until released. */
export function createDeferred<T = void>(): {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason?: unknown): void;
};

// ─── The Anthropic Messages API mock ────────────────────────────────────────

/** A tool call the mock's model makes: a `tool_use` block. */
export interface AnthropicMockToolUse {
  name: string;
  /** Default: `{}`. Streamed as `input_json_delta` pieces. */
  input?: unknown;
  /** Default: `toolu_mock_<random>`. */
  id?: string;
}

/** What the mock answers one `POST /v1/messages`. */
export interface AnthropicMockReply {
  /** A `text` block. */
  text?: string;
  /** A `thinking` block, before the text. */
  thinking?: string;
  /** A `tool_use` block, after the text. */
  toolUse?: AnthropicMockToolUse;
  /** More `tool_use` blocks. */
  toolUses?: AnthropicMockToolUse[];
  /** Default: `'tool_use'` with a tool call, else `'end_turn'`. */
  stopReason?: 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'pause_turn' | 'refusal';
  /** Default: the request's model. */
  model?: string;
  /** Default: rough counts of the request and the answer. */
  usage?: { inputTokens?: number; outputTokens?: number };
  /** Answer with an HTTP error and an Anthropic error body instead. Default status 500, type `api_error`. */
  error?: { status?: number; type?: string; message?: string };
  /** Stream the content, then an `error` event instead of `message_delta`/`message_stop`. */
  streamError?: { type?: string; message?: string };
  /** Wait this long before answering. */
  delayMs?: number;
}

/** A request the mock received, whatever its path. */
export interface AnthropicMockRequest {
  method: string;
  /** Without the query, e.g. `/v1/messages`. */
  path: string;
  /** The query with its `?`, or `''`. */
  query: string;
  headers: Record<string, string | string[] | undefined>;
  /** The JSON body parsed (the raw text when it is not JSON). */
  body: any;
  /** Whether the request asked for server-sent events. */
  stream: boolean;
  /** When it arrived (`Date.now()`). */
  at: number;
  /** What the mock answered: set once it is chosen. */
  reply: AnthropicMockReply | { countTokens: true } | undefined;
}

export type AnthropicMockReplySource =
  | AnthropicMockReply
  | ((request: AnthropicMockRequest) => AnthropicMockReply | Promise<AnthropicMockReply>);

export interface AnthropicMockOptions {
  /** Replies for the coming `/v1/messages` requests, in order (more with `reply()`). */
  replies?: AnthropicMockReplySource[];
  /** Asked first for each `/v1/messages` request: a reply, or `undefined` to use the queue. */
  respond?: (request: AnthropicMockRequest) => AnthropicMockReply | undefined | Promise<AnthropicMockReply | undefined>;
  /** The reply when the queue is empty. Default: `{ text: 'OK' }`. */
  fallback?: AnthropicMockReply;
  /** The model of the answers when the request names none. Default: `'claude-mock'`. */
  model?: string;
  /** Default: `'127.0.0.1'`. */
  host?: string;
  /** Default: a free port. */
  port?: number;
}

export interface AnthropicMock {
  /** `http://127.0.0.1:<port>`: the `ANTHROPIC_BASE_URL` of the client under test. */
  readonly url: string;
  readonly port: number;
  /** Every request, in order of arrival. */
  readonly requests: AnthropicMockRequest[];
  /** The `POST /v1/messages` requests, in order. */
  readonly messageRequests: AnthropicMockRequest[];
  /** Replies still queued. */
  readonly pending: number;
  /** Queues replies for the coming `/v1/messages` requests. */
  reply(...replies: AnthropicMockReplySource[]): void;
  /** Drops the replies still queued; returns how many there were. */
  clearReplies(): number;
  /** The first request (answered or being answered) that matches, waiting for it. Default timeout: 60 s. */
  waitForRequest(
    predicate?: (request: AnthropicMockRequest) => boolean,
    options?: { timeoutMs?: number },
  ): Promise<AnthropicMockRequest>;
  close(): Promise<void>;
}

/**
 * Starts a mock of the Anthropic Messages API on a loopback port: `POST /v1/messages` (server-sent
 * events as the real API sends them, or one JSON message), `POST /v1/messages/count_tokens`, 404
 * for anything else; every request logged.
 */
export function createAnthropicMock(options?: AnthropicMockOptions): Promise<AnthropicMock>;

/** The text blocks of the request's messages of `role` (default `'user'`), in order. */
export function requestTexts(request: AnthropicMockRequest, role?: 'user' | 'assistant'): string[];

/** The `tool_result` blocks of the request's messages, in order. */
export function requestToolResults(
  request: AnthropicMockRequest,
): Array<{ type: 'tool_result'; tool_use_id: string; content?: unknown; is_error?: boolean }>;

// ─── The request catcher ────────────────────────────────────────────────────

/** A request the catcher refused. */
export interface CaughtRequest {
  /** `CONNECT` for HTTPS through the proxy. */
  method: string;
  /** The URL, or `host:port` for `CONNECT`. */
  target: string;
  host?: string;
  at: number;
}

export interface RequestCatcher {
  /** `http://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** Every request refused, in order: a test fails when it is not empty. */
  readonly requests: CaughtRequest[];
  /** `HTTPS_PROXY`, `HTTP_PROXY` (both cases) pointing here, `NO_PROXY` = `noProxy` (default loopback). */
  proxyEnv(options?: { noProxy?: string[] }): Record<string, string>;
  close(): Promise<void>;
}

/** Starts a proxy on a loopback port that refuses and logs every request sent through it. */
export function createRequestCatcher(options?: { host?: string; port?: number }): Promise<RequestCatcher>;
