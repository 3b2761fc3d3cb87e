/**
 * The model Claude Code talks to when no `ANTHROPIC_API_KEY` is set (`DEMO_AGENT=claude-code`): the
 * mock of the Anthropic Messages API of `harness-sessions/testing`, on a loopback port of this
 * server, with scripted replies that show what the real CLI does with a model's answers:
 *
 * - "write …" → a command that writes `hello.txt` (Claude Code asks approval), then the file read
 *   back (no approval needed), then a summary;
 * - "run …", "what is in this folder?" → a command (approval asked), then what it printed;
 * - anything else → a text answer saying what to try.
 *
 * The real Claude Code CLI runs in the sandbox all along: only the model is scripted.
 */
import type { AnthropicMock, AnthropicMockReply, AnthropicMockRequest } from 'harness-sessions/testing';


type Block = { type: string; text?: string; name?: string; input?: Record<string, unknown>; content?: unknown; is_error?: boolean };
type Message = { role: string; content: string | Block[] };

const MOCK = Symbol.for('next-chat.mock-model');
type Holder = { [MOCK]?: Promise<AnthropicMock> };

/**
 * The port of the mock model: `DEMO_MOCK_PORT`, else 4100 with `DEMO_SANDBOX=docker` (the container
 * has no network: the sandbox's `allowedHosts` must name this port before the mock starts), else
 * one the system picks.
 */
export function mockModelPort(): number {
  if (process.env.DEMO_MOCK_PORT) return Number(process.env.DEMO_MOCK_PORT);
  return process.env.DEMO_SANDBOX === 'docker' ? 4100 : 0;
}

/** The mock model of this process, started on first use. */
export function getMockModel(): Promise<AnthropicMock> {
  const holder = globalThis as Holder;
  holder[MOCK] ??= import('harness-sessions/testing').then(({ createAnthropicMock }) =>
    createAnthropicMock({ respond: (request) => reply(request), model: 'claude-mock', port: mockModelPort() }),
  );
  return holder[MOCK];
}

const blocks = (message: Message | undefined): Block[] =>
  message === undefined ? [] : typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;

const textOf = (content: unknown): string =>
  typeof content === 'string' ? content : Array.isArray(content) ? content.map((b: Block) => b.text ?? '').join('') : '';

/** The reply to one request of the CLI. */
export function reply(request: AnthropicMockRequest): AnthropicMockReply {
  // The conversation: the CLI also sends messages of its own (role `system`: the agents it has).
  const messages: Message[] = (request.body?.messages ?? []).filter((m: Message) => m.role === 'user' || m.role === 'assistant');
  // Requests without tools are the CLI's own side questions (a title, say): a short answer.
  if (!Array.isArray(request.body?.tools) || request.body.tools.length === 0) return { text: 'Harness Chat' };
  const last = messages.at(-1);
  const result = blocks(last).find((b) => b.type === 'tool_result');
  if (result !== undefined) {
    const use = blocks(messages.at(-2)).findLast((b) => b.type === 'tool_use');
    const output = textOf(result.content).trim();
    const command = String(use?.input?.command ?? '');
    if (result.is_error) return { text: `That did not happen: ${output}` };
    if (use?.name === 'Bash' && command.includes('> hello.txt')) {
      const folder = output.split('\n').at(-1);
      return { text: 'Written. Reading it back:', toolUse: { name: 'Read', input: { file_path: `${folder}/hello.txt` } } };
    }
    if (use?.name === 'Read') {
      // The CLI numbers the lines it read: `     1\thi`.
      const content = output
        .split('\n')
        .map((line) => line.replace(/^\s*\d+(?:[\t→]|$)/, ''))
        .join('\n')
        .trim();
      return { text: `hello.txt is there, and says: ${content}` };
    }
    if (use?.name === 'Bash') {
      const lines = output === '' ? 0 : output.split('\n').length;
      return { text: `\`${command}\` ran: ${lines} line${lines === 1 ? '' : 's'} of output, in the card above.` };
    }
    return { text: 'Done.' };
  }
  const said = blocks(last)
    .filter((b) => b.type === 'text' && !String(b.text).includes('<system-reminder>'))
    .map((b) => b.text)
    .join(' ')
    .trim();
  if (/\bwrite\b/i.test(said)) {
    return {
      text: 'I will write hello.txt in my folder, which needs your approval.',
      toolUse: { name: 'Bash', input: { command: "printf 'hi from Claude Code\\n' > hello.txt && pwd", description: 'Write hello.txt' } },
    };
  }
  const run = /^run\s+(.+)$/i.exec(said)?.[1];
  if (run !== undefined || /folder|\bls\b|tests?\b/i.test(said)) {
    const command = run ?? 'ls -la';
    return { text: `I will run \`${command}\`, which needs your approval.`, toolUse: { name: 'Bash', input: { command, description: `Run ${command}` } } };
  }
  return {
    text:
      `This is Claude Code answering through a mock model (no ANTHROPIC_API_KEY is set), so my answers are scripted. ` +
      `You said: ${said || '(nothing)'}. Try "Write hello.txt saying hi" or "What is in this folder?".`,
  };
}
