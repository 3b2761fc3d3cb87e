/**
 * When the server starts: the session manager opens at once (a session a crash left live is marked
 * `interrupted` now, not at the first request). When the process is told to stop: every session is
 * suspended, so that the next start resumes them, then the process exits.
 *
 * `npm start` runs Next.js with `NEXT_MANUAL_SIG_HANDLE=true`, which leaves SIGTERM and SIGINT to
 * this handler: Next.js's own would exit while the sessions are being suspended.
 */
import { getSessions, shutdownSessions } from './lib/sessions';

getSessions();

let stopping = false;
function stop(signal: NodeJS.Signals) {
  if (stopping) return;
  stopping = true;
  console.log(`[next-chat] ${signal}: suspending the sessions…`);
  shutdownSessions()
    .then(() => console.log('[next-chat] sessions suspended'))
    .catch((error) => console.error('[next-chat] shutdown failed', error))
    .finally(() => process.exit(0));
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
