/**
 * When the server starts: the session manager opens at once (a session a crash left live is marked
 * `interrupted` now, not at the first request). When the process is told to stop: every session is
 * suspended, so that the next start resumes them, then the process exits.
 *
 * `npm start` runs Next.js with `NEXT_MANUAL_SIG_HANDLE=true`, which leaves SIGTERM and SIGINT to
 * this handler: Next.js's own would exit while the sessions are being suspended. SIGHUP (the
 * terminal closed) stops it the same way, and so does the end of the process that started it
 * (`DEMO_PARENT_PID`, set by `npm run demo`: should it be killed outright, this server is left
 * to init, and notices).
 */
import { getSessions, shutdownSessions } from './lib/sessions';

getSessions();

let stopping = false;
function stop(why: string) {
  if (stopping) return;
  stopping = true;
  console.log(`[next-chat] ${why}: suspending the sessions…`);
  shutdownSessions()
    .then(() => console.log('[next-chat] sessions suspended'))
    .catch((error) => console.error('[next-chat] shutdown failed', error))
    .finally(() => process.exit(0));
}
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => stop(signal));

const parent = Number(process.env.DEMO_PARENT_PID);
if (Number.isInteger(parent) && parent > 0) {
  setInterval(() => {
    try {
      process.kill(parent, 0); // still there
    } catch {
      stop('npm run demo is gone');
    }
  }, 500).unref();
}
