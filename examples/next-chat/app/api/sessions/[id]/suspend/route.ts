import { errorResponse } from '@/lib/http';
import { refuseOthers } from '@/lib/owner';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/** Suspends the session now, as idleness would: its next message resumes it. */
export async function POST(request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  try {
    const refused = await refuseOthers(request, id);
    if (refused !== undefined) return refused;
    return Response.json(await getSessions().suspend(id));
  } catch (error) {
    return errorResponse(error);
  }
}
