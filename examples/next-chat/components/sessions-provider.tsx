'use client';

import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';

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
}

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

  useEffect(() => {
    const source = new EventSource('/api/sessions/events');
    source.onopen = () => setLive(true);
    source.onerror = () => setLive(false);
    source.onmessage = (message) => {
      const event = JSON.parse(message.data) as FeedEvent;
      setById((current) => reduce(current, event));
    };
    return () => source.close();
  }, []);

  const apply = useCallback((session: Summary) => setById((current) => reduce(current, { type: 'updated', session })), []);
  const forget = useCallback((id: string) => setById((current) => reduce(current, { type: 'deleted', sessionId: id })), []);

  const value = useMemo<SessionsContext>(
    () => ({
      sessions: [...byId.values()].sort((a, b) => Date.parse(b.createdAt) - Date.parse(a.createdAt)),
      byId,
      live,
      apply,
      forget,
    }),
    [byId, live, apply, forget],
  );
  return <Context.Provider value={value}>{children}</Context.Provider>;
}

export function useSessions(): SessionsContext {
  const context = useContext(Context);
  if (context === null) throw new Error('useSessions() outside <SessionsProvider>');
  return context;
}
