//! The AI SDK v7 UI message stream: its chunks, the `UIMessage` they build, and its SSE encoding.
