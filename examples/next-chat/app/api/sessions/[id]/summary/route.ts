import { randomUUID } from 'node:crypto';

import { agentKind } from '@/lib/agent';
import { errorResponse } from '@/lib/http';
import { refuseOthers } from '@/lib/owner';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/** What the summary is: the JSON Schema the agent's answer is told and checked against. */
const SUMMARY_SCHEMA = {
  type: 'object',
  properties: {
    title: { type: 'string', description: 'The conversation in a few words.' },
    points: { type: 'array', items: { type: 'string' }, maxItems: 5 },
  },
  required: ['title', 'points'],
  additionalProperties: false,
};

/**
 * What the agent is asked. The scripted agent has no model: it is told to say a summary (its
 * `/say` command), and the guidance after the first line goes unsaid.
 */
function question(): string {
  if (agentKind() === 'scripted') {
    return '/say Summary: {"title": "A scripted conversation", "points": ["The scripted agent answers from what you write."]}';
  }
  return 'Summarise this conversation so far.';
}

/**
 * "Summarise as JSON": a turn that asks a structured answer (`output`); answers
 * `{ summary }` once the turn is over, or the `SessionOutputError` (422, with each validation
 * error) when the agent's answer does not match. The turn is part of the conversation.
 */
export async function POST(request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  try {
    const refused = await refuseOthers(request, id);
    if (refused !== undefined) return refused;
    // The question is the application's, not the user's words: marked hidden, the page leaves it out.
    const message = { id: `summary-${randomUUID()}`, role: 'user' as const, parts: [{ type: 'text' as const, text: question() }], metadata: { hidden: 'summary' } };
    const turn = await getSessions().send(id, {
      message,
      output: { schema: SUMMARY_SCHEMA, name: 'summary', description: 'A short summary of the conversation.' },
      abortSignal: request.signal,
    });
    // Nobody watches this turn's stream: read it to its end, then take the answer.
    await turn.stream.pipeTo(new WritableStream());
    return Response.json({ summary: await turn.output });
  } catch (error) {
    return errorResponse(error);
  }
}
