'use client';

import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';

import type { FeedEvent, Summary } from '@/lib/types';

interface SessionsContext {
  /** Every session, the newest conversation first. */
  sessions: Summary[];
  byId: ReadonlyMap<string, Summary>;
  /** Whether the events route is connected. */
  live: boolean;
  /** Takes a session as a route answered it, unless the feed already has a newer one. */
  apply: (session: Summary) => void;
  forget: (id: string) => void;
  /** This tab asks to suspend `id`: its suspension is then no news. */
  expectSuspend: (id: string) => void;
}

/** Something the page tells the user about a conversation they are not looking at, until dismissed. */
interface Notice {
  key: number;
  text: string;
}

/** How many conversations can be live at once: the server's ports (lib/sessions.ts). */
const CAPACITY = 4;
const LIVE = new Set(['preparing', 'idle', 'busy', 'awaiting-input']);

const Context = createContext<SessionsContext | null>(null);

/** Applies a change, unless it is older than what the list holds. */
function reduce(current: ReadonlyMap<string, Summary>, event: FeedEvent): ReadonlyMap<string, Summary> {
  if (event.type === 'snapshot') return new Map(event.sessions.map((session) => [session.id, session]));
  if (event.type === 'deleted') {
    if (!current.has(event.sessionId)) return current;
    const next = new Map(current);
    next.delete(event.sessionId);
    return next;
  }
  const known = current.get(event.session.id);
  if (known !== undefined && Date.parse(known.updatedAt) > Date.parse(event.session.updatedAt)) return current;
  return new Map(current).set(event.session.id, event.session);
}

/**
 * The sessions of the server, followed live: a snapshot, then every change, from the events route
 * (`subscribe()` as server-sent events). `EventSource` reconnects by itself, and each connection
 * starts with a new snapshot.
 */
export function SessionsProvider({ initial, children }: { initial: Summary[]; children: ReactNode }) {
  const [byId, setById] = useState<ReadonlyMap<string, Summary>>(() => new Map(initial.map((s) => [s.id, s])));
  const [live, setLive] = useState(false);
  const [notices, setNotices] = useState<Notice[]>([]);
  const [needsYou, setNeedsYou] = useState('');
  const expected = useRef(new Set<string>());
  const known = useRef(byId);
  const nextKey = useRef(1);

  useEffect(() => {
    const source = new EventSource('/api/sessions/events');
    source.onopen = () => setLive(true);
    source.onerror = () => setLive(false);
    source.onmessage = (message) => {
      const event = JSON.parse(message.data) as FeedEvent;
      if (event.type === 'updated') {
        const before = known.current.get(event.session.id)?.status;
        const after = event.session.status;
        const title = event.session.metadata.title;
        // A live conversation suspended without this tab asking: to make room, or after a while idle.
        if (after === 'suspended' && before !== undefined && LIVE.has(before) && before !== 'preparing') {
          if (expected.current.delete(event.session.id)) {
            // Asked for here: the button's own result says so.
          } else {
            const starting = [...known.current.values()].some((s) => s.id !== event.session.id && s.status === 'preparing');
            const text = starting
              ? `“${title}” was paused to make room for another conversation: up to ${CAPACITY} can be active at once. Write to it again to pick it up where it left off.`
              : `“${title}” was paused after a while without activity. Write to it again to pick it up where it left off.`;
            setNotices((current) => [...current, { key: nextKey.current++, text }]);
          }
        }
        if (after === 'awaiting-input' && before !== 'awaiting-input') setNeedsYou(`“${title}” needs you: an action is waiting for your approval.`);
      }
      setById((current) => {
        const next = reduce(current, event);
        known.current = next;
        return next;
      });
    };
    return () => source.close();
  }, []);

  const apply = useCallback((session: Summary) => setById((current) => reduce(current, { type: 'updated', session })), []);
  const forget = useCallback((id: string) => setById((current) => reduce(current, { type: 'deleted', sessionId: id })), []);
  const expectSuspend = useCallback((id: string) => void expected.current.add(id), []);

  const value = useMemo<SessionsContext>(
    () => ({
      sessions: [...byId.values()].sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt)),
      byId,
      live,
      apply,
      forget,
      expectSuspend,
    }),
    [byId, live, apply, forget, expectSuspend],
  );
  return (
    <Context.Provider value={value}>
      {children}
      {notices.length > 0 && (
        <div className="notices" role="status">
          {notices.map((notice) => (
            <div key={notice.key} className="notice notice-floating" data-notice="paused">
              <span>{notice.text}</span>
              <button
                type="button"
                className="button button-ghost"
                onClick={() => setNotices((current) => current.filter((n) => n.key !== notice.key))}
              >
                Dismiss
              </button>
            </div>
          ))}
        </div>
      )}
      {/* Read out by screen readers when a conversation starts waiting for the user. */}
      <div className="sr-only" role="alert" aria-live="assertive" data-live="needs-you">
        {needsYou}
      </div>
    </Context.Provider>
  );
}

export function useSessions(): SessionsContext {
  const context = useContext(Context);
  if (context === null) throw new Error('useSessions() outside <SessionsProvider>');
  return context;
}
