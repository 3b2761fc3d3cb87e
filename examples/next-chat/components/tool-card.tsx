'use client';

import type { DynamicToolUIPart, ToolUIPart } from 'ai';

export type AnyToolPart = ToolUIPart | DynamicToolUIPart;

/** The name of the tool a part calls. */
export function toolName(part: AnyToolPart): string {
  return part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length);
}

const TITLES: Record<string, string> = {
  write: 'Write a file',
  read: 'Read a file',
  bash: 'Run a command',
  list: 'List files',
  askUserQuestions: 'Ask you',
  // Claude Code's.
  edit: 'Edit a file',
  glob: 'Find files',
  grep: 'Search files',
  webSearch: 'Search the web',
  WebFetch: 'Fetch a page',
  TodoWrite: 'Plan',
};

type Input = Record<string, unknown> | undefined;

/** One line that says what the call does: the command, the file. */
function summary(name: string, input: Input): string | undefined {
  if (input === undefined || input === null || typeof input !== 'object') return undefined;
  if (typeof input.command === 'string') return `$ ${input.command}`;
  if (name === 'list' && (input.path === '.' || input.path === undefined)) return 'the working directory';
  for (const key of ['file_path', 'path', 'pattern']) {
    if (typeof input[key] === 'string') return input[key] as string;
  }
  return undefined;
}

function pretty(value: unknown): string {
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2);
}

/** What the call gave back, as a person wants to read it. */
function OutputView({ output }: { output: unknown }) {
  if (output !== null && typeof output === 'object' && 'exitCode' in output) {
    const { exitCode, stdout, stderr } = output as { exitCode: number; stdout?: string; stderr?: string };
    return (
      <div className="tool-section">
        <div className="tool-label">
          Output <span className={exitCode === 0 ? 'exit ok' : 'exit fail'}>exit {exitCode}</span>
        </div>
        {stdout ? <pre className="tool-pre">{stdout}</pre> : null}
        {stderr ? <pre className="tool-pre tool-stderr">{stderr}</pre> : null}
        {!stdout && !stderr ? <p className="tool-note">No output.</p> : null}
      </div>
    );
  }
  if (output !== null && typeof output === 'object' && 'bytes' in output && 'path' in output) {
    const { path, bytes } = output as { path: string; bytes: number };
    return (
      <p className="tool-note">
        Wrote {bytes} {bytes === 1 ? 'byte' : 'bytes'} to <code>{path}</code>.
      </p>
    );
  }
  const text = Array.isArray(output) && output.every((item) => typeof item === 'string') ? output.join('\n') : pretty(output);
  return (
    <div className="tool-section">
      <div className="tool-label">Output</div>
      <pre className="tool-pre">{text === '' ? '(empty)' : text}</pre>
    </div>
  );
}

/** Whether the user denied the call: whatever the harness made of it (an error, a denied output). */
function denied(part: AnyToolPart): boolean {
  return part.state === 'output-denied' || part.approval?.approved === false;
}

/** The state of a call, in words. */
function stateLabel(part: AnyToolPart, superseded: boolean): { label: string; tone: string } {
  if (denied(part)) return { label: 'Denied', tone: 'danger' };
  if (superseded) return { label: 'Replaced', tone: 'muted' };
  switch (part.state) {
    case 'input-streaming':
    case 'input-available':
      return { label: 'Running', tone: 'working' };
    case 'approval-requested':
      return { label: 'Waiting for you', tone: 'attention' };
    case 'approval-responded':
      return part.approval?.approved ? { label: 'Approved', tone: 'working' } : { label: 'Denied', tone: 'danger' };
    case 'output-available':
      return { label: 'Done', tone: 'ready' };
    case 'output-error':
      return { label: 'Failed', tone: 'danger' };
    case 'output-denied':
      return { label: 'Denied', tone: 'danger' };
    default:
      return { label: String((part as { state: string }).state), tone: 'muted' };
  }
}

/**
 * A tool call as a card: what it does, its input and output, and, while it waits for an approval,
 * the buttons that answer it.
 */
export function ToolCard({
  part,
  onAnswer,
  disabled,
  superseded = false,
}: {
  part: AnyToolPart;
  onAnswer: (approvalId: string, approved: boolean) => void;
  disabled: boolean;
  /**
   * An approved call whose turn ended without it running: answered after a restart, the agent was
   * told the answer in words and ran it again, in a card of its own below.
   */
  superseded?: boolean;
}) {
  const name = toolName(part);
  const input = part.input as Input;
  const line = summary(name, input);
  const { label, tone } = stateLabel(part, superseded);
  const wasDenied = denied(part);
  const waiting = part.state === 'approval-requested';
  const content = typeof input?.content === 'string' ? input.content : undefined;
  const otherInput =
    input !== undefined && line === undefined && content === undefined && Object.keys(input ?? {}).length > 0;

  return (
    <div
      className={`tool-card${waiting ? ' tool-card-waiting' : ''}${superseded ? ' tool-card-superseded' : ''}`}
      data-tool={name}
      data-state={part.state}
      data-denied={wasDenied ? 'true' : undefined}
      data-superseded={superseded ? 'true' : undefined}
    >
      <div className="tool-head">
        <span className="tool-title">{TITLES[name] ?? name}</span>
        <span className={`tool-state tone-${tone}`}>{label}</span>
      </div>
      {line !== undefined && <pre className="tool-line">{line}</pre>}
      {content !== undefined && (
        <div className="tool-section">
          <div className="tool-label">Content</div>
          <pre className="tool-pre">{content}</pre>
        </div>
      )}
      {otherInput && (
        <div className="tool-section">
          <div className="tool-label">Input</div>
          <pre className="tool-pre">{pretty(input)}</pre>
        </div>
      )}
      {part.state === 'output-available' && !wasDenied && <OutputView output={part.output} />}
      {part.state === 'output-error' && !wasDenied && <pre className="tool-pre tool-stderr">{part.errorText}</pre>}
      {wasDenied && <p className="tool-note">You denied this: it did not run.</p>}
      {superseded && <p className="tool-note">Approved while the conversation was paused: the agent carried on from your answer, below.</p>}
      {waiting && part.approval !== undefined && (
        <div className="tool-actions">
          <span className="tool-question">Allow this?</span>
          <button
            type="button"
            className="button button-ghost"
            disabled={disabled}
            onClick={() => onAnswer(part.approval!.id, false)}
          >
            Deny
          </button>
          <button
            type="button"
            className="button button-primary"
            disabled={disabled}
            onClick={() => onAnswer(part.approval!.id, true)}
          >
            Approve
          </button>
        </div>
      )}
    </div>
  );
}
