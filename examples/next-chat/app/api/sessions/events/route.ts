import type { SessionEvent } from 'harness-sessions';

import { ownerFor, owns } from '@/lib/owner';
import { getSessions } from '@/lib/sessions';
import type { FeedEvent, Metadata } from '@/lib/types';

export const dynamic = 'force-dynamic';

/** A comment line every so often, so that proxies keep the connection open. */
const KEEP_ALIVE_MS = 15_000;

/**
 * Every change of every session as server-sent events (`subscribe()`), after a snapshot of them
 * all (`list()`). The changes that come while the snapshot is read wait for it: a list that applies
 * a change only when it is newer (`updatedAt`) than what it holds is never left behind.
 */
export async function GET(request: Request) {
  const sessions = getSessions();
  // Only the caller's sessions (lib/owner.ts): their changes, and the deletion of those it was told of.
  const { owner, setCookie } = ownerFor(request);
  const told = new Set<string>();
  const forCaller = (event: FeedEvent): FeedEvent | undefined => {
    if (event.type === 'snapshot') {
      const mine = event.sessions.filter((session) => owns(owner, session.metadata));
      for (const session of mine) told.add(session.id);
      return { type: 'snapshot', sessions: mine };
    }
    if (event.type === 'deleted') return told.delete(event.sessionId) ? event : undefined;
    if (!owns(owner, event.session.metadata)) return undefined;
    told.add(event.session.id);
    return event;
  };
  const encoder = new TextEncoder();
  let cleanup = () => {};
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      let open = true;
      const send = (event: FeedEvent) => {
        const shown = forCaller(event);
        if (open && shown !== undefined) controller.enqueue(encoder.encode(`data: ${JSON.stringify(shown)}\n\n`));
      };
      let waiting: SessionEvent<Metadata>[] | undefined = [];
      const unsubscribe = sessions.subscribe((event) => {
        if (waiting !== undefined) waiting.push(event);
        else send(event);
      });
      const keepAlive = setInterval(() => {
        if (open) controller.enqueue(encoder.encode(': keep-alive\n\n'));
      }, KEEP_ALIVE_MS);
      cleanup = () => {
        if (!open) return;
        open = false;
        unsubscribe();
        clearInterval(keepAlive);
        try {
          controller.close();
        } catch {}
      };
      request.signal.addEventListener('abort', cleanup, { once: true });
      controller.enqueue(encoder.encode('retry: 1000\n\n'));
      try {
        send({ type: 'snapshot', sessions: await sessions.list() });
      } catch (error) {
        console.error('[next-chat] list() failed', error);
      }
      const buffered = waiting;
      waiting = undefined;
      for (const event of buffered) send(event);
    },
    cancel() {
      cleanup();
    },
  });
  return new Response(stream, {
    headers: {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...(setCookie === undefined ? {} : { 'set-cookie': setCookie }),
    },
  });
}
