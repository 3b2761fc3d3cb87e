/**
 * An agent for fast lifecycle tests, without `HarnessAgent`: it has the shape the session manager
 * needs (`createSession`, `stream`, `continueStream`), its sessions and turns follow the rules of
 * the real ones, and a script says what each call does.
 *
 * ```js
 * const gate = createDeferred();
 * const agent = createFakeAgent({ turns: [{ text: 'hello' }, { hold: gate.promise }, { approvals: [{ toolName: 'bash' }] }] });
 * ```
 *
 * The script is a queue per kind of call, consumed in order (push to `agent.script.*` at any
 * time); a call with nothing queued does the default: a session opens, a turn answers
 * `You said: <prompt>` (`Continued.` for a continuation). Every call is recorded in `agent.calls`.
 *
 * The rules it keeps, as `HarnessAgent` does: one turn at a time (`already has a turn in
 * progress`); a turn that ends on approvals or tool calls leaves the session with an unfinished
 * turn, which only `continueStream` accepts; a handle is dead after `detach()`, `stop()` or
 * `suspendTurn()`; aborting a turn's signal ends its stream with an `abort` chunk and the session
 * is reusable; `stop()` returns `{ type: 'resume-session', harnessId: 'fake', … }` with a
 * `continueFrom` while a turn is unfinished. Streams go through `toUIMessageStream` of `ai`, so
 * its options behave as they do with a real agent.
 */

import { toUIMessageStream } from 'ai';

/**
 * @typedef {import('ai').TextStreamPart<import('ai').ToolSet>} TextStreamPart
 * @typedef {import('ai').LanguageModelUsage} LanguageModelUsage
 * @typedef {import('ai').ToolApprovalResponse} ToolApprovalResponse
 * @typedef {import('ai').ToolResultPart} ToolResultPart
 * @typedef {import('ai').UIMessageStreamOptions<import('ai').UIMessage>} UIMessageStreamOptions
 * @typedef {import('@ai-sdk/harness').HarnessV1PendingToolApproval} PendingToolApproval
 * @typedef {import('@ai-sdk/harness').HarnessV1PendingToolResult} PendingToolResult
 */

/**
 * What a call does before it resolves.
 *
 * @typedef {object} FakeCallScript
 * @property {number} [delayMs] Wait this long first.
 * @property {PromiseLike<unknown>} [gate] Wait for it first: a call that hangs until released.
 * @property {unknown} [fail] Then reject with it.
 */

/**
 * What a turn does: `stream()` or `continueStream()` first does what {@link FakeCallScript} says,
 * then the turn streams.
 *
 * @typedef {FakeCallScript & {
 *   text?: string,
 *   reasoning?: string,
 *   parts?: TextStreamPart[],
 *   approvals?: FakeToolCall[],
 *   toolCalls?: FakeToolCall[],
 *   hold?: PromiseLike<unknown>,
 *   waitForAbort?: boolean,
 *   error?: unknown,
 *   usage?: Partial<LanguageModelUsage>,
 * }} FakeTurnScript
 */

/**
 * A tool call a turn ends on.
 *
 * @typedef {object} FakeToolCall
 * @property {string} toolName
 * @property {unknown} [input] Default: `{}`.
 * @property {string} [toolCallId] Default: generated.
 * @property {string} [approvalId] For an approval. Default: generated.
 */

/**
 * @typedef {object} FakeAgentScript
 * @property {FakeCallScript[]} [createSession]
 * @property {FakeTurnScript[]} [turns] For `stream()` and `continueStream()` alike.
 * @property {FakeCallScript[]} [stop]
 * @property {FakeCallScript[]} [detach]
 * @property {FakeCallScript[]} [destroy]
 */

/**
 * @typedef {object} FakeAgentCall
 * @property {'createSession' | 'stream' | 'continueStream' | 'detach' | 'stop' | 'destroy' | 'suspendTurn' | 'compact'} method
 * @property {string} sessionId
 * @property {Record<string, unknown>} [options] What the call was given.
 */

/**
 * The resume state of a fake session: plain JSON, as a real one.
 *
 * @typedef {{
 *   type: 'resume-session',
 *   harnessId: 'fake',
 *   specificationVersion: 'harness-v1',
 *   data: FakeSessionData,
 *   continueFrom?: FakeContinueTurnState,
 * }} FakeResumeState
 * @typedef {{
 *   type: 'continue-turn',
 *   harnessId: 'fake',
 *   specificationVersion: 'harness-v1',
 *   data: FakeSessionData,
 *   pendingToolApprovals?: PendingToolApproval[],
 *   pendingToolResults?: PendingToolResult[],
 * }} FakeContinueTurnState
 * @typedef {{ sessionId: string, prompts: string[] }} FakeSessionData
 */

/**
 * @typedef {{ approvals: PendingToolApproval[], toolCalls: PendingToolResult[] }} Pending
 */

const NULL_USAGE = Object.freeze({
  inputTokens: undefined,
  inputTokenDetails: { noCacheTokens: undefined, cacheReadTokens: undefined, cacheWriteTokens: undefined },
  outputTokens: undefined,
  outputTokenDetails: { textTokens: undefined, reasoningTokens: undefined },
  totalTokens: undefined,
});

const USAGE = Object.freeze({
  inputTokens: 1,
  inputTokenDetails: { noCacheTokens: 1, cacheReadTokens: undefined, cacheWriteTokens: undefined },
  outputTokens: 2,
  outputTokenDetails: { textTokens: 2, reasoningTokens: undefined },
  totalTokens: 3,
});

/**
 * A promise with what settles it.
 *
 * @template [T=void]
 * @returns {{ promise: Promise<T>, resolve: (value: T) => void, reject: (reason?: unknown) => void }}
 */
export function createDeferred() {
  /** @type {(value: T) => void} */
  let resolve = () => {};
  /** @type {(reason?: unknown) => void} */
  let reject = () => {};
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Creates an agent whose calls follow `script`.
 *
 * @param {FakeAgentScript} [script]
 */
export function createFakeAgent(script = {}) {
  const queues = {
    createSession: [...(script.createSession ?? [])],
    turns: [...(script.turns ?? [])],
    stop: [...(script.stop ?? [])],
    detach: [...(script.detach ?? [])],
    destroy: [...(script.destroy ?? [])],
  };
  /** @type {FakeAgentCall[]} */
  const calls = [];
  /** @type {FakeAgentSession[]} */
  const sessions = [];
  let idCount = 0;
  const context = { queues, calls, nextId: () => `${(idCount += 1)}` };

  return {
    /** The queues of the script, consumed in order. */
    script: queues,
    /** Every call, in order. */
    calls,
    /** Every session created. */
    sessions,
    /**
     * @param {{ sessionId?: string, sandboxSession?: unknown, resumeFrom?: FakeResumeState, abortSignal?: AbortSignal }} [options]
     */
    createSession: async (options = {}) => {
      const sessionId = options.sessionId ?? `fake-session-${sessions.length + 1}`;
      calls.push({ method: 'createSession', sessionId, options });
      await perform(queues.createSession.shift(), options.abortSignal);
      const session = new FakeAgentSession({ ...context, ...options, sessionId });
      sessions.push(session);
      return session;
    },
    /**
     * @param {{ session: FakeAgentSession, prompt: string, abortSignal?: AbortSignal }} options
     */
    stream: async ({ session, prompt, abortSignal }) => {
      calls.push({ method: 'stream', sessionId: session.sessionId, options: { prompt, abortSignal } });
      return session.startTurn({ prompt, abortSignal });
    },
    /**
     * @param {{
     *   session: FakeAgentSession,
     *   toolApprovalContinuations?: readonly ToolApprovalResponse[],
     *   toolResultContinuations?: readonly ToolResultPart[],
     *   abortSignal?: AbortSignal,
     * }} options
     */
    continueStream: async ({ session, abortSignal, ...answers }) => {
      calls.push({ method: 'continueStream', sessionId: session.sessionId, options: { ...answers, abortSignal } });
      return session.startTurn({ answers, abortSignal });
    },
  };
}

/** @typedef {ReturnType<typeof createFakeAgent>} FakeAgent */

/**
 * A session of the fake agent, with the surface of a `HarnessAgentSession`.
 */
export class FakeAgentSession {
  /**
   * @param {object} options
   * @param {{ createSession: FakeCallScript[], turns: FakeTurnScript[], stop: FakeCallScript[], detach: FakeCallScript[], destroy: FakeCallScript[] }} options.queues
   * @param {FakeAgentCall[]} options.calls
   * @param {() => string} options.nextId A new id, unique in the agent.
   * @param {string} options.sessionId
   * @param {unknown} [options.sandboxSession]
   * @param {FakeResumeState} [options.resumeFrom]
   */
  constructor({ queues, calls, nextId, sessionId, sandboxSession, resumeFrom }) {
    this.queues = queues;
    this.calls = calls;
    this.nextId = nextId;
    this.sessionId = sessionId;
    /** The sandbox it was given. */
    this.sandboxSession = sandboxSession;
    this.isResume = resumeFrom !== undefined;
    /** The prompts of its turns, those before a resume included. */
    this.prompts = [...(readResumeState(resumeFrom)?.data.prompts ?? [])];
    /** @type {'active' | 'detached' | 'stopped' | 'destroyed'} */
    this.state = 'active';
    /** @type {'idle' | 'running' | 'awaiting-input' | 'suspended'} */
    this.turnState = resumeFrom?.continueFrom === undefined ? 'idle' : pendingOf(resumeFrom.continueFrom) ? 'awaiting-input' : 'suspended';
    /** What the unfinished turn waits for. @type {Pending} */
    this.pending = {
      approvals: [...(resumeFrom?.continueFrom?.pendingToolApprovals ?? [])],
      toolCalls: [...(resumeFrom?.continueFrom?.pendingToolResults ?? [])],
    };
    /** Ends the turn under way, if any. @type {((reason: 'suspended' | 'destroyed') => void) | undefined} */
    this.endRunningTurn = undefined;
  }

  /** Whether a turn is under way or waits to be continued. */
  hasUnfinishedTurn() {
    return this.turnState !== 'idle';
  }

  /** Parks the session: the handle is dead, the state resumes it. */
  async detach() {
    return this.end('detach', 'detached');
  }

  /** Stops the session: the handle is dead, the state resumes it. */
  async stop() {
    return this.end('stop', 'stopped');
  }

  /** Ends the session for good. A turn under way ends with an error. */
  async destroy() {
    this.calls.push({ method: 'destroy', sessionId: this.sessionId });
    if (this.state !== 'active') return;
    this.state = 'destroyed';
    this.endRunningTurn?.('destroyed');
    await perform(this.queues.destroy.shift());
  }

  /** Freezes the unfinished turn: the handle is dead, the state continues the turn. */
  async suspendTurn() {
    this.calls.push({ method: 'suspendTurn', sessionId: this.sessionId });
    this.assertActive();
    if (this.turnState === 'idle') {
      throw new Error(`Harness session ${this.sessionId} has no unfinished turn to suspend.`);
    }
    const state = this.continueTurnState();
    this.endRunningTurn?.('suspended');
    this.state = 'detached';
    return state;
  }

  /** @param {string} [customInstructions] */
  async compact(customInstructions) {
    this.calls.push({ method: 'compact', sessionId: this.sessionId, options: { customInstructions } });
    this.assertActive();
  }

  /**
   * Starts a turn: a prompt, or the continuation of the unfinished turn with its answers.
   *
   * @param {{ prompt?: string, answers?: { toolApprovalContinuations?: readonly ToolApprovalResponse[] }, abortSignal?: AbortSignal }} options
   */
  async startTurn({ prompt, answers, abortSignal }) {
    this.assertActive();
    if (prompt === undefined) this.assertContinuable();
    else this.assertPromptable();
    const previous = this.turnState;
    this.turnState = 'running';
    const script = this.queues.turns.shift() ?? {};
    try {
      await perform(script);
    } catch (error) {
      this.turnState = previous;
      throw error;
    }
    if (prompt !== undefined) this.prompts.push(prompt);
    const responses = this.takeApprovalResponses(answers?.toolApprovalContinuations ?? []);
    return this.runTurn({ script, text: script.text ?? (prompt === undefined ? 'Continued.' : `You said: ${prompt}`), responses, abortSignal });
  }

  /**
   * Streams a turn: `start`, the approval responses of a continuation, then what the script says.
   *
   * @param {{ script: FakeTurnScript, text: string, responses: TextStreamPart[], abortSignal?: AbortSignal }} options
   */
  runTurn({ script, text, responses, abortSignal }) {
    const output = pushStream();
    /** @type {ReturnType<typeof createDeferred<LanguageModelUsage>>} */
    const usage = createDeferred();
    usage.promise.catch(() => {});
    /** @type {ReturnType<typeof createDeferred<'suspended' | 'destroyed'>>} */
    const interrupted = createDeferred();
    this.endRunningTurn = interrupted.resolve;
    output.write({ type: 'start' });
    responses.forEach(output.write);
    void Promise.race([waitFor(script, abortSignal), interrupted.promise]).then((outcome) =>
      this.playTurn({ outcome, script, text, write: output.write, usage }).finally(() => {
        this.endRunningTurn = undefined;
        output.close();
      }),
    );
    return {
      totalUsage: usage.promise,
      /** @param {UIMessageStreamOptions} [options] */
      toUIMessageStream: (options = {}) => toUIMessageStream({ stream: output.stream(), ...options }),
    };
  }

  /**
   * Streams the rest of a turn, once what held it back is over.
   *
   * @param {object} options
   * @param {{ ready: true } | { aborted: unknown } | 'suspended' | 'destroyed'} options.outcome
   * @param {FakeTurnScript} options.script
   * @param {string} options.text
   * @param {(part: TextStreamPart) => void} options.write
   * @param {ReturnType<typeof createDeferred<LanguageModelUsage>>} options.usage
   */
  async playTurn({ outcome, script, text, write, usage }) {
    if (outcome === 'suspended') {
      write({ type: 'finish', finishReason: 'other', rawFinishReason: undefined, totalUsage: NULL_USAGE });
      usage.resolve(NULL_USAGE);
      return this.settleTurn('suspended');
    }
    if (outcome === 'destroyed') {
      return this.failTurn(write, usage, new Error(`Harness session ${this.sessionId} was destroyed.`));
    }
    if ('aborted' in outcome) {
      write({ type: 'abort', reason: errorText(outcome.aborted) });
      usage.reject(outcome.aborted);
      return this.settleTurn('idle');
    }
    this.writeContent(write, script, text);
    if (script.error !== undefined) return this.failTurn(write, usage, script.error);
    this.finishTurn(write, script, usage);
    this.settleTurn(this.isWaiting() ? 'awaiting-input' : 'idle');
  }

  /**
   * @param {(part: TextStreamPart) => void} write
   * @param {ReturnType<typeof createDeferred<LanguageModelUsage>>} usage
   * @param {unknown} error
   */
  failTurn(write, usage, error) {
    write({ type: 'error', error });
    usage.reject(error);
    this.settleTurn('idle');
  }

  /**
   * @param {(part: TextStreamPart) => void} write
   * @param {FakeTurnScript} script
   * @param {string} text
   */
  writeContent(write, script, text) {
    write({ type: 'start-step', request: {}, warnings: [] });
    if (script.reasoning !== undefined) writeBlock(write, 'reasoning', `reasoning-${this.nextId()}`, script.reasoning);
    if (text !== '') writeBlock(write, 'text', `text-${this.nextId()}`, text);
    (script.parts ?? []).forEach(write);
    for (const call of script.approvals ?? []) this.ask(write, call);
    for (const call of script.toolCalls ?? []) this.callTool(write, call);
  }

  /**
   * Ends the turn: on its tool calls, when it made some.
   *
   * @param {(part: TextStreamPart) => void} write
   * @param {FakeTurnScript} script
   * @param {ReturnType<typeof createDeferred<LanguageModelUsage>>} usage
   */
  finishTurn(write, script, usage) {
    const totalUsage = { ...USAGE, ...script.usage };
    const finishReason = this.isWaiting() ? 'tool-calls' : 'stop';
    write(/** @type {TextStreamPart} */ ({ type: 'finish-step', finishReason, rawFinishReason: undefined, usage: totalUsage }));
    write({ type: 'finish', finishReason, rawFinishReason: undefined, totalUsage });
    usage.resolve(totalUsage);
  }

  /**
   * @param {(part: TextStreamPart) => void} write
   * @param {FakeToolCall} call
   */
  ask(write, call) {
    const toolCall = this.toolCall(call);
    const approvalId = call.approvalId ?? `approval-${this.nextId()}`;
    write(toolCall);
    write({ type: 'tool-approval-request', approvalId, toolCall });
    this.pending.approvals.push({
      approvalId,
      toolCallId: toolCall.toolCallId,
      toolName: call.toolName,
      input: JSON.stringify(toolCall.input),
      kind: 'custom',
      providerExecuted: false,
    });
  }

  /**
   * @param {(part: TextStreamPart) => void} write
   * @param {FakeToolCall} call
   */
  callTool(write, call) {
    const toolCall = this.toolCall(call);
    write(toolCall);
    this.pending.toolCalls.push({ toolCallId: toolCall.toolCallId, toolName: call.toolName, input: JSON.stringify(toolCall.input) });
  }

  /**
   * @param {FakeToolCall} call
   * @returns {TextStreamPart & { type: 'tool-call' }}
   */
  toolCall({ toolName, input = {}, toolCallId }) {
    return /** @type {TextStreamPart & { type: 'tool-call' }} */ ({
      type: 'tool-call',
      toolCallId: toolCallId ?? `call-${this.nextId()}`,
      toolName,
      input,
    });
  }

  /**
   * The `tool-approval-response` parts a continuation starts with; the unfinished turn's pending
   * calls are answered.
   *
   * @param {readonly ToolApprovalResponse[]} continuations
   * @returns {TextStreamPart[]}
   */
  takeApprovalResponses(continuations) {
    const responses = continuations.flatMap(({ approvalId, approved, reason }) => {
      const pending = this.pending.approvals.find((approval) => approval.approvalId === approvalId);
      if (pending === undefined) return [];
      const toolCall = { type: 'tool-call', toolCallId: pending.toolCallId, toolName: pending.toolName, input: JSON.parse(pending.input) };
      return [/** @type {TextStreamPart} */ ({ type: 'tool-approval-response', approvalId, toolCall, approved, ...(reason === undefined ? {} : { reason }) })];
    });
    this.pending = { approvals: [], toolCalls: [] };
    return responses;
  }

  /** Whether the turn waits for approvals or tool results. */
  isWaiting() {
    return this.pending.approvals.length + this.pending.toolCalls.length > 0;
  }

  /** @param {'idle' | 'awaiting-input' | 'suspended'} turnState */
  settleTurn(turnState) {
    if (this.state === 'active') this.turnState = turnState;
  }

  /**
   * Ends the handle with `detach()` or `stop()`.
   *
   * @param {'detach' | 'stop'} method
   * @param {'detached' | 'stopped'} state
   * @returns {Promise<FakeResumeState>}
   */
  async end(method, state) {
    this.calls.push({ method, sessionId: this.sessionId });
    if (this.state !== 'active') {
      throw new Error(`Harness session ${this.sessionId} is not active and cannot be ${method === 'stop' ? 'stopped' : 'detached'}.`);
    }
    const resumeState = this.resumeState();
    this.state = state;
    this.endRunningTurn?.('suspended');
    await perform(this.queues[method].shift());
    return resumeState;
  }

  /** @returns {FakeResumeState} */
  resumeState() {
    const data = { sessionId: this.sessionId, prompts: [...this.prompts] };
    const base = { type: /** @type {const} */ ('resume-session'), harnessId: /** @type {const} */ ('fake'), specificationVersion: /** @type {const} */ ('harness-v1'), data };
    return this.turnState === 'idle' ? base : { ...base, continueFrom: this.continueTurnState() };
  }

  /** @returns {FakeContinueTurnState} */
  continueTurnState() {
    const { approvals, toolCalls } = this.pending;
    return {
      type: 'continue-turn',
      harnessId: 'fake',
      specificationVersion: 'harness-v1',
      data: { sessionId: this.sessionId, prompts: [...this.prompts] },
      ...(approvals.length > 0 ? { pendingToolApprovals: structuredClone(approvals) } : {}),
      ...(toolCalls.length > 0 ? { pendingToolResults: structuredClone(toolCalls) } : {}),
    };
  }

  assertActive() {
    if (this.state !== 'active') throw new Error(`Harness session ${this.sessionId} has ended and cannot be reused.`);
  }

  assertPromptable() {
    if (this.turnState === 'running') throw new Error(`Harness session ${this.sessionId} already has a turn in progress.`);
    if (this.turnState !== 'idle') {
      throw new Error(`Harness session ${this.sessionId} has an unfinished turn and must be continued before accepting a new prompt.`);
    }
  }

  assertContinuable() {
    if (this.turnState === 'running') throw new Error(`Harness session ${this.sessionId} already has a turn in progress.`);
    if (this.turnState === 'idle') throw new Error(`Harness session ${this.sessionId} has no unfinished turn to continue.`);
  }
}

/**
 * Checks a resume state is one of a fake session, as `HarnessAgent` checks the harness id.
 *
 * @param {FakeResumeState | undefined} state
 */
function readResumeState(state) {
  if (state === undefined) return undefined;
  if (state.type !== 'resume-session' || state.harnessId !== 'fake') {
    throw new Error(`Lifecycle state was produced by harness '${state.harnessId}' but this agent uses 'fake'.`);
  }
  return state;
}

/** @param {FakeContinueTurnState} state */
function pendingOf(state) {
  return (state.pendingToolApprovals?.length ?? 0) + (state.pendingToolResults?.length ?? 0) > 0;
}

/**
 * Does what a call's script says before the call resolves: waits, then fails if it must. An abort
 * of `abortSignal` meanwhile rejects with its reason.
 *
 * @param {FakeCallScript | undefined} script
 * @param {AbortSignal} [abortSignal]
 */
async function perform(script = {}, abortSignal) {
  const waits = [
    ...(script.delayMs === undefined ? [] : [new Promise((resolve) => setTimeout(resolve, script.delayMs))]),
    ...(script.gate === undefined ? [] : [script.gate]),
  ];
  const aborted = abortSignal === undefined ? [] : [abortedPromise(abortSignal)];
  await Promise.race([Promise.all(waits), ...aborted]);
  if (script.fail !== undefined) throw script.fail;
}

/**
 * What holds a turn back before its content: `{ aborted }` when its signal aborts first.
 *
 * @param {FakeTurnScript} script
 * @param {AbortSignal | undefined} abortSignal
 * @returns {Promise<{ aborted: unknown } | { ready: true }>}
 */
async function waitFor(script, abortSignal) {
  const ready = /** @type {const} */ ({ ready: true });
  if (abortSignal?.aborted) return { aborted: abortSignal.reason };
  const holds = [
    ...(script.hold === undefined ? [] : [script.hold]),
    ...(script.waitForAbort ? [new Promise(() => {})] : []),
  ];
  if (holds.length === 0) return ready;
  const aborted = abortSignal === undefined ? [] : [abortedPromise(abortSignal).catch((reason) => ({ aborted: reason }))];
  return Promise.race([Promise.all(holds).then(() => ready), ...aborted]);
}

/**
 * Rejects with the reason of `signal` when it aborts.
 *
 * @param {AbortSignal} signal
 * @returns {Promise<never>}
 */
function abortedPromise(signal) {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/**
 * A stream parts are pushed to, readable any number of times from the start.
 */
function pushStream() {
  /** @type {TextStreamPart[]} */
  const parts = [];
  /** The readers waiting for a part, each woken by the next write or the close. @type {Set<() => void>} */
  const waiting = new Set();
  let closed = false;
  const wake = () => {
    const woken = [...waiting];
    waiting.clear();
    for (const resume of woken) resume();
  };
  return {
    /** @param {TextStreamPart} part */
    write: (part) => {
      parts.push(part);
      if (waiting.size > 0) wake();
    },
    close: () => {
      closed = true;
      wake();
    },
    /**
     * Each stream reads `parts` from its own index, a few at a time as its reader asks: parts
     * written all at once never pile up in the stream's own queue (whose `shift()` costs its
     * length on Node 20 and 22, so that a long one cost quadratic time).
     * @returns {ReadableStream<TextStreamPart>}
     */
    stream: () => {
      let next = 0;
      let cancelled = false;
      return new ReadableStream(
        {
          pull(controller) {
            if (next < parts.length) {
              const end = Math.min(parts.length, next + 16);
              while (next < end) controller.enqueue(parts[next++]);
              return;
            }
            if (closed) {
              controller.close();
              return;
            }
            return new Promise((resolve) => {
              waiting.add(() => {
                if (!cancelled) this.pull(controller);
                resolve();
              });
            });
          },
          cancel() {
            cancelled = true;
          },
        },
        { highWaterMark: 0 },
      );
    },
  };
}

/**
 * @param {(part: TextStreamPart) => void} write
 * @param {'text' | 'reasoning'} kind
 * @param {string} id
 * @param {string} text
 */
function writeBlock(write, kind, id, text) {
  write(/** @type {TextStreamPart} */ ({ type: `${kind}-start`, id }));
  write(/** @type {TextStreamPart} */ ({ type: `${kind}-delta`, id, text }));
  write(/** @type {TextStreamPart} */ ({ type: `${kind}-end`, id }));
}

/**
 * The reason of an abort as `HarnessAgent` writes it in the `abort` chunk.
 *
 * @param {unknown} reason
 */
function errorText(reason) {
  if (reason == null) return 'unknown error';
  if (typeof reason === 'string') return reason;
  if (reason instanceof Error) return reason.toString();
  return JSON.stringify(reason);
}
