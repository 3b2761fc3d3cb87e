import { ChatView } from '@/components/chat-view';
import { getSessions, serverInfo } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/**
 * A conversation: its messages as the session keeps them (`get()`), so that a reload shows it
 * again. An id no session has yet is a new conversation: its first message creates the session.
 */
export default async function ConversationPage({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  const session = await getSessions().get(id);
  return <ChatView key={id} id={id} initialMessages={session?.messages ?? []} info={serverInfo()} />;
}
