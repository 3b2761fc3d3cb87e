import type { NextConfig } from 'next';

const nextConfig: NextConfig = {
  // Loaded by Node, never bundled: harness-sessions loads a native addon (a `.node` file), and the
  // Claude Code harness reads its bridge from its own folder.
  //
  // This takes effect for a package installed in node_modules, from the registry. Here the package
  // is linked from the repository (`"file:../.."`, a symbolic link out of node_modules), and
  // Next.js externalizes only what resolves inside a node_modules folder, with Turbopack and
  // webpack alike: lib/harness-sessions.ts therefore loads it through Node's own `require`.
  serverExternalPackages: ['harness-sessions', '@ai-sdk/harness-claude-code'],
  // This folder, not the repository's root that holds another package-lock.json.
  turbopack: { root: __dirname },
  outputFileTracingRoot: __dirname,
};

export default nextConfig;
