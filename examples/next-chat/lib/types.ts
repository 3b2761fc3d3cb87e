import type { SessionEvent, SessionStatus, SessionSummary } from 'harness-sessions';

/** What the example keeps with each session. */
export interface Metadata {
  title: string;
  /** The browser that created it (lib/owner.ts): only it reaches the session. */
  owner?: string;
  /** The agent it was started with: another agent cannot carry it on. */
  agent?: ServerInfo['agent'];
}

export type Summary = SessionSummary<Metadata>;
export type { SessionStatus };

/** What the events route sends: the sessions as they stand, then every change. */
export type FeedEvent = { type: 'snapshot'; sessions: Summary[] } | SessionEvent<Metadata>;

/** What the page says of where the sessions run. */
export interface ServerInfo {
  agent: 'scripted' | 'claude-code';
  sandbox: 'local' | 'docker';
}
