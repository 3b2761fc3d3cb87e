// The sandbox file API's typed errors (issue 25, item 9): a symbol or a BigInt given as
// `startLine`, `endLine` or `encoding` is a `SessionInputError` naming it, not a raw `TypeError`.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { localSandbox, SessionInputError } from '../index.js';

const root = mkdtempSync(join(tmpdir(), 'hs-file-args-'));
after(() => rmSync(root, { recursive: true, force: true }));

test('a symbol or a BigInt as startLine, endLine or encoding is a SessionInputError', async () => {
  const sandboxes = localSandbox({ root });
  const session = await sandboxes.createSession({ sessionId: 'file-args' });
  try {
    await session.writeTextFile({ path: 'lines.txt', content: 'a\nb\n' });
    const cases = [
      ['readTextFile', { startLine: Symbol('x') }, 'startLine'],
      ['readTextFile', { startLine: 1n }, 'startLine'],
      ['readTextFile', { endLine: Symbol('x') }, 'endLine'],
      ['readTextFile', { endLine: 2n }, 'endLine'],
      ['readTextFile', { encoding: Symbol('x') }, 'encoding'],
      ['readTextFile', { encoding: 8n }, 'encoding'],
      ['writeTextFile', { content: 'x', encoding: Symbol('x') }, 'encoding'],
      ['writeTextFile', { content: 'x', encoding: 8n }, 'encoding'],
    ];
    for (const [method, options, path] of cases) {
      await assert.rejects(session[method]({ path: 'lines.txt', ...options }), (error) => {
        assert.ok(SessionInputError.isInstance(error), `${method} ${path}: ${error}`);
        assert.equal(error.path, path);
        return true;
      });
    }
    // What was right stays right.
    assert.equal(await session.readTextFile({ path: 'lines.txt', startLine: 2 }), 'b\n');
  } finally {
    await session.destroy();
  }
});
