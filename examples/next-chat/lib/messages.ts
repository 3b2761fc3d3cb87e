import type { UIMessage } from 'ai';

/** The text of a message's text parts. */
export function textOf(message: UIMessage): string {
  return message.parts
    .map((part) => (part.type === 'text' ? part.text : ''))
    .join(' ')
    .trim();
}
