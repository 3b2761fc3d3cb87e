/**
 * The agent every conversation runs: the real `HarnessAgent` of `@ai-sdk/harness`.
 *
 * - By default, on the model-free scripted harness of `harness-sessions/testing`: it answers from
 *   what you write (`help` lists its commands), works in the session's folder of the sandbox, and,
 *   like Claude Code with `permissionMode: 'allow-reads'`, asks before it writes a file or runs a
 *   command.
 * - With `ANTHROPIC_API_KEY` set, on Claude Code (`@ai-sdk/harness-claude-code`), asking the same
 *   approvals. Its bridge installs the Claude Agent SDK in the sandbox on first use: the sandbox
 *   needs Node and the network (see the README).
 */
import { HarnessAgent } from '@ai-sdk/harness/agent';

export type AgentKind = 'scripted' | 'claude-code';

/** Which agent this server runs. */
export function agentKind(): AgentKind {
  return process.env.ANTHROPIC_API_KEY ? 'claude-code' : 'scripted';
}

const AGENT = Symbol.for('next-chat.agent');
type Holder = { [AGENT]?: Promise<HarnessAgent> };

/** The agent, built once per process: a `HarnessAgent` is stateless and meant to be shared. */
export function getAgent(): Promise<HarnessAgent> {
  const holder = globalThis as Holder;
  holder[AGENT] ??= buildAgent().catch((error) => {
    delete holder[AGENT];
    throw error;
  });
  return holder[AGENT];
}

async function buildAgent(): Promise<HarnessAgent> {
  if (agentKind() === 'claude-code') {
    const { createClaudeCode } = await import('@ai-sdk/harness-claude-code');
    return new HarnessAgent({
      // Built on its own copy of @ai-sdk/harness: the same harness-v1 contract.
      harness: createClaudeCode() as unknown as ConstructorParameters<typeof HarnessAgent>[0]['harness'],
      ...(process.env.CLAUDE_MODEL ? { model: process.env.CLAUDE_MODEL } : {}),
      permissionMode: 'allow-reads',
    });
  }
  const { createScriptedHarness } = await import('harness-sessions/testing');
  return new HarnessAgent({
    harness: createScriptedHarness({ wordDelayMs: Number(process.env.DEMO_WORD_DELAY_MS ?? 40) }),
    permissionMode: 'allow-reads',
  });
}
