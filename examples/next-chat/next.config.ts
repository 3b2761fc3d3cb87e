import type { NextConfig } from 'next';

const nextConfig: NextConfig = {
  // Loaded by Node, never bundled: harness-sessions loads a native addon (a `.node` file), and the
  // Claude Code harness reads its bridge from its own folder.
  serverExternalPackages: ['harness-sessions', '@ai-sdk/harness-claude-code'],
  // This folder, not the repository's root that holds another package-lock.json.
  turbopack: { root: __dirname },
  outputFileTracingRoot: __dirname,
};

export default nextConfig;
