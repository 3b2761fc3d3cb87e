import { errorResponse } from '@/lib/http';
import { refuseOthers } from '@/lib/owner';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/** The Stop button: cuts the turn under way short (`interrupt()`); its readers see it end, cut. */
export async function POST(request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  try {
    const refused = await refuseOthers(request, id);
    if (refused !== undefined) return refused;
    await getSessions().interrupt(id);
    return new Response(null, { status: 204 });
  } catch (error) {
    return errorResponse(error);
  }
}
