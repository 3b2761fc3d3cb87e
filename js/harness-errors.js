'use strict';
/**
 * What a client is told of an error, decided here and nowhere else: the application's
 * `errorMessage`, else the default, `getHarnessErrorMessage` of `@ai-sdk/harness` (by the same
 * markers, so that the package needs no runtime dependency on it): messages of the harness's
 * reviewed error types pass through; every other error is masked.
 */

/** The text a client is shown of an error it may not see. */
const MASKED_MESSAGE = 'An error occurred.';

const hasMarker = (error, name) => {
  const symbol = Symbol.for(`vercel.ai.error.${name}`);
  return error != null && typeof error === 'object' && symbol in error && error[symbol] === true;
};

/** What a client is told of `error`: its message for harness errors, `MASKED_MESSAGE` else. */
function getHarnessErrorMessage(error) {
  if (
    hasMarker(error, 'AI_HarnessCapabilityUnsupportedError') ||
    hasMarker(error, 'AI_HarnessSandboxAuthenticationError') ||
    (hasMarker(error, 'AI_HarnessError') && error.name === 'AI_HarnessError')
  ) {
    return error.message;
  }
  return MASKED_MESSAGE;
}

/**
 * The function that gives the text a client is shown of an error: `errorMessage`'s (the
 * application's option) when it gives a string, `MASKED_MESSAGE` when it gives anything else or
 * throws. The turns' streams (`js/turns.js`) and the engine (the host's `clientMessage`) use it.
 *
 * @param {(error: unknown) => unknown} [errorMessage] default: `getHarnessErrorMessage`
 * @returns {(error: unknown) => string}
 */
function clientMessenger(errorMessage = getHarnessErrorMessage) {
  return (error) => {
    try {
      const text = errorMessage(error);
      return typeof text === 'string' ? text : MASKED_MESSAGE;
    } catch {
      return MASKED_MESSAGE;
    }
  };
}

module.exports = { getHarnessErrorMessage, clientMessenger, MASKED_MESSAGE };
