import { errorResponse } from '@/lib/http';
import { ownerFor, owns, withOwnerCookie } from '@/lib/owner';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/** The caller's sessions (lib/owner.ts), without their messages, the most recently updated first. */
export async function GET(request: Request) {
  const { owner, setCookie } = ownerFor(request);
  try {
    const mine = (await getSessions().list()).filter((session) => owns(owner, session.metadata));
    return withOwnerCookie(Response.json(mine), setCookie);
  } catch (error) {
    return errorResponse(error);
  }
}
