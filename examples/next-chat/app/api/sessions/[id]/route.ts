import { errorResponse } from '@/lib/http';
import { notYours, ownerOf, owns } from '@/lib/owner';
import { getSessions, markDeleted } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

type Context = { params: Promise<{ id: string }> };

/** A session with its conversation, as `useChat({ messages })` takes it. */
export async function GET(request: Request, { params }: Context) {
  const { id } = await params;
  try {
    const session = await getSessions().get(id);
    if (session === undefined) {
      return Response.json({ error: `No session ${id}.`, code: 'SESSION_NOT_FOUND' }, { status: 404 });
    }
    if (!owns(ownerOf(request), session.metadata)) return notYours();
    return Response.json(session);
  } catch (error) {
    return errorResponse(error);
  }
}

/** Closes the session, then forgets it. */
export async function DELETE(request: Request, { params }: Context) {
  const { id } = await params;
  try {
    const session = await getSessions().get(id);
    if (session !== undefined && !owns(ownerOf(request), session.metadata)) return notYours();
    await getSessions().delete(id);
    markDeleted(id);
    return new Response(null, { status: 204 });
  } catch (error) {
    return errorResponse(error);
  }
}
