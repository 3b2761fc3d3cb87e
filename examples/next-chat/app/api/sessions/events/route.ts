import type { SessionEvent } from 'harness-sessions';

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
  const encoder = new TextEncoder();
  let cleanup = () => {};
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      let open = true;
      const send = (event: FeedEvent) => {
        if (open) controller.enqueue(encoder.encode(`data: ${JSON.stringify(event)}\n\n`));
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
    },
  });
}
