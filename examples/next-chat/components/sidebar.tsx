'use client';

import Link from 'next/link';
import { usePathname, useRouter } from 'next/navigation';

import { newId } from '@/lib/ids';
import type { ServerInfo } from '@/lib/types';

import { RelativeTime } from './relative-time';
import { useSessions } from './sessions-provider';
import { StatusBadge } from './status-badge';

const AGENTS: Record<ServerInfo['agent'], string> = { scripted: 'Scripted agent', 'claude-code': 'Claude Code' };

/** The conversations, following every change live, and the button that starts one. */
export function Sidebar({ info }: { info: ServerInfo }) {
  const { sessions, live } = useSessions();
  const pathname = usePathname();
  const router = useRouter();
  const waiting = sessions.filter((session) => session.status === 'awaiting-input').length;

  return (
    <aside className="sidebar">
      <div className="brand">
        <svg className="brand-mark" viewBox="0 0 32 32" aria-hidden>
          <rect width="32" height="32" rx="8" />
          <path d="M16 7l9 9-9 9-9-9z" />
        </svg>
        <div>
          <div className="brand-name">Harness Chat</div>
          <div className="brand-sub">{AGENTS[info.agent]}</div>
        </div>
      </div>

      <button type="button" className="button button-primary new-chat" onClick={() => router.push(`/c/${newId()}`)}>
        <svg className="icon" viewBox="0 0 16 16" aria-hidden>
          <path d="M8 3v10M3 8h10" />
        </svg>
        New conversation
      </button>

      <div className="list-heading">
        <span>Conversations</span>
        {waiting > 0 && <span className="count-attention">{waiting} need you</span>}
      </div>
      <nav className="session-list" aria-label="Conversations">
        {sessions.length === 0 ? (
          <p className="list-empty">Your conversations will show up here.</p>
        ) : (
          <ul>
            {sessions.map((session) => {
              const href = `/c/${session.id}`;
              return (
                <li key={session.id}>
                  <Link
                    href={href}
                    className={pathname === href ? 'session-link active' : 'session-link'}
                    data-session-id={session.id}
                    data-status={session.status}
                    aria-current={pathname === href ? 'page' : undefined}
                  >
                    <span className="session-title">{session.metadata.title}</span>
                    {session.metadata.agent !== undefined && session.metadata.agent !== info.agent && (
                      <span className="other-agent" data-other-agent>
                        Started with {AGENTS[session.metadata.agent]}
                      </span>
                    )}
                    <span className="session-meta">
                      <StatusBadge status={session.status} />
                      <RelativeTime ms={Date.parse(session.updatedAt)} />
                    </span>
                  </Link>
                </li>
              );
            })}
          </ul>
        )}
      </nav>

      <footer className="sidebar-footer">
        <span className={live ? 'live-dot on' : 'live-dot'} aria-hidden />
        <span>{live ? 'Live' : 'Reconnecting…'}</span>
        <span className="sep">·</span>
        <span>{info.sandbox === 'docker' ? 'Docker sandbox' : 'Local sandbox'}</span>
        <span className="sep">·</span>
        <span>SQLite</span>
      </footer>
    </aside>
  );
}
