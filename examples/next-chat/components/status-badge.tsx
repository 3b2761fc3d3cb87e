import type { SessionStatus } from '@/lib/types';

/** What each status is called in the page, and its colour. */
const LABELS: Record<SessionStatus, { label: string; tone: string }> = {
  preparing: { label: 'Starting', tone: 'working' },
  idle: { label: 'Ready', tone: 'ready' },
  busy: { label: 'Working', tone: 'working' },
  'awaiting-input': { label: 'Needs you', tone: 'attention' },
  suspended: { label: 'Suspended', tone: 'muted' },
  closed: { label: 'Closed', tone: 'muted' },
  failed: { label: 'Failed', tone: 'danger' },
  interrupted: { label: 'Interrupted', tone: 'danger' },
};

export function StatusBadge({ status }: { status: SessionStatus }) {
  const { label, tone } = LABELS[status] ?? { label: status, tone: 'muted' };
  return (
    <span className={`badge badge-${tone}`} data-status={status}>
      <span className="badge-dot" aria-hidden />
      {label}
    </span>
  );
}
