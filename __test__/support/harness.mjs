// The real HarnessAgent on our model-free harness, for the tests of whole flows: an agent, and
// sandboxes that give each session a fork of one fake sandbox (a folder of this host).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import { createFakeSandbox, createScriptedHarness } from '../../testing/index.mjs';

/** A `HarnessAgent` on the scripted harness; `permissionMode: 'allow-reads'` asks approvals. */
export function scriptedAgent(options = {}) {
  const harness = createScriptedHarness({
    wordDelayMs: options.wordDelayMs ?? 0,
    ...(options.bridge ? { bridge: options.bridge } : {}),
  });
  const agent = new HarnessAgent({
    harness,
    permissionMode: options.permissionMode ?? 'allow-reads',
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.toolApproval ? { toolApproval: options.toolApproval } : {}),
  });
  return { agent, harness };
}

/** Sandboxes over one fake sandbox in `root`: each session a fork with a port of its own. */
export function forkingSandboxes({ root = mkdtempSync(join(tmpdir(), 'hs-sandbox-')), ports = [4101, 4102, 4103, 4104] } = {}) {
  const sandbox = createFakeSandbox({ root, ports: [4100] });
  const free = [...ports];
  return {
    root,
    sandbox,
    capacity: ports.length,
    async acquire() {
      const port = free.shift();
      if (port === undefined) throw new Error('no port left');
      const view = await sandbox.fork({ ports: [port] });
      const release = async () => {
        if (!free.includes(port)) free.push(port);
      };
      return { sandboxSession: view, suspend: release, close: release };
    },
  };
}
