/**
 * The session manager of this server: one per process, kept on `globalThis` so that every route
 * (each bundled on its own) and a reload of the module in development find the same one.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';

import {
  createSessionManager,
  createSqliteSessionStore,
  dockerSandbox,
  localSandbox,
  sharedSandbox,
  type NativeSandboxProvider,
  type SessionManager,
} from 'harness-sessions';

import { agentKind, CLAUDE_CODE_QUIET_ENV, getAgent } from './agent';
import { mockModelPort } from './mock-model';
import type { Metadata, ServerInfo } from './types';

export type { Metadata };

/** Where conversations (`sessions.db`) and the sandbox's folders live: `DEMO_DATA_DIR`, or `./data`. */
export function dataDir(): string {
  return path.resolve(/* turbopackIgnore: true */ process.env.DEMO_DATA_DIR ?? path.join(process.cwd(), 'data'));
}

/**
 * The ports of the shared sandbox: one per live session, for its harness's bridge (Claude Code
 * listens on it; the scripted harness does not need it). Four live sessions at once; more
 * conversations than that are kept suspended until their next message.
 */
const PORTS = [4101, 4102, 4103, 4104];

/**
 * The sandbox the sessions share: folders on this host (`localSandbox`, no isolation: for
 * development), or a Docker container (`DEMO_SANDBOX=docker`). Each is also the function that
 * opens it, the `open` of `sharedSandbox()`, which then forks it natively: a working directory
 * (`sessions/<id>`) and a port of `PORTS` per live session.
 */
function openSandbox(): NativeSandboxProvider {
  const claudeCode = agentKind() === 'claude-code';
  if (process.env.DEMO_SANDBOX === 'docker') {
    return dockerSandbox({
      // Claude Code needs Node, bash and its bootstrap: scripts/docker/build-claude-code-image.sh.
      image: process.env.DEMO_DOCKER_IMAGE ?? (claudeCode ? 'harness-sessions-claude-code:latest' : 'harness-sessions-test:busybox'),
      host: process.env.DOCKER_HOST,
      // No network: each live session's bridge on its own port of PORTS, reached from this host
      // through the container's own loopback.
      ports: PORTS,
      namePrefix: process.env.DEMO_DOCKER_NAME_PREFIX ?? 'next-chat-',
      // The only way out: Claude Code's model API (the real one with a key, else the mock model of
      // this server, on its loopback port).
      ...(claudeCode ? { env: CLAUDE_CODE_QUIET_ENV, memory: '2g', allowedHosts: modelHosts() } : {}),
    });
  }
  const root = path.join(dataDir(), 'sandbox');
  if (!claudeCode) return localSandbox({ root });
  // Claude Code on this host: node on the PATH, its own HOME (its conversations are kept under
  // $HOME/.claude/projects/<working directory>/).
  const home = path.join(dataDir(), 'home');
  mkdirSync(home, { recursive: true });
  const ca: Record<string, string> = process.env.NODE_EXTRA_CA_CERTS ? { NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS } : {};
  return localSandbox({ root, env: { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: home, ...ca, ...CLAUDE_CODE_QUIET_ENV } });
}

/** The hosts Claude Code in a container may reach: its model API's, and nothing else. */
function modelHosts(): string[] {
  if (!process.env.ANTHROPIC_API_KEY) return [`127.0.0.1:${mockModelPort()}`];
  const base = process.env.ANTHROPIC_BASE_URL;
  return [base ? new URL(base).host : 'api.anthropic.com'];
}

interface Server {
  sessions: SessionManager<Metadata>;
  info: ServerInfo;
}

function startServer(): Server {
  const dir = dataDir();
  const sessions = createSessionManager<Metadata>({
    agent: () => getAgent(),
    sandboxes: sharedSandbox({ open: openSandbox(), ports: PORTS }),
    // Conversations and, while a session is suspended, the state it resumes from: kept across
    // restarts. Resume states hold secrets (a harness bridge's token): set
    // HARNESS_SESSIONS_ENCRYPTION_KEY to encrypt them at rest.
    store: createSqliteSessionStore<Metadata>({ path: path.join(dir, 'sessions.db') }),
    // Nobody writes for ten minutes: the session is suspended, and resumed by its next message.
    idleTimeoutMs: 10 * 60_000,
    onError: (error, context) => console.error('[next-chat]', context, error),
  });
  const info: ServerInfo = {
    agent: agentKind(),
    sandbox: process.env.DEMO_SANDBOX === 'docker' ? 'docker' : 'local',
  };
  return { sessions, info };
}

const SERVER = Symbol.for('next-chat.server');
type Holder = { [SERVER]?: Server };

function server(): Server {
  const holder = globalThis as Holder;
  holder[SERVER] ??= startServer();
  return holder[SERVER];
}

/** The manager, created on first use. */
export function getSessions(): SessionManager<Metadata> {
  return server().sessions;
}

/** What the page shows of this server's setup. */
export function serverInfo(): ServerInfo {
  return server().info;
}

/**
 * Suspends every live session, cutting turns under way short, so that the next start resumes them:
 * called when the server is told to stop. Resolves at once when no manager was created.
 */
export async function shutdownSessions(): Promise<void> {
  await (globalThis as Holder)[SERVER]?.sessions.shutdown();
}

/** The title of a conversation, from its first message. */
export function titleOf(text: string): string {
  const words = text.replace(/\s+/g, ' ').trim();
  if (words === '') return 'New conversation';
  return words.length > 48 ? `${words.slice(0, 47)}…` : words;
}

const DELETED = Symbol.for('next-chat.deleted');
type DeletedHolder = { [DELETED]?: Set<string> };

/** Ids of conversations deleted since the server started: a late message cannot bring one back. */
function deletedIds(): Set<string> {
  const holder = globalThis as DeletedHolder;
  holder[DELETED] ??= new Set();
  return holder[DELETED];
}

/** Notes that `id` was deleted. */
export function markDeleted(id: string): void {
  deletedIds().add(id);
}

/** Whether `id` was deleted since the server started. */
export function isDeleted(id: string): boolean {
  return deletedIds().has(id);
}
