import { errorResponse } from '@/lib/http';
import { refuseOthers } from '@/lib/owner';
import { getSessions } from '@/lib/sessions';

export const dynamic = 'force-dynamic';

/** The tests of the session's working directory: `npm test` when it has a package.json. */
const TEST_COMMAND =
  'if [ -f package.json ]; then npm test 2>&1; else echo "No package.json here: no tests to run."; ls; fi';

/**
 * "Run tests": runs the test command in the session's sandbox with `exec()`, without the agent and
 * without a word added to the conversation; waits for a turn under way, and is cut when the
 * request is.
 */
export async function POST(request: Request, { params }: { params: Promise<{ id: string }> }) {
  const { id } = await params;
  try {
    const refused = await refuseOthers(request, id);
    if (refused !== undefined) return refused;
    const result = await getSessions().exec(id, {
      command: TEST_COMMAND,
      abortSignal: request.signal,
      maxOutputBytes: 16_384,
    });
    return Response.json(result);
  } catch (error) {
    return errorResponse(error);
  }
}
