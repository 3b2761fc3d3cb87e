// The real Claude Code, end to end, on localSandbox: the real HarnessAgent, the real
// `@ai-sdk/harness-claude-code` and the Claude Code CLI its bridge pins, run on this host (no
// isolation) with its bootstrap in /tmp/harness/claude-code (seeded from .cache/claude-code),
// against the mock of the Anthropic Messages API. The CLI must reach nothing but the mock: every
// test ends by checking the catcher its proxies point at.
import { approval, approvalAcrossSuspension, denial, newProcess, suspendThenMessage, textTurn, twoInOneSandbox } from './support/claude-code-cases.mjs';
import { claudeCodeSuite } from './support/claude-code-suite.mjs';

const suite = await claudeCodeSuite('local');

suite.test('a text turn, read through toUIMessageStreamResponse() and readUIMessageStream', textTurn);
suite.test('a Bash command asking approval: awaiting-input, continue() from the message useChat sends back, the file written, the answer', approval);
suite.test('a denial: the CLI is told, the file is not written, the session goes on', denial);
suite.test('suspend() then a message: the session starts again and the mock receives the earlier conversation', suspendThenMessage);
suite.test('a new process on the same SQLite file resumes the session, the earlier conversation sent to the mock', newProcess);
suite.test('an approval pending across a suspension, answered after the resume within seconds: the agent told the answer', approvalAcrossSuspension);
suite.test('two sessions side by side in one shared sandbox, each with its port and in its own folder', twoInOneSandbox);
