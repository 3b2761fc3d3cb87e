/**
 * Test doubles for the session manager and for your own tests: `harness-sessions/testing`.
 *
 * - {@link createScriptedHarness}: a real `HarnessV1` without a model, for `HarnessAgent`.
 * - {@link createFakeSandbox}: a sandbox in a folder of this host.
 * - {@link createFakeAgent}: an agent without `HarnessAgent`, for fast lifecycle tests.
 * - {@link createAnthropicMock}: the Anthropic Messages API on a loopback port, replies scripted.
 * - {@link createRequestCatcher}: a proxy that refuses and logs every request sent through it.
 */

export { createDeferred, createFakeAgent, FakeAgentSession } from './fake-agent.mjs';
export { createFakeSandbox } from './fake-sandbox.mjs';
export { createScriptedHarness } from './scripted-harness.mjs';
export { createAnthropicMock, requestTexts, requestToolResults } from './anthropic-mock.mjs';
export { createRequestCatcher } from './request-catcher.mjs';
