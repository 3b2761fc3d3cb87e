/**
 * The command language of the scripted harness: what a prompt asks for, and how each command
 * answers. See `scripted-harness.mjs` for the list.
 */

import { HarnessError } from '@ai-sdk/harness';
import { posix } from 'node:path';

/**
 * @typedef {import('./scripted-turn.mjs').ScriptedTurn} ScriptedTurn
 * @typedef {import('./scripted-turn.mjs').ToolOutput} ToolOutput
 * @typedef {import('ai').JSONValue} JSONValue
 * @typedef {import('@ai-sdk/provider-utils').Experimental_SandboxSession} SandboxSession
 */

/**
 * What a command works with.
 *
 * @typedef {object} CommandContext
 * @property {ScriptedTurn} turn
 * @property {SandboxSession} sandbox
 * @property {string} workDir The session's working directory in the sandbox.
 * @property {'allow-reads' | 'allow-edits' | 'allow-all'} permissionMode
 * @property {string[]} previousPrompts The prompts of the turns before this one.
 */

/**
 * @typedef {(context: CommandContext) => Promise<void>} Command
 */

/**
 * The commands, tried in order against the trimmed prompt: the first whose pattern matches
 * answers it. Each pattern has a terse form (`/read notes.md`) and, where it reads naturally, a
 * spoken one (`read notes.md`).
 *
 * @type {Array<[RegExp, (match: RegExpMatchArray) => Command]>}
 */
const COMMANDS = [
  [/^The session was suspended while you waited for my answers\.[^\n]*\n([\s\S]*)$/, ([, lines]) => carryOn(lines)],
  [/^\/?help$/i, () => help],
  [/^\/history$|\bwhat did i (?:say|ask|write)\b/i, () => history],
  [/^(?:\/ls|ls|list(?: the)? files)(?:\s+in)?(?:\s+(\S+))?$/i, ([, path]) => listFiles(path ?? '.')],
  [/^(?:\/read|read|cat)\s+(\S+)$/i, ([, path]) => readFile(path)],
  [/^\/write\s+(\S+)\s([\s\S]*)$/i, ([, path, content]) => writeFile(path, content)],
  [/^write\s+([^\s:]+):\s?([\s\S]*)$/i, ([, path, content]) => writeFile(path, content)],
  [/^\/?run\s+([\s\S]+)$/i, ([, command]) => runCommand(command)],
  [/^\/tool\s+(\S+)(?:\s+([\s\S]+))?$/i, ([, toolName, input]) => hostTools(() => [{ toolName, input: parseJson(input ?? '{}') }])],
  [/^\/tools\s+([\s\S]+)$/i, ([, calls]) => hostTools(() => parseToolCalls(calls))],
  [/^\/ask\s+([\s\S]+)$/i, ([, question]) => ask(question)],
  [/^\/sleep\s+(\d+)$/i, ([, ms]) => sleep(Number(ms))],
  [/^\/fail(-harness)?(?:\s+([\s\S]+))?$/i, ([, harness, message]) => fail(message ?? 'Scripted failure.', harness !== undefined)],
  [/^\/think\s+([\s\S]+)$/i, ([, thought]) => think(thought)],
  [/^\/say\s+([^\n]*)/i, ([, line]) => say(line)],
];

/**
 * The command that answers `prompt`: one of the list, or an echo.
 *
 * @param {string} prompt
 * @returns {Command}
 */
export function parseCommand(prompt) {
  const text = prompt.trim();
  for (const [pattern, command] of COMMANDS) {
    const match = text.match(pattern);
    if (match) return command(match);
  }
  return echo(text);
}

/**
 * The answers a session suspended while it waited tells its resumed turn in words (one line
 * each, `- I approve <tool> <JSON input>` or `- I deny <tool> <JSON input>[: <reason>]`): carried
 * out as a model would, each approved `bash` or `write` done without asking again (the user just
 * approved it), each denial said.
 *
 * @param {string} lines
 */
function carryOn(lines) {
  /** @type {Command} */
  return async (context) => {
    const answers = lines
      .split('\n')
      .map((line) => /^- I (approve|deny) (\S+) ([\s\S]*)$/.exec(line.trim()))
      .filter((match) => match !== null);
    if (answers.length === 0) return context.turn.say('I have nothing left to carry on with.');
    for (const [, verdict, toolName, rest] of answers) {
      const { input, reason } = inputAndReason(rest);
      if (verdict === 'deny') {
        await context.turn.say(`You denied ${toolName}${reason ? ` (${reason})` : ''}: I leave it.`);
      } else if (toolName === 'bash' && typeof input?.command === 'string') {
        await runCommand(input.command)({ ...context, permissionMode: 'allow-all' });
      } else if (toolName === 'write' && typeof input?.file_path === 'string' && typeof input.content === 'string') {
        await writeFile(input.file_path, input.content)({ ...context, permissionMode: 'allow-all' });
      } else {
        await context.turn.say(`You approved ${toolName}: I carry on.`);
      }
    }
  };
}

/**
 * The JSON input at the start of `rest`, and the reason after it (`: <reason>`), if any.
 *
 * @param {string} rest
 * @returns {{ input: any, reason?: string }}
 */
function inputAndReason(rest) {
  for (let end = rest.length; end > 0; end = rest.lastIndexOf('}', end - 1) + 1 || 0) {
    try {
      const input = JSON.parse(rest.slice(0, end));
      const tail = rest.slice(end);
      return { input, reason: tail.startsWith(': ') ? tail.slice(2) : undefined };
    } catch {
      // A shorter prefix, up to the previous `}`.
    }
    if (end <= 1) break;
  }
  return { input: undefined };
}

/**
 * Answers `line` as it is (the first line of the prompt after `/say`: what follows it, such as
 * the guidance an application adds, is not said).
 *
 * @param {string} line
 */
function say(line) {
  /** @type {Command} */
  return async ({ turn }) => turn.say(line);
}

/** @param {string} text */
function echo(text) {
  /** @type {Command} */
  return async ({ turn }) => turn.say(`You said: ${text}`);
}

/** @type {Command} */
async function help({ turn }) {
  await turn.say(
    'I am a scripted agent. Try: list files, read <file>, write <file>: <text>, run <command>, ' +
      'what did I say?, /tool <name> <json>, /tools <json>, /ask <question> | <option> | <option>, ' +
      '/sleep <ms>, /think <thought>, /fail <message>, /fail-harness <message>.',
  );
}

/** @type {Command} */
async function history({ turn, previousPrompts }) {
  await turn.say(
    previousPrompts.length === 0
      ? 'You have not said anything before.'
      : `Before this, you said: ${previousPrompts.map((prompt) => `"${prompt}"`).join(', then ')}.`,
  );
}

/** @param {string} path */
function listFiles(path) {
  const folder = path === '.' ? 'the working directory' : path;
  /** @type {Command} */
  return async ({ turn, sandbox, workDir }) => {
    const call = await turn.callOwnTool({
      toolName: 'list',
      input: { path },
      needsApproval: false,
      execute: async () => {
        const { exitCode, stdout, stderr } = await sandbox.run({
          command: 'ls -1Ap -- "$TARGET"',
          env: { TARGET: posix.join(workDir, path) },
          abortSignal: turn.signal,
        });
        return exitCode === 0 ? { result: stdout.split('\n').filter(Boolean) } : { result: stderr.trim(), isError: true };
      },
    });
    const { result, isError } = /** @type {{ output: ToolOutput }} */ (call).output;
    turn.endStep('tool-calls');
    if (isError) return turn.say(`I could not list ${folder}: ${result}`);
    const files = /** @type {string[]} */ (result);
    await turn.say(files.length === 0 ? `There are no files in ${folder}.` : `Files in ${folder}: ${files.join(', ')}`);
  };
}

/** @param {string} path */
function readFile(path) {
  /** @type {Command} */
  return async ({ turn, sandbox, workDir }) => {
    const call = await turn.callOwnTool({
      toolName: 'read',
      input: { file_path: path },
      needsApproval: false,
      execute: async () => {
        const content = await sandbox.readTextFile({ path: posix.join(workDir, path), abortSignal: turn.signal });
        return content === null ? { result: 'no such file', isError: true } : { result: content };
      },
    });
    const { result, isError } = /** @type {{ output: ToolOutput }} */ (call).output;
    turn.endStep('tool-calls');
    await turn.say(isError ? `I could not read ${path}: ${result}` : `${path} says: ${result}`);
  };
}

/**
 * @param {string} path
 * @param {string} content
 */
function writeFile(path, content) {
  /** @type {Command} */
  return async ({ turn, sandbox, workDir, permissionMode }) => {
    const call = await turn.callOwnTool({
      toolName: 'write',
      input: { file_path: path, content },
      needsApproval: permissionMode === 'allow-reads',
      execute: async () => {
        await sandbox.writeTextFile({ path: posix.join(workDir, path), content, abortSignal: turn.signal });
        return { result: { path, bytes: Buffer.byteLength(content) } };
      },
    });
    turn.endStep('tool-calls');
    await turn.say(call.approved ? `I wrote ${path}.` : `Writing ${path} was denied${reasonOf(call)}.`);
  };
}

/** @param {string} command */
function runCommand(command) {
  /** @type {Command} */
  return async ({ turn, sandbox, workDir, permissionMode }) => {
    const call = await turn.callOwnTool({
      toolName: 'bash',
      input: { command },
      needsApproval: permissionMode !== 'allow-all',
      execute: async () => {
        const { exitCode, stdout, stderr } = await sandbox.run({
          command,
          workingDirectory: workDir,
          abortSignal: turn.signal,
        });
        return { result: { exitCode, stdout, stderr } };
      },
    });
    turn.endStep('tool-calls');
    if (!call.approved) return turn.say(`Running \`${command}\` was denied${reasonOf(call)}.`);
    const { exitCode, stdout, stderr } = /** @type {{ exitCode: number, stdout: string, stderr: string }} */ (
      call.output.result
    );
    await turn.say(`\`${command}\` exited with ${exitCode}: ${(stdout + stderr).trim()}`);
  };
}

/**
 * Calls tools the application runs, in one step: each reaches the host as a tool call without
 * output, which `HarnessAgent` runs when the tool has an `execute`, and waits for in
 * `toolResultContinuations` otherwise. With `toolApproval` on the agent, each asks approval first.
 *
 * @param {() => import('./scripted-turn.mjs').ToolCallOptions[]} readCalls
 */
function hostTools(readCalls) {
  /** @type {Command} */
  return async ({ turn }) => {
    const calls = readCalls();
    const results = await turn.callHostTools(calls);
    turn.endStep('tool-calls');
    await turn.say(results.map((result, index) => describeResult(calls[index].toolName, result)).join(' '));
  };
}

/**
 * Asks a question with options, as Claude Code's `AskUserQuestion` reaches `HarnessAgent`: a call
 * of `askUserQuestions` that waits for its answer.
 *
 * @param {string} text `question | option | option…`
 */
function ask(text) {
  const [question, ...labels] = text.split('|').map((part) => part.trim());
  const options = (labels.length > 0 ? labels : ['Yes', 'No']).map((label, index) => ({
    id: `option-${index + 1}`,
    label,
  }));
  /** @type {Command} */
  return async ({ turn }) => {
    const [result] = await turn.callHostTools([
      {
        toolName: 'askUserQuestions',
        input: { allowPartialAnswers: false, questions: [{ id: 'question-1', question, options }] },
      },
    ]);
    turn.endStep('tool-calls');
    await turn.say(describeAnswers(/** @type {QuestionsOutput} */ (result.output), options));
  };
}

/** @param {number} ms */
function sleep(ms) {
  /** @type {Command} */
  return async ({ turn }) => {
    await turn.say(`Sleeping for ${ms} ms.`);
    await turn.sleep(ms);
    await turn.say(`I slept for ${ms} ms.`);
  };
}

/**
 * @param {string} message
 * @param {boolean} asHarnessError Whether to fail with a `HarnessError`, whose message
 *   `getHarnessErrorMessage` passes through, rather than a plain `Error`, which it masks.
 */
function fail(message, asHarnessError) {
  /** @type {Command} */
  return async () => {
    throw asHarnessError ? new HarnessError({ message }) : new Error(message);
  };
}

/** @param {string} thought */
function think(thought) {
  /** @type {Command} */
  return async ({ turn }) => {
    await turn.think(thought);
    await turn.say('I thought about it.');
  };
}

/**
 * @param {string} text
 * @returns {JSONValue}
 */
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    throw new HarnessError({ message: `Not JSON: ${text}` });
  }
}

/**
 * @param {string} text A JSON array of `{ toolName, input }`.
 * @returns {import('./scripted-turn.mjs').ToolCallOptions[]}
 */
function parseToolCalls(text) {
  const calls = parseJson(text);
  if (!Array.isArray(calls) || !calls.every((call) => typeof call?.toolName === 'string')) {
    throw new HarnessError({ message: '/tools takes a JSON array of { "toolName", "input" }.' });
  }
  return calls.map(({ toolName, input }) => ({ toolName, input: input ?? {} }));
}

/**
 * @param {string} toolName
 * @param {{ output: JSONValue, isError?: boolean }} result
 */
function describeResult(toolName, { output, isError }) {
  if (isDenied(output)) return `${toolName} was denied.`;
  return `${toolName} ${isError ? 'failed' : 'returned'}: ${JSON.stringify(output)}.`;
}

/** @param {JSONValue} output */
function isDenied(output) {
  return /** @type {{ type?: unknown } | null} */ (output)?.type === 'execution-denied';
}

/**
 * @typedef {{ action: string, answers?: Record<string, { optionIds: string[], freeform?: string }> }} QuestionsOutput
 */

/**
 * @param {QuestionsOutput} output
 * @param {{ id: string, label: string }[]} options
 */
function describeAnswers(output, options) {
  const answer = output?.answers?.['question-1'];
  if (answer === undefined) return `You did not answer (${output?.action ?? 'no answer'}).`;
  const picked = options.filter((option) => answer.optionIds.includes(option.id)).map((option) => option.label);
  const words = [...picked, ...(answer.freeform ? [answer.freeform] : [])];
  return `You answered: ${words.join(', ') || 'nothing'}.`;
}

/**
 * ` (reason)`, when the denial gave one.
 *
 * @param {{ reason?: string }} call
 */
function reasonOf({ reason }) {
  return reason ? ` (${reason})` : '';
}
