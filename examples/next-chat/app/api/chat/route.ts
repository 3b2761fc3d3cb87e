import type { UIMessage } from 'ai';

import { badRequest, errorResponse } from '@/lib/http';
import { textOf } from '@/lib/messages';
import { notYours, ownerFor, owns, withOwnerCookie } from '@/lib/owner';
import { getSessions, isDeleted, serverInfo, titleOf } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/**
 * What `useChat` posts: `{ id, messages }`. The first message creates the session; a user message
 * starts a turn (`send()`); the assistant's message, sent back once every approval it asked for is
 * answered (`sendAutomaticallyWhen`), continues the paused turn (`continue()`), which reads the
 * answers from it. Only the last message matters: the session keeps the conversation.
 *
 * The turn outlives the request: no `abortSignal`, so a reload or a closed tab leaves it going
 * (`GET /api/chat/[id]/stream` finds it again) and only the Stop button, through
 * `POST /api/sessions/[id]/interrupt`, cuts it short. A user message's id is its `submissionId`:
 * a POST the network retried finds the turn it started rather than starting another.
 *
 * The session is created with the caller's owner id in its metadata (lib/owner.ts), and a session
 * of another owner is refused (403).
 */
export async function POST(request: Request) {
  let body: { id?: unknown; messages?: unknown };
  try {
    body = await request.json();
  } catch {
    return badRequest('The body must be JSON: { id, messages }.');
  }
  const { id, messages } = body;
  if (typeof id !== 'string' || id === '' || !Array.isArray(messages) || messages.length === 0) {
    return badRequest('The body must be { id, messages }, with at least one message.');
  }
  const message = messages.at(-1) as UIMessage;
  const sessions = getSessions();
  const { owner, setCookie } = ownerFor(request);
  try {
    if (isDeleted(id)) return withOwnerCookie(Response.json({ error: 'This conversation was deleted.', code: 'GONE' }, { status: 410 }), setCookie);
    const session =
      (await sessions.get(id)) ??
      (await sessions.create({ id, metadata: { title: titleOf(textOf(message)), owner, agent: serverInfo().agent } }));
    if (!owns(owner, session.metadata)) return withOwnerCookie(notYours(), setCookie);
    const turn =
      message.role === 'assistant'
        ? await sessions.continue(id, { message })
        : await sessions.send(id, { message, submissionId: message.id });
    return withOwnerCookie(turn.toUIMessageStreamResponse(), setCookie);
  } catch (error) {
    return withOwnerCookie(errorResponse(error), setCookie);
  }
}
