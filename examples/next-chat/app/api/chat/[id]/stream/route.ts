import { errorResponse } from '@/lib/http';
import { refuseOthers } from '@/lib/owner';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/**
 * What `useChat({ resume: true })` asks after a reload: the turn under way, from its first chunk
 * and then live (`reconnect()`), or `204` when there is none.
 */
export async function GET(request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  try {
    const refused = await refuseOthers(request, id);
    if (refused !== undefined) return refused;
    const turn = await getSessions().reconnect(id);
    return turn === undefined ? new Response(null, { status: 204 }) : turn.toUIMessageStreamResponse();
  } catch (error) {
    return errorResponse(error);
  }
}
