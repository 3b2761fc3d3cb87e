import type { UIMessage } from 'ai';

import { badRequest, errorResponse } from '@/lib/http';
import { textOf } from '@/lib/messages';
import { getSessions, titleOf } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/**
 * What `useChat` posts: `{ id, messages }`. The first message creates the session; a user message
 * starts a turn (`send()`); the assistant's message, sent back once every approval it asked for is
 * answered (`sendAutomaticallyWhen`), continues the paused turn (`continue()`), which reads the
 * answers from it. Only the last message matters: the session keeps the conversation.
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
  try {
    if ((await sessions.get(id)) === undefined) {
      await sessions.create({ id, metadata: { title: titleOf(textOf(message)) } });
    }
    // The request's signal: the stop button of useChat, or a closed tab, cuts the turn short.
    const turn =
      message.role === 'assistant'
        ? await sessions.continue(id, { message, abortSignal: request.signal })
        : await sessions.send(id, { message, abortSignal: request.signal });
    return turn.toUIMessageStreamResponse();
  } catch (error) {
    return errorResponse(error);
  }
}
