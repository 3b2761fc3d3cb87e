'use client';

import { Chat, useChat } from '@ai-sdk/react';
import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type UIMessage } from 'ai';
import { useRouter } from 'next/navigation';
import { useEffect, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';

import type { ServerInfo, Summary } from '@/lib/types';

import { RichText } from './rich-text';
import { useSessions } from './sessions-provider';
import { StatusBadge } from './status-badge';
import { ToolCard, type AnyToolPart } from './tool-card';

/**
 * The chats of this tab, one per conversation, kept while you look at another: a turn goes on
 * streaming into its chat when you switch conversations. A reload finds the turn under way again
 * (`resume: true` asks `GET /api/chat/[id]/stream`); the turn goes on on the server whatever the
 * page does, until Stop interrupts it.
 */
const chats = new Map<string, Chat<UIMessage>>();

function chatFor(id: string, messages: UIMessage[]): Chat<UIMessage> {
  // On the server, a chat of this render only: one kept from an earlier request would render its
  // messages, not the ones this page was given.
  let chat = typeof window === 'undefined' ? undefined : chats.get(id);
  if (chat === undefined) {
    chat = new Chat<UIMessage>({
      id,
      messages,
      transport: new DefaultChatTransport({ api: '/api/chat' }),
      // Once every approval of the last message is answered, the message goes back to the route,
      // which continues the paused turn with the answers: `continue()`.
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    if (typeof window !== 'undefined') chats.set(id, chat);
  }
  return chat;
}

/** The conversations deleted in this tab: the browser's Back may show one again, never writable. */
const deleted = new Set<string>();

const active = (status: string) => status === 'submitted' || status === 'streaming';

/**
 * What the user is told: plain words for the messages the package and the server write for
 * developers (API names, harness wording), the rest as it is.
 */
export function plain(text: string): string {
  const rules: [RegExp, string][] = [
    [/continue\(\)|waits for (the )?input|awaiting input/i, 'This conversation is waiting for your answer to the approval above. Answer it first, then write.'],
    [/produced by harness '([^']+)' but this agent uses '([^']+)'/i, 'This conversation was started with another agent, so this one cannot carry it on. You can still read it.'],
    [/application stopped|the server (is )?stopp|shut ?down/i, 'The server restarted while the agent was answering.'],
    [/interrupted/i, 'You stopped the answer.'],
    [/^network error$|failed to fetch|networkerror/i, 'The connection to the server was lost. Check your connection, then try again.'],
    [/capacity|no free (slot|port)|too many/i, 'Too many conversations are active right now. Try again in a moment.'],
    [/belongs to someone else/i, 'This conversation belongs to someone else.'],
    [/was deleted/i, 'This conversation was deleted.'],
  ];
  for (const [pattern, words] of rules) if (pattern.test(text)) return words;
  const sentence = text.replace(/\.+$/, '.').replace(/harness session/gi, 'agent');
  return sentence.charAt(0).toUpperCase() + sentence.slice(1);
}

/** What the server says went wrong, in plain words: the `error` of its JSON answer, or the message. */
function errorText(error: Error): string {
  try {
    const body = JSON.parse(error.message) as { error?: string };
    if (typeof body.error === 'string') return plain(body.error);
  } catch {}
  return plain(error.message);
}

/** A message the application sent on the user's behalf (the summary's question): not shown as theirs. */
function hidden(message: UIMessage): boolean {
  return message.role === 'user' && (message.metadata as { hidden?: unknown } | undefined)?.hidden !== undefined;
}

const SCRIPTED_TIPS = ['help', 'write hello.txt: hi', 'read hello.txt', 'run ls -la', 'what did I say?', '/sleep 4000'];
const CLAUDE_TIPS = ['What is in this folder?', 'Write hello.txt saying hi', 'Run the tests'];

export function ChatView({
  id,
  initialMessages,
  info,
  busy = false,
}: {
  id: string;
  initialMessages: UIMessage[];
  info: ServerInfo;
  busy?: boolean;
}) {
  // A chat new to this tab (a reload, a link) of a session busy when the page was made asks for
  // the turn under way; one kept from before is already reading it, and reading it twice would
  // show it twice.
  const [fresh] = useState(() => busy && !chats.has(id));
  const chat = chatFor(id, initialMessages);
  const { messages, status, error, sendMessage, addToolApprovalResponse, clearError } = useChat({ chat, resume: fresh });
  const { byId, apply, forget, expectSuspend } = useSessions();
  const session: Summary | undefined = byId.get(id);
  const router = useRouter();
  const [input, setInput] = useState('');
  const [busyAction, setBusyAction] = useState<string | undefined>();
  const [confirmDelete, setConfirmDelete] = useState(false);
  const [actionError, setActionError] = useState<string | undefined>();
  const [testRun, setTestRun] = useState<{ exitCode: number; output: string } | undefined>();
  const [summary, setSummary] = useState<{ title: string; points: string[] } | undefined>();
  // What a screen reader reads of the answer once it is complete (not each word as it streams).
  const [announced, setAnnounced] = useState('');
  const wasStreaming = useRef(false);
  const endRef = useRef<HTMLDivElement>(null);
  const inputRef = useRef<HTMLTextAreaElement>(null);

  // The server's conversation, when this tab did not stream it: a turn that ended while the page was
  // elsewhere, or in another tab. Read again whenever the session settles.
  const settledAt = session && session.status !== 'busy' && session.status !== 'preparing' ? session.updatedAt : undefined;
  useEffect(() => {
    if (settledAt === undefined || active(chat.status)) return;
    let cancelled = false;
    fetch(`/api/sessions/${id}`)
      .then((response) => (response.ok ? response.json() : undefined))
      .then((record: { messages: UIMessage[] } | undefined) => {
        if (cancelled || record === undefined || active(chat.status)) return;
        if (JSON.stringify(record.messages) !== JSON.stringify(chat.messages)) chat.messages = record.messages;
      })
      .catch(() => {});
    return () => {
      cancelled = true;
    };
  }, [id, chat, settledAt]);

  useEffect(() => {
    endRef.current?.scrollIntoView({ block: 'end' });
  }, [messages]);

  useEffect(() => {
    inputRef.current?.focus();
  }, [id]);

  const streaming = active(status);
  useEffect(() => {
    if (streaming) wasStreaming.current = true;
    else if (wasStreaming.current) {
      wasStreaming.current = false;
      const last = messages.at(-1);
      if (last?.role === 'assistant') {
        const text = last.parts.map((part) => (part.type === 'text' ? part.text : '')).join(' ').trim();
        setAnnounced(text === '' ? 'The agent answered.' : `The agent answered: ${text.slice(0, 500)}`);
      }
    }
  }, [streaming, messages]);
  const sessionStatus = session?.status;
  const otherAgent = session?.metadata.agent !== undefined && session.metadata.agent !== info.agent;
  const blocked = deleted.has(id)
    ? 'This conversation was deleted: it can no longer be written to.'
    : otherAgent
      ? `This conversation was started with ${session?.metadata.agent === 'claude-code' ? 'Claude Code' : 'the scripted agent'}, and this server runs ${info.agent === 'claude-code' ? 'Claude Code' : 'the scripted agent'}: you can read it, not continue it.`
      : sessionStatus === 'awaiting-input'
      ? 'Answer the approval above to go on.'
      : sessionStatus === 'interrupted'
        ? 'The server stopped while this conversation was live: it can be read, not continued.'
        : sessionStatus === 'closed'
          ? 'This conversation is closed.'
          : sessionStatus === 'busy' && !streaming
            ? 'The agent is working on this conversation elsewhere.'
            : undefined;

  function submit(event?: FormEvent) {
    event?.preventDefault();
    const text = input.trim();
    if (text === '' || streaming || blocked !== undefined) return;
    setInput('');
    void sendMessage({ text });
  }

  function onKeyDown(event: KeyboardEvent<HTMLTextAreaElement>) {
    if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) submit(event);
  }

  async function act(action: string, run: () => Promise<Response>, after?: (response: Response) => Promise<void> | void) {
    setBusyAction(action);
    setActionError(undefined);
    try {
      const response = await run();
      if (!response.ok) {
        const body = await response.json().catch(() => ({}));
        setActionError(plain(body.error ?? `Something went wrong on the server (${response.status}).`));
        return;
      }
      await after?.(response);
    } catch (caught) {
      setActionError(plain(caught instanceof Error ? caught.message : String(caught)));
    } finally {
      setBusyAction(undefined);
    }
  }

  const suspend = () =>
    act(
      'suspend',
      () => {
        expectSuspend(id);
        return fetch(`/api/sessions/${id}/suspend`, { method: 'POST' });
      },
      async (response) => apply(await response.json()),
    );

  // exec(): the tests run in the session's sandbox, outside the conversation.
  const runTests = () =>
    act(
      'exec',
      () => fetch(`/api/sessions/${id}/exec`, { method: 'POST' }),
      async (response) => {
        const result = (await response.json()) as { exitCode: number; stdout: string; stderr: string };
        setTestRun({ exitCode: result.exitCode, output: `${result.stdout}${result.stderr}`.trim() });
      },
    );

  // A structured answer: a turn whose answer is checked against a JSON Schema.
  const summarise = () =>
    act(
      'summary',
      () => fetch(`/api/sessions/${id}/summary`, { method: 'POST' }),
      async (response) => {
        const body = (await response.json()) as { summary: { title: string; points: string[] } };
        setSummary(body.summary);
      },
    );

  const remove = () => {
    if (!confirmDelete) {
      setConfirmDelete(true);
      setTimeout(() => setConfirmDelete(false), 4000);
      return;
    }
    void act(
      'delete',
      () => fetch(`/api/sessions/${id}`, { method: 'DELETE' }),
      () => {
        chats.delete(id);
        deleted.add(id);
        forget(id);
        router.push('/');
      },
    );
  };

  // Stop interrupts the turn on the server: the stream ends there, the reply marked as cut.
  const interrupt = () => act('interrupt', () => fetch(`/api/sessions/${id}/interrupt`, { method: 'POST' }));

  const answer = (approvalId: string, approved: boolean) =>
    addToolApprovalResponse({ id: approvalId, approved, reason: approved ? undefined : 'Denied in the chat.' });

  const title = session?.metadata.title ?? (messages.length === 0 ? 'New conversation' : 'Conversation');
  const canSuspend = !streaming && (sessionStatus === 'idle' || sessionStatus === 'awaiting-input');
  // A message is taken when idle, or suspended (it resumes the session).
  const canSummarise = !streaming && (sessionStatus === 'idle' || sessionStatus === 'suspended');
  const tips = info.agent === 'scripted' ? SCRIPTED_TIPS : CLAUDE_TIPS;

  return (
    <section className="chat" data-chat-id={id} data-chat-status={status}>
      <header className="chat-header">
        <div className="chat-heading">
          <h1 className="chat-title">{title}</h1>
          {sessionStatus !== undefined && <StatusBadge status={sessionStatus} />}
          {otherAgent && <span className="badge badge-muted" data-other-agent>Other agent</span>}
        </div>
        {session !== undefined && !deleted.has(id) && (
          <div className="chat-actions">
            <button type="button" className="button button-ghost" onClick={suspend} disabled={!canSuspend || busyAction !== undefined}>
              Suspend now
            </button>
            <button type="button" className="button button-ghost" onClick={runTests} disabled={busyAction !== undefined}>
              Run tests
            </button>
            <button type="button" className="button button-ghost" onClick={summarise} disabled={!canSummarise || busyAction !== undefined}>
              Summarise as JSON
            </button>
            <button
              type="button"
              className={confirmDelete ? 'button button-danger' : 'button button-ghost'}
              onClick={remove}
              disabled={busyAction !== undefined}
            >
              {confirmDelete ? 'Delete for good?' : 'Delete'}
            </button>
          </div>
        )}
      </header>

      <div className="chat-scroll">
        <div className="chat-column">
          {messages.length === 0 ? (
            <div className="empty-chat">
              <h2>What should the agent do?</h2>
              <p>
                {info.agent === 'scripted'
                  ? 'This agent needs no model: it answers from what you write, works in a folder of the sandbox, and asks before it writes a file or runs a command.'
                  : 'Claude Code works in a folder of the sandbox, and asks before it edits a file or runs a command.'}
              </p>
              <div className="tips">
                {tips.map((tip) => (
                  <button
                    key={tip}
                    type="button"
                    className="tip"
                    onClick={() => {
                      setInput(tip);
                      inputRef.current?.focus();
                    }}
                  >
                    {tip}
                  </button>
                ))}
              </div>
            </div>
          ) : (
            messages
              .filter((message) => !hidden(message))
              .map((message, index, shown) => (
                <MessageView
                  key={message.id}
                  message={message}
                  onAnswer={answer}
                  disabled={streaming}
                  settled={!(streaming && index === shown.length - 1)}
                />
              ))
          )}
          {status === 'submitted' && (
            <div className="typing" aria-label="The agent is working">
              <span />
              <span />
              <span />
            </div>
          )}
          {session?.status === 'suspended' && (
            <p className="notice">Paused to save resources. Your next message picks it up where it left off.</p>
          )}
          <div ref={endRef} />
        </div>
      </div>

      {summary !== undefined && (
        <div className="notice panel" role="status" data-summary>
          <button type="button" className="button button-ghost panel-close" onClick={() => setSummary(undefined)} aria-label="Dismiss the summary">
            Dismiss
          </button>
          <strong>{summary.title}</strong>
          <pre>{JSON.stringify(summary, null, 2)}</pre>
        </div>
      )}
      {testRun !== undefined && (
        <div className="notice panel" role="status" data-test-run={testRun.exitCode}>
          <button type="button" className="button button-ghost panel-close" onClick={() => setTestRun(undefined)} aria-label="Dismiss the test run">
            Dismiss
          </button>
          <strong>
            {testRun.output.startsWith('No package.json here')
              ? 'No tests to run: this folder has no package.json.'
              : testRun.exitCode === 0
                ? 'Tests passed'
                : `Tests failed (exit ${testRun.exitCode})`}
          </strong>
          <pre>{testRun.output}</pre>
        </div>
      )}
      <div className="sr-only" role="status" aria-live="polite" data-live="answer">
        {announced}
      </div>
      {(error || actionError) && (
        <div className="error-banner" role="alert">
          <span>{error ? errorText(error) : actionError}</span>
          <button
            type="button"
            className="button button-ghost"
            onClick={() => {
              clearError();
              setActionError(undefined);
            }}
          >
            Dismiss
          </button>
        </div>
      )}

      <form className="composer" onSubmit={submit}>
        {blocked !== undefined && <p className="composer-note">{blocked}</p>}
        <div className="composer-box">
          <textarea
            ref={inputRef}
            value={input}
            onChange={(event) => setInput(event.target.value)}
            onKeyDown={onKeyDown}
            placeholder={messages.length === 0 ? 'Write a message… (try “help”)' : 'Write a message…'}
            rows={1}
            aria-label="Message"
            disabled={deleted.has(id)}
          />
          {/* Stop sits beside Send, never in its place: a double click on Send cannot stop the answer. */}
          <div className="send-group">
            {streaming && (
              <button type="button" className="button button-ghost" onClick={() => void interrupt()} disabled={busyAction === 'interrupt'}>
                Stop
              </button>
            )}
            <button type="submit" className="button button-primary" disabled={streaming || input.trim() === '' || blocked !== undefined}>
              Send
            </button>
          </div>
        </div>
      </form>
    </section>
  );
}

function MessageView({
  message,
  onAnswer,
  disabled,
  settled,
}: {
  message: UIMessage;
  onAnswer: (approvalId: string, approved: boolean) => void;
  disabled: boolean;
  /** Whether the message is over (not the one streaming). */
  settled: boolean;
}) {
  if (message.role === 'user') {
    const text = message.parts.map((part) => (part.type === 'text' ? part.text : '')).join('');
    return (
      <div className="message message-user" data-role="user">
        <div className="bubble">{text}</div>
      </div>
    );
  }
  return (
    <div className="message message-assistant" data-role="assistant" data-message-id={message.id}>
      {message.parts.map((part, index) => {
        if (part.type === 'text') {
          return (
            <div key={index} className="assistant-text">
              <RichText text={part.text} streaming={!settled} />
            </div>
          );
        }
        if (part.type === 'reasoning') {
          return (
            <p key={index} className="reasoning">
              {part.text}
            </p>
          );
        }
        if (part.type === 'dynamic-tool' || part.type.startsWith('tool-')) {
          const tool = part as AnyToolPart;
          // Approved, yet the message ended without it running: answered while the conversation was
          // paused (a restart), the agent was told the answer in words and carried on from there.
          const superseded = settled && tool.state === 'approval-responded' && tool.approval?.approved === true;
          return <ToolCard key={tool.toolCallId} part={tool} onAnswer={onAnswer} disabled={disabled} superseded={superseded} />;
        }
        return null;
      })}
      {cutReason(message) !== undefined && (
        <p className="cut-mark" data-cut="true" title={cutReason(message)}>
          {plain(cutReason(message)!)}
        </p>
      )}
    </div>
  );
}

/** Why the reply was cut short, when it was: `metadata.cut`, which the server sets. */
function cutReason(message: UIMessage): string | undefined {
  const metadata = message.metadata as { cut?: unknown } | undefined;
  return typeof metadata?.cut === 'string' ? metadata.cut : undefined;
}

