/**
 * The agent every conversation runs: the real `HarnessAgent` of `@ai-sdk/harness`.
 *
 * - By default, on the model-free scripted harness of `harness-sessions/testing`: it answers from
 *   what you write (`help` lists its commands), works in the session's folder of the sandbox, and,
 *   like Claude Code with `permissionMode: 'allow-reads'`, asks before it writes a file or runs a
 *   command.
 * - With `DEMO_AGENT=claude-code` or `ANTHROPIC_API_KEY` set, on the real Claude Code
 *   (`@ai-sdk/harness-claude-code` and the CLI its bridge runs in the sandbox), asking the same
 *   approvals: against the real API with a key, else against the mock model of `./mock-model`
 *   (scripted answers, nothing leaves this machine). `npm run demo` prepares its bootstrap (the
 *   bridge and the CLI, cached under .cache/claude-code; the Docker image
 *   harness-sessions-claude-code:latest has it built in).
 */
import { HarnessAgent } from '@ai-sdk/harness/agent';

import { getMockModel } from './mock-model';

export type AgentKind = 'scripted' | 'claude-code';

/** Which agent this server runs. */
export function agentKind(): AgentKind {
  return process.env.DEMO_AGENT === 'claude-code' || process.env.ANTHROPIC_API_KEY ? 'claude-code' : 'scripted';
}

/**
 * What the processes of the sandbox get beside their defaults when Claude Code runs: no telemetry,
 * no error reports, no updates, nothing the CLI would fetch beside its model.
 */
export const CLAUDE_CODE_QUIET_ENV: Record<string, string> = {
  DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_NON_ESSENTIAL_MODEL_CALLS: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
};

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
    // Without a key, the mock model of this process: the real CLI, scripted answers.
    const auth = process.env.ANTHROPIC_API_KEY
      ? undefined
      : { anthropic: { apiKey: 'sk-ant-demo-mock', baseUrl: (await getMockModel()).url } };
    return new HarnessAgent({
      // Built on its own copy of @ai-sdk/harness: the same harness-v1 contract.
      harness: createClaudeCode(auth ? { auth } : {}) as unknown as ConstructorParameters<typeof HarnessAgent>[0]['harness'],
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
