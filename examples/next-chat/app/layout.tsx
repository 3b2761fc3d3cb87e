import type { Metadata as PageMetadata } from 'next';
import { cookies } from 'next/headers';
import type { ReactNode } from 'react';

import { SessionsProvider } from '@/components/sessions-provider';
import { Sidebar } from '@/components/sidebar';
import { OWNER_COOKIE, owns, verifyOwner } from '@/lib/owner';
import { getSessions, serverInfo } from '@/lib/sessions';

import './globals.css';

export const dynamic = 'force-dynamic';

export const metadata: PageMetadata = {
  title: 'Harness Chat',
  description: 'Conversations with a HarnessAgent, kept by harness-sessions.',
};

export default async function RootLayout({ children }: { children: ReactNode }) {
  // The caller's conversations only (lib/owner.ts).
  const owner = verifyOwner((await cookies()).get(OWNER_COOKIE)?.value);
  const sessions = (await getSessions().list()).filter((session) => owns(owner, session.metadata));
  return (
    <html lang="en">
      <body>
        <SessionsProvider initial={sessions}>
          <div className="app">
            <Sidebar info={serverInfo()} />
            <main className="main">{children}</main>
          </div>
        </SessionsProvider>
      </body>
    </html>
  );
}
