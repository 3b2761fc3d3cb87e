// The reference, `ai-sdk-harness-sessions` 0.2.0, for tests that run the same case on it and on
// this package. It is not on the npm registry: `../shared/reference/` holds it compiled from its
// source (see its README), and it is copied under the git-ignored `.cache/reference/`, where its
// bare imports (`ai`, `@ai-sdk/harness`) resolve from this project's `node_modules`. Its code is
// only run, never copied into the repository. Where it is missing (CI), `reference` is
// `undefined` and the cases run on this package only, saying so.
import { cpSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as ours from '../../index.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
// `../shared/reference/` of the repository's checkout (or of the folder holding its worktrees).
const shared = ['..', join('..', '..')].map((up) => join(root, up, 'shared', 'reference', 'ai-sdk-harness-sessions-0.2.0'));
const copy = join(root, '.cache', 'reference');

async function loadReference() {
  const candidates = [process.env.HARNESS_SESSIONS_REFERENCE, ...shared].filter(Boolean);
  if (!existsSync(join(copy, 'dist', 'index.js'))) {
    const from = candidates.find((candidate) => existsSync(join(candidate, 'dist', 'index.js')));
    if (from === undefined) return undefined;
    cpSync(from, copy, { recursive: true });
  }
  return import(pathToFileURL(join(copy, 'dist', 'index.js')).href);
}

/** The reference's exports, or `undefined` when it is not on this machine. */
export const reference = await loadReference();

/** The packages a side-by-side case runs on: this one, then the reference when it is here. */
export const packages = [{ name: 'harness-sessions', api: ours }, ...(reference ? [{ name: 'reference', api: reference }] : [])];

/** Said once by a file whose cases could not run on the reference. */
export const referenceNote = reference
  ? 'each case runs on harness-sessions and on the reference'
  : 'the reference is not on this machine (../shared/reference): each case runs on harness-sessions only';
