// A consumer of harness-sessions/testing's Anthropic mock and request catcher: this file only has
// to type-check (`tsc -p __test__/types`) against testing/index.d.mts.
import {
  createAnthropicMock,
  createRequestCatcher,
  requestTexts,
  requestToolResults,
  type AnthropicMockReply,
} from 'harness-sessions/testing';

export async function useTheMock(): Promise<string[]> {
  const write: AnthropicMockReply = { text: 'Writing it.', toolUse: { name: 'Write', input: { file_path: '/tmp/x', content: 'hi' } } };
  const mock = await createAnthropicMock({
    replies: [write, (request) => ({ text: `You said ${requestTexts(request).at(-1) ?? ''}` }), { error: { status: 529, type: 'overloaded_error' } }],
    respond: (request) => (request.body?.tools === undefined ? { text: 'title' } : undefined),
    fallback: { text: 'OK', usage: { inputTokens: 3 } },
  });
  mock.reply({ streamError: { message: 'cut' }, delayMs: 5 });
  const catcher = await createRequestCatcher();
  const env: Record<string, string> = { ANTHROPIC_BASE_URL: mock.url, ...catcher.proxyEnv() };
  const request = await mock.waitForRequest((r) => r.stream, { timeoutMs: 1000 });
  const results: string[] = requestToolResults(request).map((r) => r.tool_use_id);
  const refused: string[] = catcher.requests.map((r) => `${r.method} ${r.target}`);
  await mock.close();
  await catcher.close();
  return [...results, ...refused, env.ANTHROPIC_BASE_URL, String(mock.messageRequests.length + mock.pending)];
}
