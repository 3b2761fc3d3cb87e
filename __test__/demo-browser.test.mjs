// The Next.js example in a real browser: `npm run demo` builds and starts it on a free port with a
// fresh data folder, and headless Chromium (Debian's, driven by playwright-core) uses it as a
// person would — a conversation streaming in, a write approved and read back, a command denied, a
// second conversation answering while the first works, one suspended and brought back by a
// message, the server restarted and the conversations found again, one deleted. A screenshot of
// each step goes to artifacts/screenshots/.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const example = join(root, 'examples', 'next-chat');
const shots = join(root, 'artifacts', 'screenshots');
const CHROMIUM = '/usr/bin/chromium';
// machine.md: Debian's Chromium, headless, with a fresh profile.
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const seconds = (since) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

/** Installs Debian's Chromium when it is missing: it is only needed by this test. */
function ensureChromium() {
  if (existsSync(CHROMIUM)) return;
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', 'chromium']]) {
    const result = spawnSync('apt-get', args, { stdio: 'inherit', env });
    assert.equal(result.status, 0, `apt-get ${args.join(' ')} failed: run it as root, or install chromium`);
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** `npm run demo` (built already) on `port` with `dataDir`; resolves once it printed its URL. */
function startDemo({ port, dataDir, log }) {
  const child = spawn(process.execPath, [join(root, 'scripts', 'demo.mjs'), '--no-build'], {
    cwd: root,
    env: { ...process.env, PORT: String(port), DEMO_DATA_DIR: dataDir, DEMO_WORD_DELAY_MS: '60', NEXT_TELEMETRY_DISABLED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: the demo and its Next.js server can be killed together.
    detached: true,
  });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  child.output = '';
  child.stderr.on('data', (data) => (child.output += data));
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`the demo did not start in a minute:\n${out}`));
    }, 60_000);
    child.stdout.on('data', (data) => {
      out += data;
      child.output += data;
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

/** Kills the demo and the Next.js server it started. */
function killGroup(child) {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {}
}

/** SIGTERM, as a process manager would; resolves with how it exited and how long it took. */
async function stopDemo(child) {
  if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, ms: 0 };
  const since = Date.now();
  child.kill('SIGTERM');
  const timer = setTimeout(() => killGroup(child), 30_000);
  const { code, signal } = await child.exited;
  clearTimeout(timer);
  return { code, signal, ms: Date.now() - since };
}

describe('the Next.js example in a browser', { timeout: 10 * 60_000 }, () => {
  const data = mkdtempSync(join(tmpdir(), 'next-chat-data-'));
  const profile = mkdtempSync(join(tmpdir(), 'next-chat-chromium-'));
  mkdirSync(shots, { recursive: true });
  const log = createWriteStream(join(root, 'artifacts', 'demo-server.log'));
  let port;
  let server;
  let context;
  let page;
  let shot = 0;
  /** The first conversation's page. */
  let firstUrl;
  const timings = {};
  const pageErrors = [];

  const screenshot = async (name) => page.screenshot({ path: join(shots, `${String(++shot).padStart(2, '0')}-${name}.png`) });
  const composer = () => page.getByLabel('Message');
  const chat = () => page.locator('section.chat');
  const assistant = () => page.locator('.message-assistant').last();
  const item = (title) => page.locator('.session-link', { hasText: title });
  const status = (locator) => locator.locator('.badge').first().getAttribute('data-status');

  async function send(text) {
    await composer().fill(text);
    await composer().press('Enter');
  }

  /** Waits until the chat is done streaming (the last request answered). */
  async function settled() {
    await page.locator('section.chat[data-chat-status="ready"]').waitFor({ timeout: 20_000 });
  }

  async function expectStatus(locator, expected, timeout = 15_000) {
    const since = Date.now();
    for (;;) {
      const actual = await status(locator).catch(() => undefined);
      if (actual === expected) return;
      if (Date.now() - since > timeout) assert.fail(`status ${actual}, expected ${expected}`);
      await page.waitForTimeout(50);
    }
  }

  /** Opens the conversation `title` from the list, and waits for its page. */
  async function open(title) {
    const href = await item(title).getAttribute('href');
    await item(title).click();
    await page.waitForURL(`http://localhost:${port}${href}`);
    await page.locator(`section.chat[data-chat-id="${href.slice('/c/'.length)}"]`).waitFor();
  }

  async function newConversation() {
    const before = page.url();
    await page.getByRole('button', { name: 'New conversation' }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/c/') && url.href !== before);
    await composer().waitFor();
  }

  before(async () => {
    let since = Date.now();
    ensureChromium();
    timings.chromium = seconds(since);

    since = Date.now();
    const build = spawnSync(process.execPath, [join(root, 'scripts', 'demo.mjs'), '--build-only'], { cwd: root, encoding: 'utf8' });
    log.write(build.stdout + build.stderr);
    assert.equal(build.status, 0, `npm run demo --build-only failed:\n${build.stdout}\n${build.stderr}`);
    timings.build = seconds(since);

    since = Date.now();
    port = await freePort();
    server = await startDemo({ port, dataDir: data, log });
    timings.start = seconds(since);

    const { chromium } = createRequire(join(example, 'package.json'))('playwright-core');
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1280, height: 800 },
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });

  after(async () => {
    await context?.close().catch(() => {});
    if (server !== undefined) await stopDemo(server);
    log.end();
    rmSync(profile, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
    console.log(`# timings: ${JSON.stringify(timings)}`);
  });

  it('starts a conversation and streams the answer in', async () => {
    await page.goto(`http://localhost:${port}/`);
    await page.getByRole('heading', { name: 'Conversations that wait for you' }).waitFor();
    await screenshot('home');
    await newConversation();
    firstUrl = page.url();
    await screenshot('new-conversation');

    // Every text the answer goes through, as the page shows it.
    await page.evaluate(() => {
      window.__texts = [];
      new MutationObserver(() => {
        const texts = [...document.querySelectorAll('.message-assistant .assistant-text')].map((node) => node.textContent);
        const last = texts.at(-1);
        if (last !== undefined && window.__texts.at(-1) !== last) window.__texts.push(last);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    const words = 'hello agent, please tell me how sessions wait for the people who use them';
    await send(words);
    await page.locator('section.chat[data-chat-status="streaming"]').waitFor();
    await screenshot('streaming');
    await settled();
    await assistant().getByText(`You said: ${words}`).waitFor();
    const texts = await page.evaluate(() => window.__texts);
    assert.ok(texts.length >= 4, `the answer came in ${texts.length} pieces: ${JSON.stringify(texts)}`);
    assert.ok(texts[0].length < texts.at(-1).length);
    await expectStatus(item(words.slice(0, 20)), 'idle');
  });

  it('approves a write, then reads the file back', async () => {
    await send('write hello.txt: hi');
    const card = page.locator('.tool-card[data-tool="write"]').last();
    await card.getByRole('button', { name: 'Approve' }).waitFor();
    assert.equal(await card.getAttribute('data-state'), 'approval-requested');
    await expectStatus(page.locator('.chat-header'), 'awaiting-input');
    await expectStatus(item('hello agent'), 'awaiting-input');
    await screenshot('approval');
    await card.getByRole('button', { name: 'Approve' }).click();
    await assistant().getByText('I wrote hello.txt.').waitFor();
    await settled();
    assert.equal(await card.getAttribute('data-state'), 'output-available');
    await expectStatus(page.locator('.chat-header'), 'idle');

    await send('read hello.txt');
    await assistant().getByText('hello.txt says: hi').waitFor();
    await settled();
    assert.equal(await page.locator('.tool-card[data-tool="read"] .tool-pre').last().textContent(), 'hi');
    await screenshot('approved-and-read');
  });

  it('denies a command', async () => {
    await send('run touch denied.txt');
    const card = page.locator('.tool-card[data-tool="bash"]').last();
    await card.getByRole('button', { name: 'Deny' }).waitFor();
    await card.getByRole('button', { name: 'Deny' }).click();
    // The code span is set in monospace: `touch denied.txt` loses its backquotes.
    await assistant().getByText('Running touch denied.txt was denied (Denied in the chat.).').waitFor();
    // Shown as a denial, not as a failure.
    const denied = page.locator('.tool-card[data-denied="true"]').last();
    await denied.locator('.tool-state').getByText('Denied', { exact: true }).waitFor();
    await denied.getByText('You denied this: it did not run.').waitFor();
    await settled();
    assert.equal(await card.locator('.tool-state').textContent(), 'Denied');
    await expectStatus(page.locator('.chat-header'), 'idle');
    await screenshot('denied');
    // Denied, so never run: the folder has no such file.
    await send('list files');
    await assistant().getByText('Files in the working directory: hello.txt').waitFor();
    await settled();
  });

  it('answers in a second conversation while the first works, and waits in a third', async () => {
    await send('/sleep 8000');
    await expectStatus(item('hello agent'), 'busy');
    await newConversation();
    await send('hi from the second conversation');
    await assistant().getByText('You said: hi from the second conversation').waitFor();
    await settled();
    // The first one still works: switching conversations did not cut its turn short.
    await expectStatus(item('hello agent'), 'busy');
    await expectStatus(item('hi from the second'), 'idle');
    await screenshot('two-at-once');

    await newConversation();
    await send('run echo kept across restarts');
    await page.getByRole('button', { name: 'Approve' }).waitFor();
    await expectStatus(item('run echo kept'), 'awaiting-input');
    await expectStatus(item('hello agent'), 'busy');
    await page.locator('.count-attention').getByText('1 need you').waitFor();
    await screenshot('three-conversations');

    await expectStatus(item('hello agent'), 'idle', 20_000);
    await open('hello agent');
    assert.equal(page.url(), firstUrl);
    await assistant().getByText('I slept for 8000 ms.').waitFor();
    await screenshot('first-finished');
  });

  it('suspends a conversation and brings it back with a message', async () => {
    await open('hi from the second');
    await page.getByRole('button', { name: 'Suspend now' }).click();
    await expectStatus(page.locator('.chat-header'), 'suspended');
    await expectStatus(item('hi from the second'), 'suspended');
    await page.getByText('Your next message picks it up where it left off.', { exact: false }).waitFor();
    await screenshot('suspended');
    await send('what did I say?');
    await assistant().getByText('Before this, you said: "hi from the second conversation"').waitFor();
    await settled();
    await expectStatus(item('hi from the second'), 'idle');
    await screenshot('resumed');
  });

  it('finds the conversations again after a restart of the server', async () => {
    const stopped = await stopDemo(server);
    timings.shutdown = `${(stopped.ms / 1000).toFixed(1)} s`;
    assert.equal(stopped.code, 0, `the server exited with ${stopped.code ?? stopped.signal}:\n${server.output}`);
    assert.match(server.output, /sessions suspended/);

    const since = Date.now();
    server = await startDemo({ port, dataDir: data, log });
    timings.restart = seconds(since);
    await page.goto(`http://localhost:${port}/`);
    // shutdown() suspended all three: the next message, or the answer, resumes each.
    await expectStatus(item('hello agent'), 'suspended');
    await expectStatus(item('hi from the second'), 'suspended');
    await expectStatus(item('run echo kept'), 'suspended');
    await open('hello agent');
    assert.equal(page.url(), firstUrl);
    await assistant().getByText('slept', { exact: false }).waitFor();
    assert.equal(await page.locator('.message-user').count(), 6);
    await screenshot('after-restart');

    await send('read hello.txt');
    await assistant().getByText('hello.txt says: hi').waitFor();
    await settled();
    await expectStatus(item('hello agent'), 'idle');
    await screenshot('resumed-after-restart');

    // The approval asked before the restart is still there; answering it resumes the session.
    await open('run echo kept');
    const card = page.locator('.tool-card[data-tool="bash"]').last();
    await card.getByRole('button', { name: 'Approve' }).click();
    await assistant().getByText('exited with 0: kept across restarts', { exact: false }).waitFor();
    await settled();
    // The card answered before the restart says it was replaced by the run after it: one "Done".
    await page.locator('.tool-card[data-superseded="true"] .tool-state').getByText('Replaced', { exact: true }).waitFor();
    assert.equal(await page.locator('.tool-card[data-tool="bash"] .tool-state', { hasText: 'Done' }).count(), 1);
    await expectStatus(item('run echo kept'), 'idle');
    await screenshot('approved-after-restart');
  });

  it('deletes a conversation', async () => {
    await open('hi from the second');
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('button', { name: 'Delete for good?' }).click();
    await page.waitForURL(`http://localhost:${port}/`);
    await item('hi from the second').waitFor({ state: 'detached' });
    assert.equal(await page.locator('.session-link').count(), 2);
    // The page's own requests carry its owner cookie: the browser context's request does too.
    const response = await page.request.get(`http://localhost:${port}/api/sessions`);
    const left = (await response.json()).map((session) => session.metadata.title).sort();
    assert.equal(left.length, 2);
    assert.match(left[0], /^hello agent, please tell me/);
    assert.equal(left[1], 'run echo kept across restarts');
    await screenshot('deleted');
  });

  it("refuses another owner's requests for a conversation (403), and lists none of them", async () => {
    const mine = (await (await page.request.get(`http://localhost:${port}/api/sessions`)).json()).map((session) => session.id);
    assert.ok(mine.length > 0);
    const id = mine[0];
    // Another caller: no cookie, then a forged one.
    for (const headers of [{}, { cookie: `next-chat-owner=${'0'.repeat(36)}.forged` }]) {
      const get = (path, init = {}) => fetch(`http://127.0.0.1:${port}${path}`, { ...init, headers: { ...headers, ...init.headers } });
      assert.deepEqual(await (await get('/api/sessions')).json(), []);
      assert.equal((await get(`/api/sessions/${id}`)).status, 403);
      assert.equal((await get(`/api/chat/${id}/stream`)).status, 403);
      assert.equal((await get(`/api/sessions/${id}/interrupt`, { method: 'POST' })).status, 403);
      assert.equal((await get(`/api/sessions/${id}/suspend`, { method: 'POST' })).status, 403);
      assert.equal((await get(`/api/sessions/${id}`, { method: 'DELETE' })).status, 403);
      const post = await get('/api/chat', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id, messages: [{ id: 'intruder', role: 'user', parts: [{ type: 'text', text: 'not mine' }] }] }),
      });
      assert.equal(post.status, 403);
    }
    // Still the owner's, untouched.
    const session = await (await page.request.get(`http://localhost:${port}/api/sessions/${id}`)).json();
    assert.ok(!JSON.stringify(session.messages).includes('not mine'));
  });

  it('marks a conversation interrupted when the server crashed during its turn', async () => {
    await open('hello agent');
    await send('/sleep 30000');
    await expectStatus(item('hello agent'), 'busy');
    killGroup(server);
    await server.exited;
    server = await startDemo({ port, dataDir: data, log });
    await page.goto(firstUrl);
    await expectStatus(item('hello agent'), 'interrupted');
    await expectStatus(page.locator('.chat-header'), 'interrupted');
    await page.getByText('it can be read, not continued', { exact: false }).waitFor();
    assert.equal(await composer().isEnabled(), true);
    assert.equal(await page.getByRole('button', { name: 'Send' }).isDisabled(), true);
    await screenshot('interrupted');
    assert.deepEqual(pageErrors, []);
  });

  it('reloads in the middle of a long answer and sees it continue to its end, without a gap or a repeat', async () => {
    await newConversation();
    const words = Array.from({ length: 80 }, (_, i) => `word${i}`).join(' ');
    const answer = `You said: ${words}`;
    await send(words);
    await assistant().getByText('word10', { exact: false }).waitFor({ timeout: 20_000 });
    const before = await assistant().locator('.assistant-text').textContent();
    assert.ok(!before.includes('word79'), 'the answer was still coming when the page reloaded');
    await page.reload();
    await page.locator('section.chat').waitFor();
    // The answer goes on from where the first page was, then ends: the whole text, once.
    await assistant().locator('.assistant-text').getByText(answer, { exact: true }).waitFor({ timeout: 30_000 });
    await settled();
    assert.equal(await page.locator('.message-assistant').count(), 1);
    assert.equal(await assistant().locator('.assistant-text').count(), 1);
    assert.equal(await assistant().locator('.assistant-text').textContent(), answer);
    await expectStatus(page.locator('.chat-header'), 'idle');
    await screenshot('reloaded-and-continued');
    // The server kept the same answer.
    await page.reload();
    await assistant().locator('.assistant-text').getByText(answer, { exact: true }).waitFor();
    assert.equal(await page.locator('.message-assistant').count(), 1);
  });

  it('stops an answer: the server cuts the turn, the answer shows it was cut short', async () => {
    await send('/sleep 20000');
    await expectStatus(page.locator('.chat-header'), 'busy');
    await page.getByRole('button', { name: 'Stop' }).click();
    await assistant().locator('.cut-mark').getByText('You stopped the answer.', { exact: true }).waitFor({ timeout: 20_000 });
    await settled();
    await expectStatus(page.locator('.chat-header'), 'idle');
    await screenshot('cut-short');
    // Stored so: a reload shows the mark again.
    await page.reload();
    await assistant().locator('.cut-mark').waitFor();
    assert.deepEqual(pageErrors, []);
  });
  it('is a chat people copy: Send safe under a double click, panels dismissed, no borrowed words, live regions, AA contrast light and dark, 360 px to desktop, deleted not writable', async () => {
    await newConversation();
    // A double click on Send: the second click lands beside Stop, never on it.
    await composer().fill('/sleep 1500');
    await page.getByRole('button', { name: 'Send' }).dblclick();
    await settled();
    assert.equal(await assistant().locator('.cut-mark').count(), 0, 'the answer was not stopped');
    await assistant().getByText('I slept for 1500 ms.').waitFor();
    // Screen readers hear the answer once it is complete.
    await page.locator('[data-live="answer"]').getByText('The agent answered', { exact: false }).waitFor();
    assert.equal(await page.locator('[data-live="needs-you"]').count(), 1);

    // The test run: "no tests", said so, and dismissed.
    await page.getByRole('button', { name: 'Run tests' }).click();
    await page.locator('[data-test-run] strong').getByText('No tests to run: this folder has no package.json.', { exact: true }).waitFor();
    await page.getByRole('button', { name: 'Dismiss the test run' }).click();
    await page.locator('[data-test-run]').waitFor({ state: 'detached' });
    // The summary: the application's question is not shown as the user's words.
    const userBubbles = await page.locator('.message-user').count();
    await page.getByRole('button', { name: 'Summarise as JSON' }).click();
    await page.locator('[data-summary]').waitFor({ timeout: 20_000 });
    assert.equal(await page.locator('.message-user').count(), userBubbles);
    assert.equal(await page.locator('.message-user', { hasText: '/say' }).count(), 0);
    await page.getByRole('button', { name: 'Dismiss the summary' }).click();
    await page.locator('[data-summary]').waitFor({ state: 'detached' });

    // No API names or harness wording anywhere on the page.
    const text = await page.locator('body').innerText();
    for (const word of ['continue()', 'harness session', 'Lifecycle state', 'network error']) assert.ok(!text.includes(word), word);

    // WCAG AA: every text of the sidebar and the header against the background it sits on.
    const contrasts = () =>
      page.evaluate(() => {
        const rgb = (value) => (value.match(/[\d.]+/g) ?? []).map(Number);
        const lum = ([r, g, b]) => {
          const f = (c) => ((c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
          return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
        };
        const background = (element) => {
          for (let e = element; e; e = e.parentElement) {
            const c = rgb(getComputedStyle(e).backgroundColor);
            if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
          }
          return [255, 255, 255];
        };
        const low = [];
        for (const element of document.querySelectorAll('.sidebar *, .chat-header *, .composer *, .message *')) {
          const own = [...element.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== '');
          if (!own || element.closest('.sr-only')) continue;
          const style = getComputedStyle(element);
          if (style.visibility === 'hidden' || style.display === 'none' || element.closest('button:disabled')) continue;
          const [a, b] = [lum(rgb(style.color).slice(0, 3)), lum(background(element))].sort((x, y) => y - x);
          const ratio = (a + 0.05) / (b + 0.05);
          if (ratio < 4.5) low.push(`${element.className || element.tagName}: ${ratio.toFixed(2)} "${element.textContent.trim().slice(0, 30)}"`);
        }
        return low;
      });
    assert.deepEqual(await contrasts(), []);
    await screenshot('chat-light');
    await page.emulateMedia({ colorScheme: 'dark' });
    // The buttons' colours ease in (120 ms): let them land before reading or shooting them.
    await page.waitForTimeout(400);
    const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.notEqual(dark, 'rgb(251, 251, 250)', 'dark mode follows the system');
    assert.deepEqual(await contrasts(), []);
    await screenshot('chat-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.waitForTimeout(400);

    // Phone widths: nothing wider than the screen.
    for (const width of [360, 390]) {
      await page.setViewportSize({ width, height: 780 });
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(wide <= width, `${wide} px wide at ${width} px`);
      // And nothing cut off: the header, its buttons, the messages and the composer fit the screen.
      const outside = await page.evaluate((w) => {
        const selectors = ['.chat-header', '.chat-actions .button', '.message-user .bubble', '.composer-box', '.session-link', '.send-group .button'];
        return selectors.flatMap((selector) =>
          [...document.querySelectorAll(selector)].filter((e) => e.getBoundingClientRect().right > w + 1).map((e) => `${selector}: ${Math.round(e.getBoundingClientRect().right)}`),
        );
      }, width);
      assert.deepEqual(outside, []);
      await page.getByRole('button', { name: 'Send' }).waitFor();
      await page.waitForTimeout(200);
      await screenshot(`phone-${width}`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });

    // Deleted, then the browser's Back: shown, never writable.
    const url = page.url();
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('button', { name: 'Delete for good?' }).click();
    await page.waitForURL(`http://localhost:${port}/`);
    await page.goBack();
    await page.waitForURL(url);
    await page.getByText('This conversation was deleted', { exact: false }).waitFor();
    assert.equal(await composer().isDisabled(), true);
    assert.deepEqual(pageErrors, []);
  });
  it('tells the user when a conversation is paused to make room (4 live at once)', async () => {
    for (let n = 1; n <= 5; n++) {
      await newConversation();
      await send(`room ${n}`);
      await assistant().getByText(`You said: room ${n}`).waitFor({ timeout: 20_000 });
      await settled();
    }
    const notice = page.locator('[data-notice="paused"]').first();
    await notice.getByText('was paused to make room for another conversation', { exact: false }).waitFor({ timeout: 20_000 });
    await screenshot('paused-to-make-room');
    // Each paused conversation has its notice: each is dismissed.
    const notices = page.locator('[data-notice="paused"]');
    for (let left = await notices.count(); left > 0; left--) {
      await notices.first().getByRole('button', { name: 'Dismiss' }).click();
      await page.waitForFunction((n) => document.querySelectorAll('[data-notice="paused"]').length < n, left);
    }
    assert.equal(await notices.count(), 0);
    assert.deepEqual(pageErrors, []);
  });
});
