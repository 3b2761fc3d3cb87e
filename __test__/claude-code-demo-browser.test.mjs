// The demo on the real Claude Code, in a real browser: `DEMO_AGENT=claude-code npm run demo` with no
// ANTHROPIC_API_KEY (the mock model in the server, scripted answers), its sessions in Docker
// (harness-sessions-claude-code:latest) when an engine is here, else on this host (localSandbox).
// Headless Chromium (Debian's, driven by playwright-core) asks something, has a file written after
// its approval and read back by the CLI, and runs a command. Screenshots go to
// artifacts/screenshots/claude-code-*.png.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { seedLocalBootstrap } from '../scripts/claude-code-bootstrap.mjs';
import { freePort } from './support/claude-code.mjs';
import { dockerHost, dockerProblem, removeContainers } from './support/docker.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const example = join(root, 'examples', 'next-chat');
const shots = join(root, 'artifacts', 'screenshots');
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const inDocker = dockerProblem === undefined;
/** The start of the name of this run's container, removed at the end (the demo leaves it running). */
const prefix = `hs-ccdemo-${process.pid}-`;

function ensureChromium() {
  if (existsSync(CHROMIUM)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', 'chromium']]) {
    const result = spawnSync('apt-get', args, { stdio: 'inherit', env });
    assert.equal(result.status, 0, `apt-get ${args.join(' ')} failed: run it as root, or install chromium`);
  }
}

/** `npm run demo` (built already) in the Claude Code mode; resolves once it printed its URL. */
function startDemo({ port, dataDir, log }) {
  const env = { ...process.env, PORT: String(port), DEMO_DATA_DIR: dataDir, DEMO_AGENT: 'claude-code', NEXT_TELEMETRY_DISABLED: '1' };
  delete env.ANTHROPIC_API_KEY;
  if (inDocker) Object.assign(env, { DEMO_SANDBOX: 'docker', DOCKER_HOST: dockerHost, DEMO_DOCKER_NAME_PREFIX: prefix });
  else delete env.DEMO_SANDBOX;
  const child = spawn(process.execPath, [join(root, 'scripts', 'demo.mjs'), '--no-build'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`the demo did not start in three minutes:\n${out}`));
    }, 180_000);
    child.stdout.on('data', (data) => {
      out += data;
      if (/Harness Chat is running: http:\/\/localhost:\d+/.test(out)) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the demo exited (${code}) before it started:\n${out}`));
    });
  });
}

function killGroup(child) {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {}
}

async function stopDemo(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => killGroup(child), 60_000);
  await child.exited;
  clearTimeout(timer);
}

describe(`the demo on the real Claude Code and the mock model (${inDocker ? 'dockerSandbox' : 'localSandbox'})`, { timeout: 15 * 60_000 }, () => {
  const data = mkdtempSync(join(tmpdir(), 'next-chat-cc-data-'));
  const profile = mkdtempSync(join(tmpdir(), 'next-chat-cc-chromium-'));
  mkdirSync(shots, { recursive: true });
  const log = createWriteStream(join(root, 'artifacts', 'demo-claude-code-server.log'));
  let port;
  let server;
  let context;
  let page;
  const pageErrors = [];

  const screenshot = (name) => page.screenshot({ path: join(shots, `claude-code-${name}.png`) });
  const composer = () => page.getByLabel('Message');
  const settled = () => page.locator('section.chat[data-chat-status="ready"]').waitFor({ timeout: 120_000 });
  /** Sends `text` and resolves to the assistant message that answers it (a new one). */
  async function send(text) {
    const before = await page.locator('.message-assistant').count();
    await composer().fill(text);
    await composer().press('Enter');
    const answer = page.locator('.message-assistant').nth(before);
    await answer.waitFor();
    return answer;
  }

  before(async () => {
    ensureChromium();
    const build = spawnSync(process.execPath, [join(root, 'scripts', 'demo.mjs'), '--build-only'], { cwd: root, encoding: 'utf8' });
    log.write(build.stdout + build.stderr);
    assert.equal(build.status, 0, `npm run demo --build-only failed:\n${build.stdout}\n${build.stderr}`);
    // Claude Code's bootstrap, before the demo's own start (which would prepare it too, within its
    // start timeout): the image with the bootstrap in it, or the folder on this host.
    if (inDocker) {
      const image = spawnSync('bash', ['scripts/docker/build-claude-code-image.sh'], { cwd: root, env: { ...process.env, DOCKER_HOST: dockerHost }, encoding: 'utf8' });
      assert.equal(image.status, 0, `the Claude Code image could not be built:\n${image.stderr}`);
    } else {
      await seedLocalBootstrap();
    }
    port = await freePort();
    server = await startDemo({ port, dataDir: data, log });
    const { chromium } = createRequire(join(example, 'package.json'))('playwright-core');
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS, viewport: { width: 1280, height: 800 } });
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(120_000);
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });

  after(async () => {
    await context?.close().catch(() => {});
    if (server !== undefined) await stopDemo(server);
    if (inDocker) await removeContainers(prefix);
    log.end();
    rmSync(profile, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  });

  it('answers in text through the real CLI and the mock model', async () => {
    await page.goto(`http://localhost:${port}/`);
    await page.getByText('Claude Code').first().waitFor();
    await page.getByRole('button', { name: 'New conversation' }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/c/'));
    await composer().waitFor();
    const answer = await send('Hello Claude');
    await answer.getByText(/answering through a mock model/).waitFor();
    await answer.getByText(/You said: Hello Claude\./).waitFor();
    await settled();
    await screenshot('text');
  });

  it('writes a file after its approval, and reads it back', async () => {
    const answer = await send('Write hello.txt saying hi');
    const approve = answer.getByRole('button', { name: 'Approve' });
    await approve.waitFor();
    await screenshot('approval');
    await approve.click();
    await answer.getByText('hello.txt is there, and says: hi from Claude Code', { exact: true }).waitFor();
    await settled();
    await screenshot('written');
  });

  it('runs a command after its approval', async () => {
    const answer = await send('What is in this folder?');
    const approve = answer.getByRole('button', { name: 'Approve' });
    await approve.waitFor();
    await approve.click();
    await answer.getByText(/ran: \d+ lines of output/).waitFor();
    await settled();
    // The listing the command printed has the file the previous turn wrote.
    await answer.locator('pre', { hasText: 'hello.txt' }).first().waitFor();
    await screenshot('command');
    assert.deepEqual(pageErrors, []);
  });
});
