/**
 * Readiness: `npm run demo` gives this server a random instance id (DEMO_INSTANCE_ID) and waits
 * until this route answers it, so that another server on the same port cannot pass for this one.
 */
export const dynamic = 'force-dynamic';

export function GET() {
  return Response.json({ ok: true, instance: process.env.DEMO_INSTANCE_ID ?? null }, { headers: { 'cache-control': 'no-store' } });
}
