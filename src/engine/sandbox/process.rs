//! Processes in a sandbox: what to run, its streamed output, its exit, and how to kill it.
//!
//! A backend starts a process and gets two halves: a [`SandboxProcess`] for the caller (two
//! [`OutputReader`]s and a [`ProcessControl`]) and a [`ProcessSink`] for the task that pumps the
//! process's output. The output travels through a bounded byte pipe per stream: a reader gets
//! everything buffered in one [`OutputReader::read`] (so output crosses to JavaScript in chunks,
//! never line by line), and a process whose output nobody reads is held back once
//! [`PIPE_CAPACITY`] bytes wait, as it would be on a real pipe. Dropping a reader discards that
//! stream from then on.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use tokio::sync::{watch, Notify};

use crate::engine::error::{Result, SessionError};

/// The most bytes of one output stream that wait for their reader before the process is held.
pub const PIPE_CAPACITY: usize = 4 * 1024 * 1024;

/// The most bytes one [`OutputReader::read`] returns.
pub const READ_BATCH: usize = 1024 * 1024;

/// The most bytes of each of stdout and stderr that [`SandboxProcess::collect`] (`run()`) keeps:
/// 64 MiB, as the largest bound of `exec()`. Past it the command is killed and `run()` fails.
pub const RUN_OUTPUT_LIMIT: usize = 64 << 20;

/// A command to run in a sandbox, through its shell (`/bin/sh -c`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Command {
    /// The shell command line.
    pub command: String,
    /// Where it runs: absolute, or relative to the sandbox's default working directory (the
    /// default).
    pub working_directory: Option<String>,
    /// Variables added to the sandbox's environment for this command; they take precedence.
    pub env: Vec<(String, String)>,
}

impl Command {
    /// `command`, in the default working directory, with no extra environment.
    pub fn new(command: impl Into<String>) -> Self {
        Command {
            command: command.into(),
            ..Command::default()
        }
    }

    /// The same command in `directory`.
    pub fn in_directory(mut self, directory: impl Into<String>) -> Self {
        self.working_directory = Some(directory.into());
        self
    }

    /// The same command with `name=value` in its environment.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Refuses an empty command line and malformed variable names.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.command.trim().is_empty() {
            return Err(SessionError::input("command", "The command is empty."));
        }
        if self.command.contains('\0') {
            return Err(SessionError::input(
                "command",
                "The command contains a NUL character.",
            ));
        }
        for (name, value) in &self.env {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(SessionError::input(
                    format!("env.{name}"),
                    format!("{name:?} is not a valid environment variable name."),
                ));
            }
            if value.contains('\0') {
                return Err(SessionError::input(
                    format!("env.{name}"),
                    format!("The value of {name} contains a NUL character."),
                ));
            }
        }
        Ok(())
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus {
    /// Its exit code; `128 + n` when signal `n` ended it (137 for a kill).
    pub code: i32,
    /// Whether it ended because it was killed through [`ProcessControl::kill`] or a stop.
    pub killed: bool,
}

/// What a command printed and how it ended, as [`crate::engine::sandbox::SandboxSession::run`]
/// returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// Its exit code.
    pub exit_code: i32,
    /// Its standard output, decoded as UTF-8 (invalid sequences replaced).
    pub stdout: String,
    /// Its standard error, decoded the same way.
    pub stderr: String,
}

/// A process started in a sandbox: its two output streams and its control.
#[derive(Debug)]
pub struct SandboxProcess {
    /// Its process id inside the sandbox, when known.
    pub pid: Option<u32>,
    /// Its standard output.
    pub stdout: OutputReader,
    /// Its standard error.
    pub stderr: OutputReader,
    /// Waits for it and kills it; can be cloned.
    pub control: ProcessControl,
}

impl SandboxProcess {
    /// Reads both streams to their end and waits for the exit: what `run` returns.
    ///
    /// # Errors
    ///
    /// When the sandbox fails while the process runs (its container removed, say).
    pub async fn collect(self) -> Result<CommandOutput> {
        self.collect_within(RUN_OUTPUT_LIMIT).await
    }

    /// As [`SandboxProcess::collect`], keeping at most `limit` bytes of each stream.
    ///
    /// # Errors
    ///
    /// When a stream passes `limit` (the process is killed, and nothing of its output kept), or
    /// the sandbox fails while the process runs.
    pub async fn collect_within(self, limit: usize) -> Result<CommandOutput> {
        let SandboxProcess {
            stdout,
            stderr,
            control,
            ..
        } = self;
        let (out, err) = tokio::join!(
            stdout.read_within(limit, &control),
            stderr.read_within(limit, &control)
        );
        let too_much = |stream: &str| {
            SessionError::host(format!(
                "run(): the command wrote more than {} MiB to {stream}, the most run() keeps; it was killed. Use spawn() to stream a large output, or send it to a file.",
                limit >> 20
            ))
        };
        let (out, err) = match (out, err) {
            (Some(out), Some(err)) => (out, err),
            (None, _) => {
                let _ = control.wait().await;
                return Err(too_much("stdout"));
            }
            (_, None) => {
                let _ = control.wait().await;
                return Err(too_much("stderr"));
            }
        };
        let status = control.wait().await?;
        Ok(CommandOutput {
            exit_code: status.code,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        })
    }
}

/// One output stream of a process, read in batches.
#[derive(Debug)]
pub struct OutputReader {
    pipe: Arc<Pipe>,
}

impl OutputReader {
    /// Everything the process has written since the last read, at most [`READ_BATCH`] bytes,
    /// waiting for the first bytes; `None` once the stream has ended.
    pub async fn read(&mut self) -> Option<Bytes> {
        self.pipe.read(READ_BATCH).await
    }

    /// The whole stream once it has ended, or `None` when it passes `limit` bytes: then the
    /// process is killed through `control`, and the rest of the stream discarded.
    pub async fn read_within(mut self, limit: usize, control: &ProcessControl) -> Option<Vec<u8>> {
        let mut all = Vec::new();
        while let Some(chunk) = self.read().await {
            if all.len() + chunk.len() > limit {
                drop(self);
                if control.status().is_none() {
                    control.kill.send_replace(true);
                }
                return None;
            }
            all.extend_from_slice(&chunk);
        }
        Some(all)
    }

    /// The whole stream, once it has ended.
    pub async fn read_to_end(mut self) -> Vec<u8> {
        let mut all = Vec::new();
        while let Some(chunk) = self.read().await {
            all.extend_from_slice(&chunk);
        }
        all
    }
}

impl Drop for OutputReader {
    fn drop(&mut self) {
        self.pipe.close_reader();
    }
}

/// Waits for a process and kills it. Clones control the same process.
#[derive(Debug, Clone)]
pub struct ProcessControl {
    exit: watch::Receiver<Option<Result<ExitStatus>>>,
    kill: Arc<watch::Sender<bool>>,
}

impl ProcessControl {
    /// How the process ended, once it has.
    ///
    /// # Errors
    ///
    /// When the sandbox failed before the process's end could be known.
    pub async fn wait(&self) -> Result<ExitStatus> {
        let mut exit = self.exit.clone();
        let ended = match exit.wait_for(Option::is_some).await {
            Ok(status) => status.clone(),
            Err(_) => None,
        };
        ended.unwrap_or_else(|| {
            Err(SessionError::internal(
                "the task that watched a sandbox process ended without its exit status",
            ))
        })
    }

    /// How the process ended, if it has.
    pub fn status(&self) -> Option<Result<ExitStatus>> {
        self.exit.borrow().clone()
    }

    /// Kills the process and what it started (its process group), and waits for its end.
    /// Idempotent: killing an ended process does nothing.
    ///
    /// # Errors
    ///
    /// When the sandbox fails to deliver the kill.
    pub async fn kill(&self) -> Result<()> {
        if self.status().is_none() {
            self.kill.send_replace(true);
        }
        self.wait().await.map(|_| ())
    }
}

/// The backend's half of a process: where its output and its exit go, and where a kill request
/// arrives.
#[derive(Debug)]
pub(crate) struct ProcessSink {
    pub(crate) stdout: OutputWriter,
    pub(crate) stderr: OutputWriter,
    pub(crate) exit: watch::Sender<Option<Result<ExitStatus>>>,
    pub(crate) kill_requested: watch::Receiver<bool>,
}

impl ProcessSink {
    /// Records how the process ended (once), closing both streams.
    pub(crate) fn finish(&self, status: Result<ExitStatus>) {
        self.stdout.close();
        self.stderr.close();
        self.exit.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(status);
                true
            } else {
                false
            }
        });
    }

    /// Whether a kill has been asked for.
    pub(crate) fn kill_was_requested(&self) -> bool {
        *self.kill_requested.borrow()
    }
}

/// A new process's two halves: the caller's and the backend's.
pub(crate) fn process_channel(pid: Option<u32>) -> (SandboxProcess, ProcessSink) {
    let stdout = Arc::new(Pipe::default());
    let stderr = Arc::new(Pipe::default());
    let (exit_tx, exit_rx) = watch::channel(None);
    let (kill_tx, kill_rx) = watch::channel(false);
    let process = SandboxProcess {
        pid,
        stdout: OutputReader {
            pipe: stdout.clone(),
        },
        stderr: OutputReader {
            pipe: stderr.clone(),
        },
        control: ProcessControl {
            exit: exit_rx,
            kill: Arc::new(kill_tx),
        },
    };
    let sink = ProcessSink {
        stdout: OutputWriter { pipe: stdout },
        stderr: OutputWriter { pipe: stderr },
        exit: exit_tx,
        kill_requested: kill_rx,
    };
    (process, sink)
}

/// The writing end of one output stream.
#[derive(Debug)]
pub(crate) struct OutputWriter {
    pipe: Arc<Pipe>,
}

impl OutputWriter {
    /// Queues `bytes`, waiting while [`PIPE_CAPACITY`] bytes wait for the reader; drops them
    /// when the reader is gone.
    pub(crate) async fn write(&self, bytes: Bytes) {
        self.pipe.write(bytes).await;
    }

    /// Ends the stream: the reader gets what is queued, then `None`.
    pub(crate) fn close(&self) {
        self.pipe.close_writer();
    }
}

/// A single-producer, single-consumer byte queue with a capacity.
#[derive(Debug, Default)]
struct Pipe {
    state: Mutex<PipeState>,
    readable: Notify,
    writable: Notify,
}

#[derive(Debug, Default)]
struct PipeState {
    chunks: VecDeque<Bytes>,
    buffered: usize,
    writer_done: bool,
    reader_gone: bool,
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, PipeState> {
        // The state stays consistent whatever panicked while holding it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    async fn write(&self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        loop {
            {
                let mut state = self.lock();
                if state.reader_gone || state.writer_done {
                    return;
                }
                if state.buffered < PIPE_CAPACITY {
                    state.buffered += bytes.len();
                    state.chunks.push_back(bytes);
                    drop(state);
                    self.readable.notify_one();
                    return;
                }
            }
            self.writable.notified().await;
        }
    }

    async fn read(&self, max: usize) -> Option<Bytes> {
        loop {
            {
                let mut state = self.lock();
                if let Some(first) = state.chunks.pop_front() {
                    let mut taken = first.len();
                    let batch = if state
                        .chunks
                        .front()
                        .is_none_or(|next| taken + next.len() > max)
                    {
                        first
                    } else {
                        let mut batch = BytesMut::from(&first[..]);
                        while let Some(next) = state.chunks.front() {
                            if taken + next.len() > max {
                                break;
                            }
                            taken += next.len();
                            if let Some(next) = state.chunks.pop_front() {
                                batch.extend_from_slice(&next);
                            }
                        }
                        batch.freeze()
                    };
                    state.buffered -= taken;
                    drop(state);
                    self.writable.notify_one();
                    return Some(batch);
                }
                if state.writer_done {
                    return None;
                }
            }
            self.readable.notified().await;
        }
    }

    fn close_writer(&self) {
        self.lock().writer_done = true;
        self.readable.notify_one();
    }

    fn close_reader(&self) {
        {
            let mut state = self.lock();
            state.reader_gone = true;
            state.chunks.clear();
            state.buffered = 0;
        }
        self.writable.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_read_takes_everything_buffered_in_one_batch() {
        let (mut process, sink) = process_channel(None);
        for line in ["a\n", "b\n", "c\n"] {
            sink.stdout.write(Bytes::from_static(line.as_bytes())).await;
        }
        assert_eq!(
            process.stdout.read().await.as_deref(),
            Some(&b"a\nb\nc\n"[..])
        );
        sink.finish(Ok(ExitStatus {
            code: 0,
            killed: false,
        }));
        assert_eq!(process.stdout.read().await, None);
        assert_eq!(process.control.wait().await.map(|s| s.code), Ok(0));
    }

    #[tokio::test]
    async fn a_full_pipe_holds_the_writer_until_read() {
        let (mut process, sink) = process_channel(None);
        let sink = Arc::new(sink);
        let writer = {
            let sink = sink.clone();
            tokio::spawn(async move {
                for _ in 0..5 {
                    sink.stdout
                        .write(Bytes::from(vec![b'x'; PIPE_CAPACITY / 2]))
                        .await;
                }
                sink.stdout.close();
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !writer.is_finished(),
            "the writer should wait for the reader"
        );
        let mut total = 0;
        while let Some(chunk) = process.stdout.read().await {
            assert!(chunk.len() <= READ_BATCH.max(PIPE_CAPACITY / 2));
            total += chunk.len();
        }
        assert_eq!(total, 5 * PIPE_CAPACITY / 2);
        assert!(writer.await.is_ok());
    }

    #[tokio::test]
    async fn a_dropped_reader_discards_the_stream() {
        let (process, sink) = process_channel(None);
        drop(process.stdout);
        for _ in 0..4 {
            sink.stdout.write(Bytes::from(vec![0; PIPE_CAPACITY])).await;
        }
    }

    #[tokio::test]
    async fn kill_is_seen_by_the_backend_and_idempotent() {
        let (process, mut sink) = process_channel(Some(7));
        let control = process.control.clone();
        let backend = tokio::spawn(async move {
            let _ = sink.kill_requested.wait_for(|asked| *asked).await;
            sink.finish(Ok(ExitStatus {
                code: 137,
                killed: true,
            }));
        });
        assert_eq!(control.kill().await, Ok(()));
        assert_eq!(control.kill().await, Ok(()));
        assert!(backend.await.is_ok());
        assert_eq!(
            process.collect().await.map(|output| output.exit_code),
            Ok(137)
        );
    }

    #[test]
    fn commands_are_validated() {
        assert!(Command::new("  ").validate().is_err());
        assert!(Command::new("true")
            .with_env("A=B", "x")
            .validate()
            .is_err());
        assert!(Command::new("true").with_env("A", "x").validate().is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn collect_refuses_output_past_its_bound_and_kills() {
        let (process, sink) = process_channel(None);
        let control = process.control.clone();
        let writer = tokio::spawn(async move {
            let mut kill = sink.kill_requested.clone();
            loop {
                tokio::select! {
                    () = sink.stdout.write(Bytes::from(vec![b'x'; 4096])) => {}
                    _ = kill.wait_for(|killed| *killed) => break,
                }
            }
            sink.stdout.close();
            sink.stderr.close();
            sink.finish(Ok(ExitStatus {
                code: 137,
                killed: true,
            }));
        });
        let collected = process.collect_within(1 << 20).await;
        assert!(
            matches!(&collected, Err(SessionError::Host { message, .. }) if message.contains("more than 1 MiB to stdout")),
            "{collected:?}"
        );
        assert!(control.status().is_some(), "the process was killed");
        writer.await.expect("the writer ended");
        let (process, sink) = process_channel(None);
        sink.stdout.write(Bytes::from_static(b"small")).await;
        sink.finish(Ok(ExitStatus {
            code: 0,
            killed: false,
        }));
        let output = process
            .collect_within(1 << 20)
            .await
            .expect("within the bound");
        assert_eq!(output.stdout, "small");
    }
}
