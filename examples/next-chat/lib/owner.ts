/**
 * Who owns a conversation: each browser gets an owner id in a signed cookie, kept in the metadata
 * of the sessions it creates, and every route refuses (403) a session of another owner. This is
 * where an application puts its own authentication: `ownerOf()` would return the signed-in user.
 *
 * The cookie is `<id>.<HMAC-SHA256 of the id>`, httpOnly, SameSite=Lax. Its key is
 * `DEMO_OWNER_SECRET`, else a random one kept in the data folder (`owner-secret`, mode 0600), so
 * that a browser keeps its conversations across restarts of the server.
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { dataDir, getSessions } from './sessions';

/** The cookie's name. */
export const OWNER_COOKIE = 'next-chat-owner';

let key: Buffer | undefined;
function secret(): Buffer {
  if (key !== undefined) return key;
  if (process.env.DEMO_OWNER_SECRET) {
    key = Buffer.from(process.env.DEMO_OWNER_SECRET, 'utf8');
    return key;
  }
  const file = path.join(dataDir(), 'owner-secret');
  try {
    key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  } catch {
    mkdirSync(dataDir(), { recursive: true, mode: 0o700 });
    const fresh = randomBytes(32).toString('hex');
    try {
      writeFileSync(file, fresh, { mode: 0o600, flag: 'wx' });
    } catch {
      // Written by another request meanwhile: read that one.
    }
    key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
  }
  return key;
}

function sign(id: string): string {
  return createHmac('sha256', secret()).update(id).digest('base64url');
}

/** The owner id a cookie value carries, when its signature holds. */
export function verifyOwner(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const dot = value.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const id = value.slice(0, dot);
  const given = Buffer.from(value.slice(dot + 1));
  const expected = Buffer.from(sign(id));
  return given.length === expected.length && timingSafeEqual(given, expected) ? id : undefined;
}

/** The value of the cookie `name` in a request's Cookie header. */
function cookie(request: Request, name: string): string | undefined {
  for (const part of (request.headers.get('cookie') ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

/** The owner of a request, or `undefined` when it carries no valid cookie. */
export function ownerOf(request: Request): string | undefined {
  return verifyOwner(cookie(request, OWNER_COOKIE));
}

/**
 * The owner of a request, a new one when it has none: `setCookie` is then the header that gives
 * it to the browser (see `withOwnerCookie`).
 */
export function ownerFor(request: Request): { owner: string; setCookie?: string } {
  const owner = ownerOf(request);
  if (owner !== undefined) return { owner };
  const fresh = randomUUID();
  const value = encodeURIComponent(`${fresh}.${sign(fresh)}`);
  return { owner: fresh, setCookie: `${OWNER_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=31536000` };
}

/** `response` with the owner's cookie, when one was made for this request. */
export function withOwnerCookie(response: Response, setCookie: string | undefined): Response {
  if (setCookie === undefined) return response;
  const headers = new Headers(response.headers);
  headers.append('set-cookie', setCookie);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

/** Whether `owner` owns a session with these metadata (a session made before owners: nobody). */
export function owns(owner: string | undefined, metadata: { owner?: string } | undefined): boolean {
  return owner !== undefined && metadata?.owner === owner;
}

/** The answer to a request for another owner's session. */
export function notYours(): Response {
  return Response.json({ error: 'This conversation belongs to someone else.', code: 'FORBIDDEN' }, { status: 403 });
}

/**
 * Refuses a request for a session of another owner: `undefined` when the session is the caller's
 * (or does not exist: the route then says what it says of a missing session), else the 403.
 */
export async function refuseOthers(request: Request, id: string): Promise<Response | undefined> {
  const session = await getSessions().get(id);
  if (session === undefined || owns(ownerOf(request), session.metadata)) return undefined;
  return notYours();
}
