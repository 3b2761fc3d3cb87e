import { ChatView } from '@/components/chat-view';
import { getSessions, serverInfo } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/**
 * A conversation: its messages as the session keeps them (`get()`), so that a reload shows it
 * again. An id no session has yet is a new conversation: its first message creates the session.
 * While a turn is under way, its reply so far is left out: `useChat({ resume: true })` reads it
 * again from its first chunk (`reconnect()`), and would otherwise show it twice.
 */
export default async function ConversationPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const session = await getSessions().get(id);
  let messages = session?.messages ?? [];
  if (session?.status === 'busy' && messages.at(-1)?.role === 'assistant') messages = messages.slice(0, -1);
  const busy = session?.status === 'busy';
  return <ChatView key={id} id={id} initialMessages={messages} info={serverInfo()} busy={busy} />;
}
