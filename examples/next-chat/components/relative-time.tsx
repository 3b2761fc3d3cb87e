'use client';

import { useEffect, useState } from 'react';

function describe(ms: number, now: number): string {
  const seconds = Math.max(0, Math.round((now - ms) / 1000));
  if (seconds < 45) return 'just now';
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  if (hours < 24) return `${hours} h ago`;
  return new Date(ms).toLocaleDateString();
}

/** "just now", "3 min ago"…, kept up to date. */
export function RelativeTime({ ms }: { ms: number }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 30_000);
    return () => clearInterval(timer);
  }, []);
  return (
    <time dateTime={new Date(ms).toISOString()} suppressHydrationWarning>
      {describe(ms, Math.max(now, ms))}
    </time>
  );
}
