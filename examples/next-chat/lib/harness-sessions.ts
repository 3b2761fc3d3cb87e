/**
 * `harness-sessions`, loaded by Node at run time rather than bundled.
 *
 * With the package installed from the registry, `import { createSessionManager } from
 * 'harness-sessions'` is all it takes: `serverExternalPackages` (next.config.ts) keeps it out of the
 * bundle, and Node loads it with its native addon. This example links the package from the
 * repository instead (`"harness-sessions": "file:../.."`): a symbolic link whose target is outside
 * node_modules, which Next.js 16 does not externalize (Turbopack and webpack both decide on the
 * resolved path, and would bundle the package, then fail on its `.node` file). So the package is
 * required here through Node's module loader, out of the bundler's sight, from this app's
 * node_modules; the rest of the example imports it from this module, and its types from the
 * package as usual.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import type * as Package from 'harness-sessions';

type Testing = typeof import('harness-sessions/testing');

/** Node's `require`, from this app's folder (Next.js runs with it as the working directory). */
function appRequire(): NodeJS.Require {
  const { createRequire } = process.getBuiltinModule('node:module') as typeof import('node:module');
  return createRequire(path.join(/* turbopackIgnore: true */ process.cwd(), 'package.json'));
}

const nodeRequire = appRequire();

export const harnessSessions = nodeRequire('harness-sessions') as typeof Package;

export const { createSessionManager, createSqliteSessionStore, sharedSandbox, localSandbox, dockerSandbox, SessionError } =
  harnessSessions;

/** `harness-sessions/testing` (ECMAScript modules): the scripted harness. */
export function loadTesting(): Promise<Testing> {
  const url = pathToFileURL(nodeRequire.resolve('harness-sessions/testing')).href;
  return import(/* webpackIgnore: true */ /* turbopackIgnore: true */ url);
}
