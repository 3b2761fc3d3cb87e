'use strict';
/**
 * The default `errorMessage`: `getHarnessErrorMessage` of `@ai-sdk/harness`, by the same markers,
 * so that the package needs no runtime dependency on it. Messages of the harness's reviewed error
 * types pass through; every other error is masked.
 */

const hasMarker = (error, name) => {
  const symbol = Symbol.for(`vercel.ai.error.${name}`);
  return error != null && typeof error === 'object' && symbol in error && error[symbol] === true;
};

/** What a client is told of `error`: its message for harness errors, `An error occurred.` else. */
function getHarnessErrorMessage(error) {
  if (
    hasMarker(error, 'AI_HarnessCapabilityUnsupportedError') ||
    hasMarker(error, 'AI_HarnessSandboxAuthenticationError') ||
    (hasMarker(error, 'AI_HarnessError') && error.name === 'AI_HarnessError')
  ) {
    return error.message;
  }
  return 'An error occurred.';
}

module.exports = { getHarnessErrorMessage };
