import { NewConversationButton } from '@/components/new-conversation-button';
import { serverInfo } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

export default function Home() {
  const { agent } = serverInfo();
  return (
    <section className="welcome">
      <div className="welcome-card">
        <h1>Conversations that wait for you</h1>
        <p>
          Each conversation is a session of {agent === 'scripted' ? 'a model-free scripted agent' : 'Claude Code'} in a
          folder of its own. It asks before it writes a file or runs a command, is suspended when nobody writes to it,
          and picks up where it was on your next message — even after the server restarts.
        </p>
        <NewConversationButton />
      </div>
    </section>
  );
}
