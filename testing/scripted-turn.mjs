/**
 * One turn of the scripted harness: what a command uses to stream its answer (text word by word,
 * reasoning, tool calls, approvals), and the journal that lets another process carry the turn on.
 *
 * The journal counts the events the turn delivered and keeps every answer the host sent and every
 * output of the harness's own tools. Continuing a suspended turn runs its command again from the
 * start, delivering nothing until it passes the count, taking answers and outputs from the journal:
 * no tool runs twice, no event is sent twice, and the stream goes on exactly where it stopped, in
 * the middle of a text block if that is where it was.
 */

/**
 * @typedef {import('@ai-sdk/harness').HarnessV1StreamPart} HarnessV1StreamPart
 * @typedef {import('ai').JSONValue} JSONValue
 */

/**
 * An answer of the host: the verdict on an approval, or the result of a tool it ran.
 *
 * @typedef {{ approved: boolean, reason?: string } | { output: JSONValue, isError?: boolean }} HostAnswer
 */

/**
 * What one of the harness's own tools returned.
 *
 * @typedef {{ result: NonNullable<JSONValue>, isError?: boolean }} ToolOutput
 */

/**
 * What a turn did so far: plain JSON, kept in the harness's lifecycle state.
 *
 * @typedef {object} TurnJournal
 * @property {string} prompt The prompt of the turn.
 * @property {number} number Its rank in the session, 1 for the first turn: ids derive from it.
 * @property {number} delivered How many events the turn delivered to the host so far.
 * @property {Record<string, HostAnswer>} answers By approval id or tool call id.
 * @property {Record<string, ToolOutput>} outputs By tool call id.
 * @property {Compaction} [compaction] A compaction the turn reports first.
 */

/**
 * @typedef {{ summary: string, tokensBefore: number, tokensAfter: number }} Compaction
 */

/** The reason a turn is stopped with when its session suspends it: not an error of the turn. */
export const SUSPENDED = Symbol('scripted-harness.suspended');

/**
 * @typedef {object} ToolCallOptions
 * @property {string} toolName
 * @property {JSONValue} input
 */

/** A turn under way: the API commands write their answer with. */
export class ScriptedTurn {
  /**
   * @param {object} options
   * @param {TurnJournal} options.journal
   * @param {string} options.idPrefix What the ids of its parts start with.
   * @param {number} options.wordDelayMs The pause between two words of a text.
   * @param {() => void} options.onWait Called when the turn starts waiting for the host.
   * @param {() => void} options.onResume Called when the host answered what it waited for.
   */
  constructor({ journal, idPrefix, wordDelayMs, onWait, onResume }) {
    this.journal = journal;
    this.idPrefix = idPrefix;
    this.wordDelayMs = wordDelayMs;
    this.onWait = onWait;
    this.onResume = onResume;
    /** Stops the turn: aborted when the turn is cut short or suspended. */
    this.controller = new AbortController();
    /** @type {(part: HarnessV1StreamPart) => void} */
    this.emit = () => {};
    /** The events produced by this run of the command, delivered or not. */
    this.produced = 0;
    this.idCount = 0;
    /** @type {Map<string, (answer: HostAnswer) => void>} */
    this.waiters = new Map();
    /** The text of the answer, for the session's history. */
    this.reply = '';
    this.usage = { input: countWords(journal.prompt), output: 0, stepOutput: 0, stepOpen: false };
  }

  /** Stops the turn where it stands: waits reject, nothing is delivered any more. */
  get signal() {
    return this.controller.signal;
  }

  /**
   * Sends `text` as a text block, word by word.
   *
   * @param {string} text
   */
  async say(text) {
    await this.block('text', text);
    this.reply += this.reply === '' ? text : `\n${text}`;
  }

  /**
   * Sends `text` as a reasoning block, word by word.
   *
   * @param {string} text
   */
  async think(text) {
    await this.block('reasoning', text);
  }

  /**
   * Calls one of the harness's own tools: asks approval first when `needsApproval`, runs `execute`
   * when allowed (once: a continued turn takes the output from the journal), and sends the result.
   *
   * @param {ToolCallOptions & { needsApproval: boolean, execute: () => Promise<ToolOutput> }} options
   * @returns {Promise<{ approved: true, output: ToolOutput } | { approved: false, reason?: string }>}
   */
  async callOwnTool({ toolName, input, needsApproval, execute }) {
    const toolCallId = this.nextId('call');
    this.deliver({
      type: 'tool-call',
      toolCallId,
      toolName,
      input: JSON.stringify(input),
      providerExecuted: true,
    });
    if (needsApproval) {
      const approvalId = this.nextId('approval');
      this.deliver({ type: 'tool-approval-request', approvalId, toolCallId });
      const verdict = /** @type {{ approved: boolean, reason?: string }} */ (await this.waitFor(approvalId));
      if (!verdict.approved) return { approved: false, reason: verdict.reason };
    }
    const output = await this.runOnce(toolCallId, execute);
    this.deliver({ type: 'tool-result', toolCallId, toolName, result: output.result, isError: output.isError });
    return { approved: true, output };
  }

  /**
   * Calls tools the host runs, all in one step, and waits for every result; then echoes them, which
   * is what puts them on the host's stream.
   *
   * @param {ToolCallOptions[]} calls
   * @returns {Promise<{ output: JSONValue, isError?: boolean }[]>}
   */
  async callHostTools(calls) {
    const ids = calls.map(() => this.nextId('call'));
    calls.forEach(({ toolName, input }, index) =>
      this.deliver({
        type: 'tool-call',
        toolCallId: ids[index],
        toolName,
        input: JSON.stringify(input),
        stepToolCallCount: calls.length,
      }),
    );
    const results = /** @type {{ output: JSONValue, isError?: boolean }[]} */ (
      await Promise.all(ids.map((id) => this.waitFor(id)))
    );
    results.forEach((result, index) =>
      this.deliver({
        type: 'tool-result',
        toolCallId: ids[index],
        toolName: calls[index].toolName,
        result: /** @type {NonNullable<JSONValue>} */ (result.output),
        isError: result.isError,
      }),
    );
    return results;
  }

  /**
   * Waits `ms` milliseconds, unless the turn is still catching up with what it already delivered.
   *
   * @param {number} ms
   */
  async sleep(ms) {
    if (ms <= 0 || this.catchingUp()) return;
    await delay(ms, this.signal);
  }

  /**
   * Closes the current step, when it has content.
   *
   * @param {'stop' | 'tool-calls'} reason
   */
  endStep(reason) {
    if (!this.usage.stepOpen) return;
    this.deliver({
      type: 'finish-step',
      finishReason: { unified: reason, raw: undefined },
      usage: this.usageOf(this.usage.stepOutput),
    });
    this.usage.stepOutput = 0;
    this.usage.stepOpen = false;
  }

  /** Closes the last step and ends the turn. */
  finish() {
    this.endStep('stop');
    this.deliver({
      type: 'finish',
      finishReason: { unified: 'stop', raw: undefined },
      totalUsage: this.usageOf(this.usage.output),
    });
  }

  /**
   * Hands the host's answer to the turn, now or when it gets to wait for it.
   *
   * @param {string} id An approval id or a tool call id.
   * @param {HostAnswer} answer
   */
  answer(id, answer) {
    this.journal.answers[id] = answer;
    this.waiters.get(id)?.(answer);
  }

  /**
   * Stops the turn: it delivers nothing more and its waits reject with `reason`.
   *
   * @param {unknown} reason
   */
  stop(reason) {
    this.controller.abort(reason);
  }

  /**
   * @param {'text' | 'reasoning'} kind
   * @param {string} text
   */
  async block(kind, text) {
    const id = this.nextId(kind);
    this.deliver({ type: `${kind}-start`, id });
    const words = text.split(/(?<= )/);
    for (const [index, word] of words.entries()) {
      if (index > 0) await this.sleep(this.wordDelayMs);
      this.deliver({ type: `${kind}-delta`, id, delta: word });
    }
    this.deliver({ type: `${kind}-end`, id });
    if (kind === 'text') {
      this.usage.output += countWords(text);
      this.usage.stepOutput += countWords(text);
    }
  }

  /**
   * Delivers `part` unless it was delivered before the turn was suspended, or the turn stopped.
   *
   * @param {HarnessV1StreamPart} part
   */
  deliver(part) {
    this.signal.throwIfAborted();
    this.produced += 1;
    if (part.type !== 'finish-step' && part.type !== 'finish') this.usage.stepOpen = true;
    if (this.produced <= this.journal.delivered) return;
    this.journal.delivered = this.produced;
    this.emit(part);
  }

  /** Whether the turn is running again through events it delivered before a suspension. */
  catchingUp() {
    return this.produced < this.journal.delivered;
  }

  /**
   * The host's answer to `id`: from the journal, or once it arrives.
   *
   * @param {string} id
   * @returns {Promise<HostAnswer>}
   */
  async waitFor(id) {
    const known = this.journal.answers[id];
    if (known !== undefined) return known;
    this.onWait();
    const answer = await this.nextAnswer(id);
    this.onResume();
    return answer;
  }

  /**
   * The answer to `id` the host sends next; rejects when the turn stops first.
   *
   * @param {string} id
   * @returns {Promise<HostAnswer>}
   */
  nextAnswer(id) {
    this.signal.throwIfAborted();
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.waiters.delete(id);
        reject(this.signal.reason);
      };
      this.waiters.set(id, (answer) => {
        this.waiters.delete(id);
        this.signal.removeEventListener('abort', onAbort);
        resolve(answer);
      });
      this.signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /**
   * `execute`'s output, computed once per tool call and kept in the journal.
   *
   * @param {string} toolCallId
   * @param {() => Promise<ToolOutput>} execute
   */
  async runOnce(toolCallId, execute) {
    this.journal.outputs[toolCallId] ??= await execute();
    return this.journal.outputs[toolCallId];
  }

  /** @param {string} kind */
  nextId(kind) {
    this.idCount += 1;
    return `${kind}-${this.idPrefix}-${this.idCount}`;
  }

  /**
   * Words count as tokens: deterministic usage, for tests.
   *
   * @param {number} output
   */
  usageOf(output) {
    return {
      inputTokens: { total: this.usage.input, noCache: this.usage.input, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: output, text: output, reasoning: undefined },
    };
  }
}

/**
 * @param {string} text
 * @returns {number}
 */
export function countWords(text) {
  return text.split(/\s+/).filter(Boolean).length;
}

/**
 * Resolves after `ms` milliseconds; rejects with the reason of `signal` if it aborts first.
 *
 * @param {number} ms
 * @param {AbortSignal} signal
 * @returns {Promise<void>}
 */
export function delay(ms, signal) {
  signal.throwIfAborted();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
