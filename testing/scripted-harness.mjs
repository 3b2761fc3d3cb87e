/**
 * A harness without a model, for tests and demos: a real `HarnessV1` that `HarnessAgent` drives
 * like Claude Code, answering each prompt deterministically from what it says.
 *
 * ```js
 * const agent = new HarnessAgent({ harness: createScriptedHarness(), permissionMode: 'allow-reads' });
 * const session = await agent.createSession({ sandboxSession: createFakeSandbox() });
 * const result = await agent.stream({ session, prompt: 'write hello.txt: hi there' });
 * ```
 *
 * ## The command language
 *
 * A prompt is a command when it matches one of these (case does not matter), plain words otherwise:
 *
 * | Prompt                                                | What the harness does                                   |
 * | ----------------------------------------------------- | ------------------------------------------------------- |
 * | anything else                                         | Answers `You said: <prompt>`, word by word              |
 * | `help`, `/help`                                       | Lists the commands                                      |
 * | `what did I say?`, `/history`                         | Answers with the prompts of the earlier turns           |
 * | `list files [in <dir>]`, `ls [<dir>]`, `/ls [<dir>]`  | Lists a folder of the working directory (tool `list`)   |
 * | `read <file>`, `cat <file>`, `/read <file>`           | Reads a file (tool `read`); a missing one is a tool error |
 * | `write <file>: <text>`, `/write <file> <text>`        | Writes a file (tool `write`), asking approval first     |
 * | `run <command>`, `/run <command>`                     | Runs a shell command (tool `bash`), asking approval first |
 * | `/tool <name> [<json input>]`                         | Calls a tool of the application (see below)             |
 * | `/tools [{"toolName": …, "input": …}, …]`             | Calls several of them in one step                       |
 * | `/ask <question> \| <option> \| <option>…`            | Asks a question (`askUserQuestions`), options `Yes`/`No` by default |
 * | `/sleep <ms>`                                         | Says it sleeps, sleeps (an abort cuts it short), says it slept |
 * | `/think <thought>`                                    | Sends `<thought>` as reasoning, then a short answer     |
 * | `/say <line>`                                         | Answers `<line>` as it is (the rest of the prompt unsaid) |
 * | `/fail [<message>]`                                   | Fails the turn with an `Error` (masked by `getHarnessErrorMessage`) |
 * | `/fail-harness [<message>]`                           | Fails it with a `HarnessError` (whose message passes through) |
 * | the answers told after a suspension (`The session was suspended while you waited…`) | Runs each approved `bash`/`write` without asking again, says each denial |
 *
 * Its own tools (`list`, `read`, `write`, `bash`) run in the session's working directory through
 * the sandbox. Approvals follow the agent's `permissionMode`, as with Claude Code: `allow-reads`
 * asks before `write` and `bash`, `allow-edits` before `bash` only, `allow-all` (the default of
 * `HarnessAgent`) never asks. A denied call is not run, and the answer says it was denied.
 *
 * `/tool` and `/tools` call tools the application declares on the agent (`tools`): `HarnessAgent`
 * runs those with an `execute`, and pauses the turn for `toolResultContinuations` otherwise; with
 * `toolApproval: { <name>: 'user-approval' }`, each asks approval first, all of a `/tools` step in
 * one pause. `/ask` pauses the same way: answer with the output of `askUserQuestions`,
 * `{ action: 'answered', answers: { 'question-1': { optionIds: ['option-1'] } } }`.
 *
 * ## What it keeps
 *
 * The session keeps its conversation (the prompts and the answers) in its lifecycle state: it
 * survives `detach()`/`stop()` and `createSession({ resumeFrom })` in another agent or process, and
 * `what did I say?` proves it. A turn suspended with `suspendTurn()` (or by `stop()` while it is
 * unfinished) goes on from its `continue-turn` state exactly where it stopped. `compact()` drops the
 * answers from the conversation, keeping the prompts, and reports a `compaction` on the next turn.
 * Words count as tokens in the usage it reports.
 *
 * ## A bridge, as Claude Code and Codex have
 *
 * With `bridge`, a session runs on a bridge: a process in the sandbox that its state points at
 * (`data.bridge: { url, token }`). `stop()` of an idle session stops it; `stop()` of a session with
 * an unfinished turn (`doSuspendTurn`) leaves it running, for a later process to reattach to; what
 * stops the sandbox stops it too (`harness.stopBridges(sessionId)`, which a test's lease calls on
 * `suspend()`). A resume whose `data.bridge` is still running reattaches to it, turn and all; one
 * whose bridge is gone waits for it `startupTimeoutMs` (two minutes by default, as Claude Code),
 * then starts another, the turn that ran on the old one lost (`bridgeWait` in `calls`). A resume
 * without `data.bridge` starts a new one at once.
 */

import { HARNESS_V1_BUILTIN_TOOLS, HarnessError } from '@ai-sdk/harness';
import { jsonSchema, tool } from 'ai';

import { parseCommand } from './scripted-commands.mjs';
import { ScriptedTurn, SUSPENDED, countWords } from './scripted-turn.mjs';

/**
 * @typedef {import('@ai-sdk/harness').HarnessV1} HarnessV1
 * @typedef {import('@ai-sdk/harness').HarnessV1Session} HarnessV1Session
 * @typedef {import('@ai-sdk/harness').HarnessV1StartOptions} HarnessV1StartOptions
 * @typedef {import('@ai-sdk/harness').HarnessV1PromptControl} HarnessV1PromptControl
 * @typedef {import('@ai-sdk/harness').HarnessV1StreamPart} HarnessV1StreamPart
 * @typedef {import('@ai-sdk/harness').HarnessV1ContinueTurnState} HarnessV1ContinueTurnState
 * @typedef {import('@ai-sdk/harness').HarnessV1ResumeSessionState} HarnessV1ResumeSessionState
 * @typedef {import('ai').JSONValue} JSONValue
 * @typedef {import('./scripted-turn.mjs').TurnJournal} TurnJournal
 * @typedef {import('./scripted-turn.mjs').Compaction} Compaction
 */

/**
 * @typedef {object} ScriptedHarnessOptions
 * @property {string} [harnessId] Default: `'scripted'`.
 * @property {number} [wordDelayMs] The pause between two words of an answer. Default: `0`.
 * @property {{ startupTimeoutMs?: number }} [bridge] Run sessions on a bridge (see above).
 */

/**
 * A call the harness received, for tests to assert on.
 *
 * @typedef {object} ScriptedHarnessCall
 * @property {'doStart' | 'doPromptTurn' | 'doContinueTurn' | 'doSuspendTurn' | 'doCompact' | 'doDetach' | 'doStop' | 'doDestroy' | 'submitToolApproval' | 'submitToolResult' | 'bridgeWait'} method
 * @property {string} sessionId
 * @property {unknown} [detail] What the call carried: the prompt, the answer, whether it resumed…
 */

/**
 * The state of a session, as its lifecycle methods return it in `data`.
 *
 * @typedef {object} ScriptedSessionData
 * @property {Array<{ role: 'user' | 'assistant', text: string }>} history
 * @property {Compaction} [compaction] What `compact()` did, reported by the next turn.
 * @property {TurnJournal} [turn] The unfinished turn, in a `continue-turn` state.
 * @property {{ url: string, token: string }} [bridge] The bridge the session runs on.
 */

/**
 * Creates a harness that needs no model: see the command language above.
 *
 * @param {ScriptedHarnessOptions} [options]
 * @returns {HarnessV1 & { calls: ScriptedHarnessCall[], stopBridges: (sessionId: string) => void }}
 */
export function createScriptedHarness(options = {}) {
  const harnessId = options.harnessId ?? 'scripted';
  const wordDelayMs = options.wordDelayMs ?? 0;
  /** @type {ScriptedHarnessCall[]} */
  const calls = [];
  const bridges = options.bridge === undefined ? undefined : new Bridges(options.bridge.startupTimeoutMs ?? 120_000);
  return {
    specificationVersion: 'harness-v1',
    harnessId,
    builtinTools: BUILTIN_TOOLS,
    supportsBuiltinToolApprovals: true,
    calls,
    stopBridges: (sessionId) => bridges?.stopAll(sessionId),
    doStart: async (start) => {
      const data = readData(start.continueFrom?.data ?? start.resumeFrom?.data);
      const isResume = start.resumeFrom !== undefined || start.continueFrom !== undefined;
      calls.push({ method: 'doStart', sessionId: start.sessionId, detail: { isResume } });
      if (bridges !== undefined) {
        const stale = data.bridge !== undefined && !bridges.running(data.bridge);
        if (stale) {
          // The bridge the state points at is gone: wait for it to answer, as Claude Code does,
          // then start another; the turn that ran on the old one is lost.
          calls.push({ method: 'bridgeWait', sessionId: start.sessionId, detail: { url: data.bridge.url } });
          await bridges.waitForStartup(start.abortSignal);
          delete data.turn;
        }
        if (data.bridge === undefined || stale) data.bridge = bridges.start(start.sessionId);
      }
      return new ScriptedSession({
        harnessId,
        wordDelayMs,
        start,
        data,
        isResume,
        bridges,
        record: (call) => calls.push(call),
      });
    },
  };
}

/** The bridges of a harness's sessions that are running. */
class Bridges {
  /** @type {Map<string, string>} token → session id */
  #running = new Map();
  #next = 1;

  /** @param {number} startupTimeoutMs */
  constructor(startupTimeoutMs) {
    this.startupTimeoutMs = startupTimeoutMs;
  }

  /** @param {string} sessionId */
  start(sessionId) {
    const number = this.#next++;
    const token = `bridge-token-${number}`;
    this.#running.set(token, sessionId);
    return { url: `http://127.0.0.1:${41000 + number}`, token };
  }

  /** @param {{ token: string }} bridge */
  running(bridge) {
    return this.#running.has(bridge.token);
  }

  /** @param {{ token: string } | undefined} bridge */
  stop(bridge) {
    if (bridge !== undefined) this.#running.delete(bridge.token);
  }

  /** @param {string} sessionId */
  stopAll(sessionId) {
    for (const [token, owner] of this.#running) if (owner === sessionId) this.#running.delete(token);
  }

  /** @param {AbortSignal | undefined} abortSignal */
  waitForStartup(abortSignal) {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, this.startupTimeoutMs);
      abortSignal?.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          reject(abortSignal.reason);
        },
        { once: true },
      );
    });
  }
}

/** The harness's own tools, and the question tool `HarnessAgent` knows. */
const BUILTIN_TOOLS = {
  list: tool({
    description: 'List the files of a folder of the working directory',
    inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' } } }),
  }),
  read: HARNESS_V1_BUILTIN_TOOLS.read,
  write: HARNESS_V1_BUILTIN_TOOLS.write,
  bash: HARNESS_V1_BUILTIN_TOOLS.bash,
  askUserQuestions: HARNESS_V1_BUILTIN_TOOLS.askUserQuestions,
};

/**
 * The state a session starts from: a fresh one, or the `data` of a lifecycle state.
 *
 * @param {unknown} data
 * @returns {ScriptedSessionData}
 */
function readData(data) {
  if (data === undefined) return { history: [] };
  const candidate = /** @type {ScriptedSessionData} */ (data);
  if (typeof candidate !== 'object' || candidate === null || !Array.isArray(candidate.history)) {
    throw new HarnessError({ message: 'This lifecycle state was not made by a scripted harness.' });
  }
  return structuredClone(candidate);
}

/**
 * @typedef {object} SessionOptions
 * @property {string} harnessId
 * @property {number} wordDelayMs
 * @property {HarnessV1StartOptions} start
 * @property {ScriptedSessionData} data
 * @property {boolean} isResume
 * @property {Bridges} [bridges]
 * @property {(call: ScriptedHarnessCall) => void} record
 */

/**
 * A session of the scripted harness: its conversation, and the turn under way.
 *
 * A turn runs in slices: `doPromptTurn` opens the first, and each `doContinueTurn` a new one that
 * the turn's events go to from then on, the previous slice's `done` resolving. A slice's
 * `abortSignal` cuts the turn short while it works, not once it waits for the host in that slice:
 * a paused turn is cut by continuing it with an aborted signal.
 *
 * @implements {HarnessV1Session}
 */
class ScriptedSession {
  /** @param {SessionOptions} options */
  constructor({ harnessId, wordDelayMs, start, data, isResume, bridges, record }) {
    this.sessionId = start.sessionId;
    this.isResume = isResume;
    this.harnessId = harnessId;
    this.wordDelayMs = wordDelayMs;
    this.start = start;
    this.data = data;
    this.record = record;
    this.bridges = bridges;
    /** The turn under way, and the slice its events go to. @type {{ turn: ScriptedTurn, slice: Slice } | undefined} */
    this.live = undefined;
    this.ended = false;
  }

  /** @param {import('@ai-sdk/harness').HarnessV1PromptTurnOptions} options */
  async doPromptTurn({ prompt, emit, abortSignal }) {
    this.assertActive();
    const text = promptText(prompt);
    this.log('doPromptTurn', { prompt: text });
    if (abortSignal?.aborted) return abortedControl(abortSignal);
    this.dropTurn();
    return this.runTurn(newJournal(this.data, text), { emit, abortSignal });
  }

  /** @param {import('@ai-sdk/harness').HarnessV1ContinueTurnOptions} options */
  async doContinueTurn({ emit, abortSignal }) {
    this.assertActive();
    this.log('doContinueTurn');
    if (abortSignal?.aborted) {
      this.dropTurn();
      delete this.data.turn;
      return abortedControl(abortSignal);
    }
    if (this.live !== undefined) {
      this.live.slice.settle();
      this.live.slice = new Slice({ turn: this.live.turn, emit, abortSignal });
      return this.control(this.live.turn, this.live.slice);
    }
    if (this.data.turn !== undefined) return this.runTurn(this.data.turn, { emit, abortSignal });
    return finishedControl(emit);
  }

  /** @returns {Promise<HarnessV1ContinueTurnState>} */
  async doSuspendTurn() {
    this.assertActive();
    this.log('doSuspendTurn');
    const state = { type: /** @type {const} */ ('continue-turn'), ...this.lifecycleBase(this.data) };
    this.dropTurn();
    return state;
  }

  /** @param {string} [customInstructions] */
  async doCompact(customInstructions) {
    this.assertActive();
    this.log('doCompact', { customInstructions });
    this.data.compaction = compact(this.data, customInstructions);
  }

  /** @returns {Promise<HarnessV1ResumeSessionState>} */
  async doDetach() {
    this.assertActive();
    this.log('doDetach');
    return this.end();
  }

  /** @returns {Promise<HarnessV1ResumeSessionState>} */
  async doStop() {
    this.assertActive();
    this.log('doStop');
    this.bridges?.stop(this.data.bridge);
    return this.end();
  }

  async doDestroy() {
    this.log('doDestroy');
    this.bridges?.stop(this.data.bridge);
    this.end();
  }

  /**
   * Runs the turn of `journal` (from its start, or again after a suspension), in a first slice.
   *
   * @param {TurnJournal} journal
   * @param {{ emit: (part: HarnessV1StreamPart) => void, abortSignal?: AbortSignal }} sliceOptions
   */
  runTurn(journal, { emit, abortSignal }) {
    const turn = new ScriptedTurn({
      journal,
      idPrefix: `${this.sessionId}-${journal.number}`,
      wordDelayMs: this.wordDelayMs,
      onWait: () => this.live?.slice.ignoreAbort(),
      onResume: () => this.live?.slice.honourAbort(),
    });
    this.data.turn = journal;
    const slice = new Slice({ turn, emit, abortSignal });
    this.live = { turn, slice };
    this.execute(turn).then(
      () => this.endTurn(turn),
      (error) => this.endTurn(turn, error === SUSPENDED ? undefined : error),
    );
    return this.control(turn, slice);
  }

  /**
   * Answers the turn's prompt with its command.
   *
   * @param {ScriptedTurn} turn
   */
  async execute(turn) {
    const { prompt, number, compaction } = turn.journal;
    if (compaction !== undefined) turn.deliver({ type: 'compaction', trigger: 'manual', ...compaction });
    const previousPrompts = this.data.history
      .filter((entry) => entry.role === 'user')
      .map((entry) => entry.text)
      .slice(0, number - 1);
    await parseCommand(prompt)({
      turn,
      sandbox: this.start.sandboxSession,
      workDir: this.start.sessionWorkDir,
      permissionMode: this.start.permissionMode ?? 'allow-all',
      previousPrompts,
    });
    turn.finish();
  }

  /**
   * Ends `turn`, unless it was dropped: its slice settles, its answer joins the conversation.
   *
   * @param {ScriptedTurn} turn
   * @param {unknown} [error]
   */
  endTurn(turn, error) {
    if (this.live?.turn !== turn) return;
    this.live.slice.settle(error);
    this.live = undefined;
    delete this.data.turn;
    if (turn.reply !== '') this.data.history.push({ role: 'assistant', text: turn.reply });
  }

  /**
   * Stops the turn under way, if any: its slice resolves, or rejects with `error`. Its journal
   * stays, for a continuation.
   *
   * @param {unknown} [error]
   */
  dropTurn(error) {
    if (this.live === undefined) return;
    const { turn, slice } = this.live;
    this.live = undefined;
    turn.stop(SUSPENDED);
    slice.settle(error);
  }

  /**
   * What `HarnessAgent` drives a slice of `turn` with.
   *
   * @param {ScriptedTurn} turn
   * @param {Slice} slice
   * @returns {HarnessV1PromptControl}
   */
  control(turn, slice) {
    return {
      done: slice.done,
      submitToolApproval: async ({ approvalId, approved, reason }) => {
        this.log('submitToolApproval', { approvalId, approved, reason });
        turn.answer(approvalId, { approved, ...(reason === undefined ? {} : { reason }) });
      },
      submitToolResult: async ({ toolCallId, output, isError }) => {
        this.log('submitToolResult', { toolCallId, output, isError });
        turn.answer(toolCallId, { output: toJson(output ?? null), ...(isError ? { isError } : {}) });
      },
    };
  }

  /**
   * Ends the session, a turn under way failing, and returns its resume state.
   *
   * @returns {HarnessV1ResumeSessionState}
   */
  end() {
    this.dropTurn(new HarnessError({ message: `Scripted session ${this.sessionId} ended during its turn.` }));
    this.ended = true;
    return { type: 'resume-session', ...this.lifecycleBase({ ...this.data, turn: undefined }) };
  }

  /** @param {ScriptedSessionData} data */
  lifecycleBase(data) {
    return { harnessId: this.harnessId, specificationVersion: /** @type {const} */ ('harness-v1'), data: toJson(data) };
  }

  assertActive() {
    if (this.ended) throw new HarnessError({ message: `Scripted session ${this.sessionId} has ended.` });
  }

  /**
   * @param {ScriptedHarnessCall['method']} method
   * @param {unknown} [detail]
   */
  log(method, detail) {
    this.record({ method, sessionId: this.sessionId, ...(detail === undefined ? {} : { detail }) });
  }
}

/**
 * A slice of a turn: what one `doPromptTurn` or `doContinueTurn` of it returned.
 */
class Slice {
  /**
   * Opens the slice: the turn's events go to `emit` from now on.
   *
   * @param {{ turn: ScriptedTurn, emit: (part: HarnessV1StreamPart) => void, abortSignal?: AbortSignal }} options
   */
  constructor({ turn, emit, abortSignal }) {
    this.abortSignal = abortSignal;
    this.cut = () => turn.stop(abortSignal?.reason);
    /** @type {(error?: unknown) => void} */
    this.settleDone = () => {};
    /**
     * Resolves when the turn ends or moves to another slice; rejects when it fails or is cut short.
     *
     * @type {Promise<void>}
     */
    this.done = new Promise((/** @type {(value?: void) => void} */ resolve, reject) => {
      this.settleDone = (error) => (error === undefined ? resolve() : reject(error));
    });
    turn.emit = emit;
    emit({ type: 'stream-start' });
    this.honourAbort();
  }

  /**
   * Resolves `done`, or rejects it with `error`.
   *
   * @param {unknown} [error]
   */
  settle(error) {
    this.ignoreAbort();
    this.settleDone(error);
  }

  /** Stops listening to the slice's signal. */
  ignoreAbort() {
    this.abortSignal?.removeEventListener('abort', this.cut);
  }

  /** Listens to the slice's signal: cuts the turn now if it aborted meanwhile. */
  honourAbort() {
    if (this.abortSignal?.aborted) this.cut();
    else this.abortSignal?.addEventListener('abort', this.cut, { once: true });
  }
}

/**
 * Starts a turn: its prompt joins the conversation, and the compaction to report moves into it.
 *
 * @param {ScriptedSessionData} data
 * @param {string} prompt
 * @returns {TurnJournal}
 */
function newJournal(data, prompt) {
  data.history.push({ role: 'user', text: prompt });
  const number = data.history.filter((entry) => entry.role === 'user').length;
  const { compaction } = data;
  delete data.compaction;
  return { prompt, number, delivered: 0, answers: {}, outputs: {}, ...(compaction === undefined ? {} : { compaction }) };
}

/**
 * The control of a slice whose signal was aborted before it started: `done` rejects with the
 * reason, which `HarnessAgent` reports as an abort.
 *
 * @param {AbortSignal} abortSignal
 * @returns {HarnessV1PromptControl}
 */
function abortedControl(abortSignal) {
  const done = Promise.reject(abortSignal.reason);
  done.catch(() => {});
  return { done, submitToolResult: async () => {}, submitToolApproval: async () => {} };
}

/**
 * The control of a continuation with nothing left to continue: the turn ended meanwhile.
 *
 * @param {(part: HarnessV1StreamPart) => void} emit
 * @returns {HarnessV1PromptControl}
 */
function finishedControl(emit) {
  emit({ type: 'stream-start' });
  emit({
    type: 'finish',
    finishReason: { unified: 'stop', raw: undefined },
    totalUsage: {
      inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: 0, text: 0, reasoning: undefined },
    },
  });
  return { done: Promise.resolve(), submitToolResult: async () => {}, submitToolApproval: async () => {} };
}

/**
 * Drops the answers from the conversation, keeping the prompts.
 *
 * @param {ScriptedSessionData} data
 * @param {string | undefined} customInstructions
 */
function compact(data, customInstructions) {
  const tokensBefore = data.history.reduce((sum, entry) => sum + countWords(entry.text), 0);
  data.history = data.history.filter((entry) => entry.role === 'user');
  const tokensAfter = data.history.reduce((sum, entry) => sum + countWords(entry.text), 0);
  const kept = `${data.history.length} prompt${data.history.length === 1 ? '' : 's'}`;
  const summary = `Dropped the answers, kept ${kept}${customInstructions ? `: ${customInstructions}` : ''}.`;
  return { summary, tokensBefore, tokensAfter };
}

/**
 * A deep copy of `value` as plain JSON, as lifecycle states and answers are kept.
 *
 * @param {unknown} value
 * @returns {JSONValue}
 */
function toJson(value) {
  return JSON.parse(JSON.stringify(value));
}

/**
 * The text of a prompt: a string, or the text parts of a user message.
 *
 * @param {import('@ai-sdk/harness').HarnessV1Prompt} prompt
 * @returns {string}
 */
function promptText(prompt) {
  if (typeof prompt === 'string') return prompt;
  if (typeof prompt.content === 'string') return prompt.content;
  return prompt.content
    .filter((part) => part.type === 'text')
    .map((part) => /** @type {{ text: string }} */ (part).text)
    .join('\n');
}
