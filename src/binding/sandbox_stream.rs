//! What streams between a sandbox and JavaScript: a process's output, a file read, a file
//! written. Each read returns a batch (everything buffered, up to 1 MiB); a cancel is seen at
//! once, even while a read waits.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::{FutureExt, StreamExt};
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use tokio::sync::{mpsc, oneshot, watch, Mutex};

use super::CommandResult;
use crate::binding::error::{guard, Settled};
use crate::engine::error::{Result, SessionError};
use crate::engine::sandbox::{
    process::RUN_OUTPUT_LIMIT, FileStream, OutputReader, ProcessControl, SandboxProcess,
    SandboxSession,
};

/// The most bytes one read returns.
const BATCH: usize = 1024 * 1024;

/// One readable stream and its cancel flag.
struct Source<T> {
    reader: Mutex<Option<T>>,
    cancelled: watch::Sender<bool>,
}

impl<T> Source<T> {
    fn new(reader: T) -> Self {
        Source {
            reader: Mutex::new(Some(reader)),
            cancelled: watch::channel(false).0,
        }
    }

    /// Cancels the stream: a pending read returns `None`, and the reader is dropped.
    async fn cancel(&self) {
        self.cancelled.send_replace(true);
        self.reader.lock().await.take();
    }

    /// Reads one batch with `read`, unless the stream is cancelled first.
    async fn read_with<F>(&self, read: F) -> Result<Option<Bytes>>
    where
        F: for<'a> FnOnce(&'a mut T) -> futures::future::BoxFuture<'a, Result<Option<Bytes>>>,
    {
        let mut cancelled = self.cancelled.subscribe();
        if *cancelled.borrow() {
            return Ok(None);
        }
        let mut guard = self.reader.lock().await;
        let Some(reader) = guard.as_mut() else {
            return Ok(None);
        };
        tokio::select! {
            read = read(reader) => {
                if matches!(read, Ok(None) | Err(_)) {
                    guard.take();
                }
                read
            }
            _ = cancelled.wait_for(|cancelled| *cancelled) => {
                guard.take();
                Ok(None)
            }
        }
    }
}

/// The next batch of `source`, read with `read`, as a `Buffer`; `None` at its end.
async fn read_batch<T, F>(source: Arc<Source<T>>, read: F) -> Settled<Option<Buffer>>
where
    T: Send + 'static,
    F: for<'a> FnOnce(&'a mut T) -> futures::future::BoxFuture<'a, Result<Option<Bytes>>>
        + Send
        + 'static,
{
    guard(async move {
        Ok(source
            .read_with(read)
            .await?
            .map(|bytes| Buffer::from(bytes.to_vec())))
    })
    .await
}

/// Cancels `source`: what comes next is dropped.
async fn cancel<T: Send + 'static>(source: Arc<Source<T>>) -> Settled<()> {
    guard(async move {
        source.cancel().await;
        Ok(())
    })
    .await
}

/// A process started in a sandbox.
#[napi]
pub struct NativeSandboxProcess {
    pid: Option<u32>,
    stdout: Arc<Source<OutputReader>>,
    stderr: Arc<Source<OutputReader>>,
    control: ProcessControl,
}

impl NativeSandboxProcess {
    pub(crate) fn new(process: SandboxProcess) -> Self {
        NativeSandboxProcess {
            pid: process.pid,
            stdout: Arc::new(Source::new(process.stdout)),
            stderr: Arc::new(Source::new(process.stderr)),
            control: process.control,
        }
    }
}

fn read_output(reader: &mut OutputReader) -> futures::future::BoxFuture<'_, Result<Option<Bytes>>> {
    async move { Ok(reader.read().await) }.boxed()
}

#[napi]
impl NativeSandboxProcess {
    /// Its process id in the sandbox, when known.
    #[napi(getter)]
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The next batch of standard output, or `null` at its end.
    #[napi]
    pub async fn read_stdout(&self) -> Settled<Option<Buffer>> {
        read_batch(self.stdout.clone(), read_output).await
    }

    /// The next batch of standard error, or `null` at its end.
    #[napi]
    pub async fn read_stderr(&self) -> Settled<Option<Buffer>> {
        read_batch(self.stderr.clone(), read_output).await
    }

    /// Stops reading standard output: what comes next is dropped.
    #[napi]
    pub async fn cancel_stdout(&self) -> Settled<()> {
        cancel(self.stdout.clone()).await
    }

    /// Stops reading standard error: what comes next is dropped.
    #[napi]
    pub async fn cancel_stderr(&self) -> Settled<()> {
        cancel(self.stderr.clone()).await
    }

    /// Its exit code, once it has ended.
    #[napi]
    pub async fn wait(&self) -> Settled<i32> {
        let control = self.control.clone();
        guard(async move { control.wait().await.map(|status| status.code) }).await
    }

    /// Kills it and what it started; resolves once it has ended. Idempotent.
    #[napi]
    pub async fn kill(&self) -> Settled<()> {
        let control = self.control.clone();
        guard(async move { control.kill().await }).await
    }

    /// Both streams read to their end, and the exit code: what `run` returns, in one crossing.
    #[napi]
    pub async fn collect(&self) -> Settled<CommandResult> {
        let (stdout, stderr, control) = (
            self.stdout.clone(),
            self.stderr.clone(),
            self.control.clone(),
        );
        guard(async move {
            // At most RUN_OUTPUT_LIMIT bytes of each stream: past it the command is killed and
            // run() fails, rather than the server holding whatever the command writes.
            let drain = |source: Arc<Source<OutputReader>>, stream: &'static str| {
                let control = control.clone();
                async move {
                    let mut all = Vec::new();
                    while let Some(chunk) = source.read_with(read_output).await? {
                        if all.len() + chunk.len() > RUN_OUTPUT_LIMIT {
                            drop(all);
                            let _ = control.kill().await;
                            return Err(SessionError::host(format!(
                                "run(): the command wrote more than {} MiB to {stream}, the most run() keeps; it was killed. Use spawn() to stream a large output, or send it to a file.",
                                RUN_OUTPUT_LIMIT >> 20
                            )));
                        }
                        all.extend_from_slice(&chunk);
                    }
                    Ok::<_, SessionError>(all)
                }
            };
            let (out, err) = tokio::try_join!(drain(stdout, "stdout"), drain(stderr, "stderr"))?;
            let status = control.wait().await?;
            Ok(CommandResult {
                exit_code: status.code,
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
            })
        })
        .await
    }
}

/// A file being read.
#[napi]
pub struct NativeFileReader {
    source: Arc<Source<FileStream>>,
}

impl NativeFileReader {
    pub(crate) fn new(stream: FileStream) -> Self {
        // Fused: a batch may look past the end, and the next read must then find the end again.
        let stream: FileStream = Box::pin(stream.fuse());
        NativeFileReader {
            source: Arc::new(Source::new(stream)),
        }
    }
}

/// The next chunk of `stream`, with the chunks ready right after it, up to [`BATCH`] bytes.
fn read_file_batch(
    stream: &mut FileStream,
) -> futures::future::BoxFuture<'_, Result<Option<Bytes>>> {
    async move {
        let Some(first) = stream.next().await.transpose()? else {
            return Ok(None);
        };
        if first.len() >= BATCH {
            return Ok(Some(first));
        }
        let mut batch = BytesMut::from(&first[..]);
        while batch.len() < BATCH {
            match stream.next().now_or_never() {
                Some(Some(chunk)) => batch.extend_from_slice(&chunk?),
                _ => break,
            }
        }
        Ok(Some(batch.freeze()))
    }
    .boxed()
}

#[napi]
impl NativeFileReader {
    /// The next batch of the file, or `null` at its end.
    #[napi]
    pub async fn read(&self) -> Settled<Option<Buffer>> {
        read_batch(self.source.clone(), read_file_batch).await
    }

    /// Stops reading.
    #[napi]
    pub async fn cancel(&self) -> Settled<()> {
        cancel(self.source.clone()).await
    }
}

/// A file being written from chunks JavaScript sends.
#[napi]
pub struct NativeFileWriter {
    chunks: Mutex<Option<mpsc::Sender<Result<Bytes>>>>,
    done: Mutex<Option<oneshot::Receiver<Result<()>>>>,
}

impl NativeFileWriter {
    /// Starts writing `path` in `session` from the chunks to come.
    pub(crate) fn start(session: Arc<dyn SandboxSession>, path: String) -> Self {
        let (chunks, receiver) = mpsc::channel::<Result<Bytes>>(8);
        let (finished, done) = oneshot::channel();
        tokio::spawn(async move {
            let stream: FileStream = Box::pin(futures::stream::unfold(
                receiver,
                |mut receiver| async move { receiver.recv().await.map(|chunk| (chunk, receiver)) },
            ));
            let _ = finished.send(session.write_file(&path, stream).await);
        });
        NativeFileWriter {
            chunks: Mutex::new(Some(chunks)),
            done: Mutex::new(Some(done)),
        }
    }

    async fn outcome(&self) -> Result<()> {
        self.chunks.lock().await.take();
        match self.done.lock().await.take() {
            Some(done) => done.await.unwrap_or_else(|_| {
                Err(SessionError::internal(
                    "a file write ended without an outcome",
                ))
            }),
            None => Err(SessionError::input(
                "path",
                "This file write is already finished.",
            )),
        }
    }
}

#[napi]
impl NativeFileWriter {
    /// Sends a chunk; waits while the write is behind.
    #[napi]
    pub async fn write(&self, chunk: Buffer) -> Settled<()> {
        let chunk = Bytes::from(chunk.to_vec());
        guard(async move {
            let sender = self.chunks.lock().await.clone();
            let Some(sender) = sender else {
                return Err(SessionError::input(
                    "path",
                    "This file write is already finished.",
                ));
            };
            if sender.send(Ok(chunk)).await.is_err() {
                // The write stopped early: its outcome says why.
                return self.outcome().await;
            }
            Ok(())
        })
        .await
    }

    /// Ends the content and waits for the file to be written.
    #[napi]
    pub async fn finish(&self) -> Settled<()> {
        guard(self.outcome()).await
    }

    /// Gives up: the file is left as it was.
    #[napi]
    pub async fn abort(&self, reason: Option<String>) -> Settled<()> {
        guard(async move {
            if let Some(sender) = self.chunks.lock().await.take() {
                let reason = reason.unwrap_or_else(|| "the content stream failed".to_owned());
                let _ = sender
                    .send(Err(SessionError::host(format!(
                        "The write was aborted: {reason}"
                    ))))
                    .await;
            }
            let _ = self.outcome().await;
            Ok(())
        })
        .await
    }
}
