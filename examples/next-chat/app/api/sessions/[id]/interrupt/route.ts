import { errorResponse } from '@/lib/http';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/** The Stop button: cuts the turn under way short (`interrupt()`); its readers see it end, cut. */
export async function POST(_request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  try {
    await getSessions().interrupt(id);
    return new Response(null, { status: 204 });
  } catch (error) {
    return errorResponse(error);
  }
}
