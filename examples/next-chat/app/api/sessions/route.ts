import { errorResponse } from '@/lib/http';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/** Every session, without its messages, the most recently updated first. */
export async function GET() {
  try {
    return Response.json(await getSessions().list());
  } catch (error) {
    return errorResponse(error);
  }
}
