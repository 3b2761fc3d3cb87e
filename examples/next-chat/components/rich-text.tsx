import { Fragment } from 'react';

/** Text with its `inline code` set in monospace; line breaks kept by the CSS. */
export function RichText({ text }: { text: string }) {
  const pieces = text.split(/(`[^`\n]+`)/g);
  return (
    <>
      {pieces.map((piece, index) =>
        piece.length > 2 && piece.startsWith('`') && piece.endsWith('`') ? (
          <code key={index}>{piece.slice(1, -1)}</code>
        ) : (
          <Fragment key={index}>{piece}</Fragment>
        ),
      )}
    </>
  );
}
