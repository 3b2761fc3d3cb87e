/**
 * harness-sessions: sessions for AI SDK harness agents, with a Rust core. A drop-in for
 * `ai-sdk-harness-sessions` 0.2.0: the same options, methods, statuses, events and errors.
 */
import type { HarnessV1NetworkSandboxSession, HarnessV1SandboxProvider } from '@ai-sdk/harness';
import type { HarnessAgentResumeSessionState } from '@ai-sdk/harness/agent';
import type {
  ToolApprovalResponse,
  ToolResultPart,
  UIMessage,
  UIMessageChunk,
} from 'ai';

// ─── The agent ──────────────────────────────────────────────────────────────────────────────────

/**
 * What the manager reads of a turn's result: a `StreamTextResult` is one, from whichever copy of
 * `ai` made it. `@ai-sdk/harness` depends on an exact version of `ai`, so an application with
 * another one has two copies, whose `StreamTextResult` and `UIMessage` types differ: this type
 * names none of them, so that a `HarnessAgent` is accepted either way.
 */
export interface SessionStreamResult {
  /** The turn's token usage, once it is over. */
  readonly totalUsage: PromiseLike<unknown>;
  /** The turn as a stream of UI message chunks. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  toUIMessageStream(options?: any): ReadableStream<unknown>;
}

/**
 * What the manager needs of a harness session: a `HarnessAgentSession` is one, from any copy of
 * `@ai-sdk/harness` (the type is structural, so that two installed copies of it still agree).
 */
export interface SessionAgentSession {
  readonly sessionId: string;
  stop(): Promise<HarnessAgentResumeSessionState>;
  destroy(): Promise<void>;
}

/**
 * What the manager needs of an agent: a `HarnessAgent` is one, whatever its harness, tools and
 * settings, and from whichever copy of `@ai-sdk/harness` (its sessions are the agent's own type,
 * `SESSION`, which the manager only hands back to it).
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface SessionAgent<SESSION extends SessionAgentSession = any> {
  createSession(options: {
    sessionId: string;
    sandboxSession: HarnessV1NetworkSandboxSession;
    resumeFrom?: HarnessAgentResumeSessionState;
    abortSignal?: AbortSignal;
  }): Promise<SESSION>;
  stream(options: {
    session: SESSION;
    prompt: string;
    abortSignal?: AbortSignal;
  }): PromiseLike<SessionStreamResult>;
  continueStream(options: {
    session: SESSION;
    toolApprovalContinuations?: readonly ToolApprovalResponse[];
    toolResultContinuations?: readonly ToolResultPart[];
    abortSignal?: AbortSignal;
  }): PromiseLike<SessionStreamResult>;
}

// ─── Sessions ───────────────────────────────────────────────────────────────────────────────────

/** Where a session is in its lifecycle. */
export type SessionStatus =
  | 'preparing'
  | 'idle'
  | 'busy'
  | 'awaiting-input'
  | 'suspended'
  | 'closed'
  | 'failed'
  | 'interrupted';

/** Every status, in the order of the lifecycle. */
export declare const SESSION_STATUSES: readonly [
  'preparing',
  'idle',
  'busy',
  'awaiting-input',
  'suspended',
  'closed',
  'failed',
  'interrupted',
];

/** The statuses of a session held in memory, with a harness session and a sandbox. */
export declare const LIVE_STATUSES: readonly ['preparing', 'idle', 'busy', 'awaiting-input'];

/** The answer to an approval. */
export interface ApprovalVerdict {
  approved: boolean;
  reason?: string;
}

/** A tool call waiting for its approval. */
export interface PendingApproval {
  approvalId: string;
  toolCallId: string;
  toolName: string;
  input: unknown;
  /** The answer the `approve` policy already gave, which a person cannot overturn. */
  decision?: ApprovalVerdict;
}

/** A tool call waiting for the result of a tool your application runs, or a question's answers. */
export interface PendingToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
}

/**
 * An item of an imported conversation, in the portable format: plain user and assistant text,
 * and completed tool calls with their results (history: they never run). A nonempty transcript
 * starts with a user item; every call has exactly one result after it (before the next user
 * item), and no two calls share a `callId`. At most 256 items; 256,000 UTF-8 bytes per text,
 * `arguments` (as JSON text) or `output` (a string's text, else its JSON text); 512,000 in all;
 * 32 levels of nesting in `arguments` and `output`.
 */
export type ImportedItem =
  | { type: 'user' | 'assistant'; text: string }
  | { type: 'tool_call'; callId: string; name: string; arguments: Record<string, unknown> }
  | { type: 'tool_result'; callId: string; output: unknown };

/** What a session `awaiting-input` waits for. */
export interface PendingInput {
  approvals: PendingApproval[];
  toolCalls: PendingToolCall[];
}

/** The tokens a session's turns used, added up. */
export interface SessionUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
}

/** A session without its conversation: what `list()` gives and `subscribe()` sends. */
export interface SessionSummary<METADATA = unknown> {
  id: string;
  status: SessionStatus;
  metadata: METADATA;
  /** ISO 8601, as `Date.prototype.toISOString()` writes it. */
  createdAt: string;
  /** ISO 8601: the last change of status, or the end of the last turn (not `update()`). */
  updatedAt: string;
  /** The turns that reached their end: a `send()` or `continue()` that got a stream from the agent. */
  turns: number;
  /** The tokens its turns used, added up: zeros until its first turn. */
  usage: SessionUsage;
  /** Why its last start, resume or turn failed, or was cut short. */
  error?: string;
  /** What it waits for, when `awaiting-input` (or suspended while it waited). */
  pendingInput?: PendingInput;
  /**
   * `true` while it holds a conversation imported by `create({ initialHistory })` that its agent
   * was not given yet (it is, with the first turn's prompt); absent otherwise. An addition.
   */
  importPending?: true;
}

/** A session with its conversation, as `useChat` shows it. */
export interface SessionRecord<METADATA = unknown> extends SessionSummary<METADATA> {
  messages: UIMessage[];
  /** The results of the commands `exec()` ran with a `key`, oldest first; absent when none. */
  commandResults?: SessionKeyedCommand[];
}

/** What `exec()` gives: the command's exit code and its output, each stream bounded. */
export interface SessionExecResult {
  /** Nonzero is a result, not an error. */
  exitCode: number;
  /** At most `maxOutputBytes` UTF-8 bytes of the standard output. */
  stdout: string;
  /** At most `maxOutputBytes` UTF-8 bytes of the standard error. */
  stderr: string;
  /** The bound each stream was cut to. */
  maxOutputBytes: number;
  /** How many bytes of the standard output were cut (0 when none). */
  stdoutCutBytes: number;
  /** How many bytes of the standard error were cut (0 when none). */
  stderrCutBytes: number;
}

/** A command run with a `key`, kept with its session. */
export interface SessionKeyedCommand {
  key: string;
  command: string;
  result: SessionExecResult;
}

/** A shell command to run in a session's sandbox, without the agent. */
export interface ExecOptions {
  /** The exact shell command, passed to the sandbox's `run()` unchanged. */
  command: string;
  /**
   * Keeps the result with the session: the same key again gives it back without running anything;
   * the same key with another command is refused (`SessionConflictError`).
   */
  key?: string;
  /** Cuts the command, or its wait for a turn under way: rejects with the signal's reason. */
  abortSignal?: AbortSignal;
  /** The most UTF-8 bytes of each of stdout and stderr kept. Default: 1,048,576; at most 64 MiB. */
  maxOutputBytes?: number;
}

// ─── Stores ─────────────────────────────────────────────────────────────────────────────────────

/** Where sessions are kept. */
export interface SessionStore<METADATA = unknown> {
  /** Writes the record; with `resumeState`, keeps it beside the record, else drops any kept. */
  save(record: SessionRecord<METADATA>, resumeState?: HarnessAgentResumeSessionState): Promise<void>;
  get(id: string): Promise<SessionRecord<METADATA> | undefined>;
  /** Every session without its messages. */
  list(): Promise<SessionSummary<METADATA>[]>;
  getResumeState(id: string): Promise<HarnessAgentResumeSessionState | undefined>;
  delete(id: string): Promise<void>;
}

/** Sessions kept in memory, lost with the process: the default store. */
export declare function createMemorySessionStore<METADATA = unknown>(): SessionStore<METADATA>;

/**
 * Sessions kept in a SQLite file, across restarts: WAL, `synchronous=FULL`, the file created with
 * mode 0600, the resume state apart and only while a session is suspended.
 */
export declare function createSqliteSessionStore<METADATA = unknown>(options: {
  /** The database file; created when missing. */
  path: string;
  /**
   * A key to encrypt resume states at rest with (XChaCha20-Poly1305, bound to the session id):
   * 32 bytes, as bytes, 64 hex digits or base64. Default: `HARNESS_SESSIONS_ENCRYPTION_KEY`.
   */
  encryptionKey?: Uint8Array | string;
}): SessionStore<METADATA> & {
  /**
   * Closes the file and frees it for another store: one open store per file, in any process (a
   * second one is refused with a `SessionError`). The manager's `shutdown()` closes it too.
   */
  close(): Promise<void>;
};

/**
 * Sessions kept in PostgreSQL (14 or later), in a schema of their own, created and migrated at
 * the first use under a lock. Any number of processes may use one database. Nothing connects
 * before the first use; a server that cannot be reached fails that call with a
 * {@link SessionStoreUnavailableError}, a bad option throws a {@link SessionInputError} at once.
 */
export declare function createPostgresSessionStore<METADATA = unknown>(options: {
  /**
   * A `postgres://` (or `postgresql://`) connection string. TLS follows its `sslmode`, as libpq:
   * `disable`, `prefer` (the default: TLS when the server offers it, certificate unchecked),
   * `require`, `verify-ca`, `verify-full`; `sslrootcert` names the authorities' PEM file
   * (default: Mozilla's roots).
   */
  url: string;
  /** The schema the tables live in. Default: `harness_sessions`. */
  schema?: string;
  /** How long an instance's lease on a session lasts without renewal. Default: 15,000. */
  leaseTtlMs?: number;
  /** This instance's id in leases. Default: a random id of the process. */
  instanceId?: string;
  /**
   * The server for the one connection that `LISTEN`s, when `url` goes through a
   * transaction-mode pooler (PgBouncer). Default: `url`.
   */
  listenUrl?: string;
  /**
   * A key to encrypt resume states at rest with (XChaCha20-Poly1305, bound to the session id):
   * 32 bytes, as bytes, 64 hex digits or base64. Default: `HARNESS_SESSIONS_ENCRYPTION_KEY`.
   */
  encryptionKey?: Uint8Array | string;
}): SessionStore<METADATA> & {
  /** Closes the store's connections; the next call opens them again. */
  close(): Promise<void>;
};

// ─── Sandboxes ──────────────────────────────────────────────────────────────────────────────────

/** A session's hold on a sandbox. */
export interface SandboxLease {
  readonly sandboxSession: HarnessV1NetworkSandboxSession;
  /** The session is suspended: give back what it need not keep. */
  suspend(): Promise<void>;
  /** The session ends: give back everything. */
  close(): Promise<void>;
}

/** How sessions get a sandbox: `sharedSandbox()`, `sandboxPerSession()`, or your own. */
export interface SessionSandboxes {
  /** How many sessions can be live at once; unbounded when absent. */
  readonly capacity?: number;
  acquire(sessionId: string, options: { resume: boolean; abortSignal?: AbortSignal }): Promise<SandboxLease>;
  /** A suspended session ends: free what is kept for it. */
  discard?(sessionId: string): Promise<void>;
  shutdown?(): Promise<void>;
}

/** A sandbox `sharedSandbox()` can share: one that gives views of itself, `fork({ ports })`. */
export interface ForkableSandboxSession extends HarnessV1NetworkSandboxSession {
  /**
   * A view of the sandbox for the session `sessionId`, with `ports`. Give a session the same
   * working directory every time it comes back: a harness finds its conversation from it (Claude
   * Code in `$HOME/.claude/projects/<working directory>/`), so a new directory loses it.
   */
  fork(options: { ports: number[]; sessionId: string }): HarnessV1NetworkSandboxSession | PromiseLike<HarnessV1NetworkSandboxSession>;
}

export interface SharedSandboxOptions {
  /**
   * The sandbox to share, found again or created: called at the first acquire, and again after
   * a failed open or a stop. `dockerSandbox()` and `localSandbox()` are such functions: their
   * sandboxes are then forked natively, each session in a working directory of its own
   * (`sessions/<sessionId>`).
   */
  open: () => ForkableSandboxSession | PromiseLike<ForkableSandboxSession>;
  /** A port of the sandbox per live session, for its bridge: their count is the capacity. */
  ports: readonly number[];
  /** Stop the sandbox once no session holds it, and open it again with the next. Default: `false`. */
  stopWhenUnused?: boolean;
}

/**
 * One sandbox for every session, each a view of it (`fork()`) with a port of its own and a
 * working directory of its own. Empty or repeated `ports` throw a `TypeError` at once.
 */
export declare function sharedSandbox(options: SharedSandboxOptions): SessionSandboxes & { readonly capacity: number };

export type SandboxPerSessionOptions =
  | {
      /** A new sandbox for a new session; `abortSignal` is the one `acquire()` was given, if any. */
      create: (
        sessionId: string,
        options: { abortSignal?: AbortSignal },
      ) => HarnessV1NetworkSandboxSession | PromiseLike<HarnessV1NetworkSandboxSession>;
      /** The sandbox of a session that comes back; nothing (or no `resume`) creates one. */
      resume?: (
        sessionId: string,
        options: { abortSignal?: AbortSignal },
      ) =>
        | HarnessV1NetworkSandboxSession
        | null
        | undefined
        | PromiseLike<HarnessV1NetworkSandboxSession | null | undefined>;
      /** How many sessions hold a sandbox at once. Default: unbounded. */
      maxSessions?: number;
      provider?: never;
    }
  | {
      /** In place of `create` and `resume`: `dockerSandbox()`, `localSandbox()` (driven natively), or any provider. */
      provider: HarnessV1SandboxProvider;
      maxSessions?: number;
      create?: never;
      resume?: never;
    };

/** A sandbox of its own for each session: stopped when it is suspended, destroyed when it is closed. */
export declare function sandboxPerSession(options: SandboxPerSessionOptions | NativeSandboxProvider): SessionSandboxes;

/** A view of a sandbox of `dockerSandbox()` or `localSandbox()`. */
export interface NativeSandboxSession extends HarnessV1NetworkSandboxSession {
  /** A view of the same sandbox with ports and a working directory of its own (default: a new one). */
  fork(options?: { ports?: number[]; workingDirectory?: string }): Promise<NativeSandboxSession>;
}

/**
 * What `dockerSandbox()` and `localSandbox()` return: a `HarnessV1SandboxProvider` (for
 * `new HarnessAgent({ sandbox })` or `sandboxPerSession()`), and a function that opens the
 * sandbox `name` (default: the `name` option, or `'shared'`): the `open` of `sharedSandbox()`.
 */
export type NativeSandboxProvider = HarnessV1SandboxProvider &
  ((options?: { name?: string; abortSignal?: AbortSignal }) => Promise<NativeSandboxSession>);

export interface DockerSandboxOptions {
  /** The image, on the engine already: nothing is pulled unless `pull`. */
  image: string;
  /** `unix:///path/docker.sock`, a socket path, or `tcp://host:port`. Default: `DOCKER_HOST`, then `/var/run/docker.sock`. */
  host?: string;
  /** Pull the image when the engine lacks it. Default: `false`. */
  pull?: boolean;
  /** The start of container names. Default: `harness-sessions-`. */
  namePrefix?: string;
  /** The name the function opens. Default: `'shared'`. */
  name?: string;
  /**
   * The user commands run as: numeric, `uid` or `uid:gid`. A name is refused (`SessionInputError` at
   * `user`): the file API runs as these ids, which a name would leave to the image. Default: `1000:1000`.
   */
  user?: string;
  /** Default: `/workspace`. */
  workingDirectory?: string;
  /** The user's `HOME`. Default: `/home/sandbox`. */
  home?: string;
  /**
   * The ports of each sandbox, listened on inside. The container keeps no network: each port is
   * reached on a port of the host's loopback picked for that sandbox (`getPortEndpoint()` gives
   * it), forwarded through the container's network namespace (needs root and the engine on this
   * host). Default: none.
   */
  ports?: number[];
  env?: Record<string, string>;
  /** Default: 1. */
  cpus?: number;
  /** Bytes, or `'512m'`, `'2g'`. Default: `'1g'`. */
  memory?: number | string;
  /** Processes at once, 8 or more. Default: 256. */
  pids?: number;
  /**
   * The bytes the sandbox's working directory, `HOME` and `/tmp` may hold together: bytes, or
   * `'64m'`, `'10g'`. Writes past it fail inside the sandbox with `ENOSPC`; the host's disk is
   * left alone. It is a sparse ext4 image per container, loop-mounted by this server: that needs
   * root, loop devices and the engine on this host. Default: `'10g'` where the host allows it, no
   * bound otherwise (said once on standard error); given, it is required (`createSession` fails
   * with a `SessionError` where it cannot be enforced).
   */
  diskBytes?: number | string;
  /**
   * Default: `'none'` (ports or not). `'host'` puts the container on the host's network: it then
   * reaches every service of the host's loopback (other sessions' ports, local databases, this
   * server's routes). A risk; only for trusted code.
   */
  network?: 'none' | 'host';
  /**
   * The only hosts the sandbox reaches, for the harness's model API: `'api.anthropic.com'` (port
   * 443) or `'host:port'`, through an HTTP CONNECT proxy of this server set as the container's
   * `HTTPS_PROXY`; `'127.0.0.1:port'` forwards that port of the container's loopback to the same
   * port of the host's. Default: none (no way out).
   */
  allowedHosts?: string[];
}

/** A container per session on a Docker Engine. */
export declare function dockerSandbox(options: DockerSandboxOptions): NativeSandboxProvider;

export interface LocalSandboxOptions {
  /** The folder that holds one folder per session, created when missing. */
  root: string;
  /** The ports of each session: this host's, on 127.0.0.1. */
  ports?: number[];
  /** The environment of every command. Default: `PATH`, `USER`, `LOGNAME`, `LANG`, `LC_ALL`, `TERM` of this process, and the session's `HOME` and `TMPDIR`. */
  env?: Record<string, string>;
  /** Pass this process's whole environment (its secrets too). Default: `false`. */
  inheritEnv?: boolean;
  /**
   * Absolute folders of this host, besides the session's, that the file API reaches (created when
   * missing, shared by every session, links confined beneath each): where harnesses bootstrap.
   * Default: `['/tmp/harness']` (Claude Code's `/tmp/harness/claude-code/`); `[]` for none.
   */
  allowedPaths?: string[];
  /** The name the function opens. Default: `'shared'`. */
  name?: string;
}

/** Processes on this host in a folder per session. NO ISOLATION: for development and tests. */
export declare function localSandbox(options: LocalSandboxOptions): NativeSandboxProvider;

// ─── The manager ────────────────────────────────────────────────────────────────────────────────

export interface SessionManagerOptions<METADATA> {
  /** The agent of a session, from its metadata: called when the session starts and resumes. */
  agent: (session: { id: string; metadata: METADATA }) => Promise<SessionAgent> | SessionAgent;
  /** How sessions get a sandbox: `sharedSandbox()`, `sandboxPerSession()`, or your own. */
  sandboxes: SessionSandboxes;
  /** Where sessions are kept. Default: in memory, `createMemorySessionStore()`. */
  store?: SessionStore<METADATA>;
  /** Suspend a session idle, or awaiting input, for this long, in milliseconds. Default: never. */
  idleTimeoutMs?: number;
  /** Close a session suspended for this long, in milliseconds. Default: never. */
  closeSuspendedAfterMs?: number;
  /** Cut a turn short after this long, in milliseconds. Default: never. */
  turnTimeoutMs?: number;
  /**
   * How long `interrupt()`, `close()`, `shutdown()` and `turnTimeoutMs` wait for a turn they cut
   * short to wind down before letting go of it (its harness session dropped, the session
   * `interrupted`), and `shutdown()` for writes the store refused. Default: 10,000 ms.
   */
  windDownMs?: number;
  /**
   * How long any one call into a store written in JavaScript (`save`, `get`, `list`,
   * `getResumeState`, `delete`) may take before it counts as failed (a write then kept in memory
   * and tried again, as a refused one). At `shutdown()` every call is bounded by `windDownMs`
   * instead. A record `get()` gives for another id is refused; a `list()` entry that is not a
   * summary is set aside and reported to `onError` (action `read`) once. Default: 30,000 ms.
   */
  storeTimeoutMs?: number;
  /** When every sandbox slot is taken, suspend the session idle the longest. Default: `true`. */
  suspendIdleWhenFull?: boolean;
  /** Answers approvals before anyone sees them; `undefined` leaves one to a person. */
  approve?: (
    approval: PendingApproval,
    context: { session: SessionSummary<METADATA> },
  ) => ApprovalVerdict | PromiseLike<ApprovalVerdict | undefined> | undefined;
  /** The ids of new sessions and of the messages of their turns. Default: `crypto.randomUUID`. */
  generateId?: () => string;
  /** What a client is told of an error in a turn. Default: `getHarnessErrorMessage`. */
  errorMessage?: (error: unknown) => string;
  /** Called with what fails in the background. Default: `console.error`. */
  onError?: (error: unknown, context: { action: string; sessionId?: string }) => void;
  /**
   * The chunks of a turn under way kept as they are for `reconnect()`; past it they are kept
   * compacted (the deltas of each part joined). Default: 20,000.
   */
  reconnectBufferChunks?: number;
  /**
   * The bytes (about: each chunk's JSON) queued for any one reader of a turn that is not reading
   * (its `stream`, a `reconnect()`, a `toUIMessageStreamResponse()` body): past it that reader is
   * ended with a `SessionError` of code `SESSION_READER_BEHIND`, its queue let go of; the turn and
   * its other readers go on (`reconnect()` reads it again). Default: 16 MiB.
   */
  readerBufferBytes?: number;
  /**
   * The bytes (about: each chunk's JSON) of a live turn's chunks kept for `reconnect()`. Past it
   * none are kept: a reader that reconnects is brought up to the turn from the reply so far (the
   * engine's, rebuilt as chunks: each part's text joined, the open parts left open), then reads it
   * live, so that the turn's text is not kept a second time. Default: 64 MiB.
   */
  reconnectBufferBytes?: number;
}

/** A user message: `useChat`'s last message, or its text. */
export interface SendOptions {
  message: string | UIMessage;
  /** What the agent is sent, when it differs from what the conversation keeps. */
  prompt?: string;
  /** Aborts the turn: the request's signal, so that the client's stop button stops it. */
  abortSignal?: AbortSignal;
  /**
   * Application-owned guidance for this turn only: told to the agent after the prompt, kept in
   * the reply's `metadata.instructionAddendum`, never as the user's words. At most 32,000 UTF-8
   * bytes, no NUL.
   */
  instructionAddendum?: string;
  /** Limits of this turn. */
  limits?: TurnLimits;
  /**
   * Asks a structured answer: the agent is told, after the prompt, to end its answer with one
   * JSON value matching `schema` (guidance, not constrained generation); {@link SessionTurn.output}
   * resolves to it once the turn ends, and the reply's `metadata.output` keeps it. A schema that
   * is not valid JSON Schema is refused (`SessionInputError`, path `output.schema`) before the turn.
   */
  output?: SessionOutputOptions;
  /**
   * Makes the request idempotent: the same id again with the same request returns the turn it
   * started (live, or its recorded reply replayed); with another request, a
   * `SessionConflictError`. A session keeps its last 100.
   */
  submissionId?: string;
}

/** The structured answer of a turn. */
export interface SessionOutputOptions {
  /**
   * A JSON Schema (draft 2020-12 unless its `$schema` names another; no remote `$ref`), at most
   * 100,000 bytes of JSON: told to the agent and used to validate its answer.
   */
  schema: Record<string, unknown> | boolean;
  /** What the answer is called, told to the agent. */
  name?: string;
  /** What the answer is, told to the agent. */
  description?: string;
}

/** The limits of one turn. */
export interface TurnLimits {
  /** A turn that starts more steps is cut short: "The turn reached its limit of <n> steps." */
  maxSteps?: number;
  /** Overrides `turnTimeoutMs` for this turn. */
  timeoutMs?: number;
}

/** The answers to what a session `awaiting-input` waits for. */
export interface ContinueOptions {
  /** The last assistant message as `useChat` sends it back, the answers filled in. */
  message?: UIMessage;
  toolApprovalContinuations?: readonly ToolApprovalResponse[];
  toolResultContinuations?: readonly ToolResultPart[];
  abortSignal?: AbortSignal;
  /**
   * As {@link SendOptions.instructionAddendum}: it accompanies the words a resumed turn is told.
   * A continuation of a paused turn carries no words to the agent: the addendum is then told with
   * the next prompt the agent receives (the next `send()`, or the words of a resumed turn), and
   * until then the reply's `metadata.instructionAddendumUntold` is `true`.
   */
  instructionAddendum?: string;
  limits?: TurnLimits;
  /**
   * As {@link SendOptions.output}: the continued answer is judged when the turn ends. The
   * guidance is told only with the words of a resumed turn (a continuation carries none): ask it
   * on the `send()` that started the turn too.
   */
  output?: SessionOutputOptions;
  /** As {@link SendOptions.submissionId}, for the answers. */
  submissionId?: string;
}

/** The init of a turn's response. */
export interface SessionTurnResponseInit {
  status?: number;
  statusText?: string;
  headers?: HeadersInit;
}

/** A turn under way. */
export interface SessionTurn<METADATA = unknown> {
  /** The turn as a UI message stream, what `useChat` reads. */
  readonly stream: ReadableStream<UIMessageChunk>;
  /** {@link stream} as the response of a route handler. */
  toUIMessageStreamResponse(init?: SessionTurnResponseInit): Response;
  /** The session once the turn is over and written: `idle`, or `awaiting-input`. */
  readonly done: Promise<SessionSummary<METADATA>>;
  /**
   * The structured answer, once the turn is over: the first valid JSON value of the final text
   * (tried from the last), or a rejection with {@link SessionOutputError}; `undefined` when no
   * `output` was asked. Nobody need read it: left unread, its rejection is not an unhandled one.
   */
  readonly output: Promise<unknown>;
}

/** What happens to the sessions, for a list or a notification to follow. */
export type SessionEvent<METADATA = unknown> =
  | { type: 'updated'; session: SessionSummary<METADATA> }
  | { type: 'deleted'; sessionId: string };

/** The sessions of an application with its coding agents. */
export interface SessionManager<METADATA = unknown> {
  /**
   * Opens a session in the background and returns it `preparing`. With `initialHistory` (an
   * addition), the session starts with that conversation: checked whole first (a
   * `SessionInputError` naming the item and the rule, and nothing created), written as its
   * messages, and told to the agent with its first turn.
   */
  create(options: { id?: string; metadata: METADATA; initialHistory?: ImportedItem[] }): Promise<SessionSummary<METADATA>>;
  get(id: string): Promise<SessionRecord<METADATA> | undefined>;
  list(): Promise<SessionSummary<METADATA>[]>;
  send(id: string, options: SendOptions): Promise<SessionTurn<METADATA>>;
  continue(id: string, options: ContinueOptions): Promise<SessionTurn<METADATA>>;
  /**
   * Runs a shell command in the session's sandbox, in the directory its harness works in, without
   * the agent and without adding to the conversation. Waits for a turn under way; a message sent
   * meanwhile waits for the command. A suspended session is resumed first.
   */
  exec(id: string, options: ExecOptions): Promise<SessionExecResult>;
  /**
   * The turn under way of the session, from its first chunk and then live, as its first client
   * got it; `undefined` when no turn is under way (or the session is unknown).
   */
  reconnect(id: string): Promise<SessionTurn<METADATA> | undefined>;
  /**
   * Replaces the metadata of the session, whatever its status (not activity: `updatedAt` stays).
   * With a function, it is called with the metadata as they stand, under the session's command
   * lock: no other command on the session (another `update()`, with a function or not) comes
   * between its read and its write; sessions apart do not wait for each other. What it throws
   * is thrown, and nothing changes.
   */
  update(
    id: string,
    changes: { metadata: ((metadata: METADATA) => METADATA) | METADATA },
  ): Promise<SessionSummary<METADATA>>;
  interrupt(id: string): Promise<void>;
  suspend(id: string): Promise<SessionSummary<METADATA>>;
  close(id: string): Promise<SessionSummary<METADATA>>;
  delete(id: string): Promise<void>;
  subscribe(listener: (event: SessionEvent<METADATA>) => void): () => void;
  shutdown(): Promise<void>;
}

/** Creates the session manager of an application. */
export declare function createSessionManager<METADATA = unknown>(
  options: SessionManagerOptions<METADATA>,
): SessionManager<METADATA>;

/** What a client is told of an error: the messages of harness errors, `An error occurred.` else. */
export declare function getHarnessErrorMessage(error: unknown): string;

// ─── Errors ─────────────────────────────────────────────────────────────────────────────────────

/** Every error of the package. `isInstance()` recognizes one from any copy of the package. */
export declare class SessionError extends Error {
  constructor(message: string, options?: { cause?: unknown });
  /**
   * A stable string: what went wrong, for programs. A plain `SessionError` has `SESSION_ERROR`, or
   * `SESSION_CHUNK`: a chunk of the agent's stream could not be carried (a `BigInt`, a cycle, a
   * getter that throws, nesting past 100 levels, a field of the wrong type), and ended its turn
   * alone; see {@link SessionChunkError}.
   */
  readonly code: string;
  /** The HTTP status an API answers with. */
  readonly statusCode: number;
  static isInstance(error: unknown): error is SessionError;
}

/**
 * What `onError` is given (action `'turn'`) when a chunk of the agent's stream cannot be carried:
 * a `SessionError` whose `code` is `SESSION_CHUNK`. The turn ends there, its client sent an
 * `error` chunk and its reply stored as far as the client read it; every other turn goes on.
 */
export type SessionChunkError = SessionError & {
  readonly code: 'SESSION_CHUNK';
  /** The `type` of the chunk at fault, when it had a string one. */
  readonly chunkType?: string;
};

/**
 * No session has this id (404). Its `isInstance()`, and those of the classes below, also recognise
 * the errors of `ai-sdk-harness-sessions`, whose own `isInstance()` recognises these.
 */
export declare class SessionNotFoundError extends SessionError {
  /** The message is `No session <sessionId>.` */
  constructor(sessionId: string);
  readonly code: 'SESSION_NOT_FOUND';
  readonly statusCode: 404;
  readonly sessionId: string;
  static isInstance(error: unknown): error is SessionNotFoundError;
}

/** The session cannot do it in its status (409). */
export declare class SessionConflictError extends SessionError {
  /** `message` defaults to `The session is <status>.` */
  constructor(sessionId: string, status: SessionStatus, message?: string);
  readonly code: 'SESSION_CONFLICT';
  readonly statusCode: 409;
  readonly sessionId: string;
  readonly status: SessionStatus;
  static isInstance(error: unknown): error is SessionConflictError;
}

/** Every sandbox slot is taken by a session that is not idle (503). */
export declare class SessionCapacityError extends SessionError {
  constructor(capacity: number);
  readonly code: 'SESSION_CAPACITY';
  readonly statusCode: 503;
  readonly capacity: number;
  static isInstance(error: unknown): error is SessionCapacityError;
}

/** An argument of the wrong shape (400). */
export declare class SessionInputError extends SessionError {
  /** `message` defaults to `<path> is not valid.` */
  constructor(path: string, message?: string);
  constructor(options: { path: string; message?: string });
  readonly code: 'SESSION_INPUT';
  readonly statusCode: 400;
  /** The path of the argument or field at fault: `message.parts[2].type`, `sandboxes.capacity`, `ports[1]`, `env.HOME`. */
  readonly path: string;
  static isInstance(error: unknown): error is SessionInputError;
}

/** One validation error of a structured answer. */
export interface SessionOutputProblem {
  /** The JSON Pointer of the value at fault in the answer (`''` for the whole answer). */
  instancePath: string;
  /** What is wrong with it. */
  message: string;
}

/**
 * The turn's structured answer is missing or does not match its schema: what
 * {@link SessionTurn.output} rejects with. An HTTP API answers 422.
 */
export declare class SessionOutputError extends SessionError {
  constructor(details: { code: SessionOutputErrorCode; message?: string; errors?: SessionOutputProblem[] });
  /**
   * `output_invalid`: JSON in the answer, none valid (`errors` are the last candidate's);
   * `output_missing`: no JSON in the final text, or the turn was cut short before it was judged;
   * `output_pending`: the turn paused awaiting input (pass `output` again to `continue()`).
   */
  readonly code: SessionOutputErrorCode;
  readonly statusCode: 422;
  readonly errors: SessionOutputProblem[];
  static isInstance(error: unknown): error is SessionOutputError;
}

/**
 * The store's database cannot be reached (a PostgreSQL server that refuses or does not answer,
 * a refused login or TLS handshake) (503). The message names the server, never the password.
 */
export declare class SessionStoreUnavailableError extends SessionError {
  constructor(message: string);
  readonly code: 'SESSION_STORE_UNAVAILABLE';
  static isInstance(error: unknown): error is SessionStoreUnavailableError;
}

/** What a structured answer went wrong with: see {@link SessionOutputError.code}. */
export type SessionOutputErrorCode = 'output_invalid' | 'output_missing' | 'output_pending';
