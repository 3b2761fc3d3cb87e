import { errorResponse } from '@/lib/http';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/**
 * What `useChat({ resume: true })` asks after a reload: the turn under way, from its first chunk
 * and then live (`reconnect()`), or `204` when there is none.
 */
export async function GET(_request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  try {
    const turn = await getSessions().reconnect(id);
    return turn === undefined ? new Response(null, { status: 204 }) : turn.toUIMessageStreamResponse();
  } catch (error) {
    return errorResponse(error);
  }
}
