'use client';

import { useRouter } from 'next/navigation';

import { newId } from '@/lib/ids';

export function NewConversationButton() {
  const router = useRouter();
  return (
    <button type="button" className="button button-primary button-large" onClick={() => router.push(`/c/${newId()}`)}>
      Start a conversation
    </button>
  );
}
