import { cookies } from 'next/headers';

import { ChatView } from '@/components/chat-view';
import { OWNER_COOKIE, owns, verifyOwner } from '@/lib/owner';
import { getSessions, serverInfo } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/**
 * A conversation: its messages as the session keeps them (`get()`), so that a reload shows it
 * again. An id no session has yet is a new conversation: its first message creates the session.
 * While a turn is under way, its reply so far is left out: `useChat({ resume: true })` reads it
 * again from its first chunk (`reconnect()`), and would otherwise show it twice. A conversation of
 * another owner (lib/owner.ts) is not shown.
 */
export default async function ConversationPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const session = await getSessions().get(id);
  if (session !== undefined && !owns(verifyOwner((await cookies()).get(OWNER_COOKIE)?.value), session.metadata)) {
    return (
      <section className="welcome">
        <div className="welcome-card" role="alert">
          <h1>Not your conversation</h1>
          <p>This conversation belongs to someone else, so it cannot be shown here.</p>
        </div>
      </section>
    );
  }
  let messages = session?.messages ?? [];
  if (session?.status === 'busy' && messages.at(-1)?.role === 'assistant') messages = messages.slice(0, -1);
  const busy = session?.status === 'busy';
  return <ChatView key={id} id={id} initialMessages={messages} info={serverInfo()} busy={busy} />;
}
