/**
 * Test doubles for the session manager and for your own tests: `harness-sessions/testing`.
 *
 * - {@link createScriptedHarness}: a real `HarnessV1` without a model, for `HarnessAgent`.
 * - {@link createFakeSandbox}: a sandbox in a folder of this host.
 * - {@link createFakeAgent}: an agent without `HarnessAgent`, for fast lifecycle tests.
 */

export { createDeferred, createFakeAgent, FakeAgentSession } from './fake-agent.mjs';
export { createFakeSandbox } from './fake-sandbox.mjs';
export { createScriptedHarness } from './scripted-harness.mjs';
