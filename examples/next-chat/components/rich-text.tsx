'use client';

import { Streamdown } from 'streamdown';

/**
 * An answer's text as markdown, rendered as it streams: `streamdown` (made for AI answers that
 * arrive a few words at a time: an open code fence or a half-written list renders as it will end),
 * with code blocks that have a copy button. Links and images are hardened by streamdown; raw HTML
 * in the text is not rendered.
 */
export function RichText({ text, streaming = false }: { text: string; streaming?: boolean }) {
  return (
    <Streamdown
      className="markdown"
      mode={streaming ? 'streaming' : 'static'}
      isAnimating={streaming}
      controls={{ code: { copy: true, download: false }, table: { copy: true, download: false, fullscreen: false }, mermaid: false }}
    >
      {text}
    </Streamdown>
  );
}
