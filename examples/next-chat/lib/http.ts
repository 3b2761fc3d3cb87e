import { SessionError, SessionOutputError } from 'harness-sessions';

/**
 * The response for an error of a route: the package's errors carry their HTTP status
 * (`SessionNotFoundError` 404, `SessionConflictError` 409, `SessionCapacityError` 503,
 * `SessionInputError` 400, `SessionOutputError` 422 with its validation errors); anything else is
 * a 500 whose details stay in the server's log.
 */
export function errorResponse(error: unknown): Response {
  if (SessionOutputError.isInstance(error)) {
    return Response.json({ error: error.message, code: error.code, errors: error.errors }, { status: error.statusCode });
  }
  if (SessionError.isInstance(error)) {
    return Response.json({ error: error.message, code: error.code }, { status: error.statusCode });
  }
  console.error('[next-chat]', error);
  return Response.json({ error: 'Something went wrong on the server.' }, { status: 500 });
}

/** A 400 for a request this API cannot read. */
export function badRequest(message: string): Response {
  return Response.json({ error: message, code: 'BAD_REQUEST' }, { status: 400 });
}
