//! The file API of a Docker sandbox: each operation a small shell script run with `exec` **as the
//! sandbox's user**, inside the container.
//!
//! The kernel of the container resolves every path, links included, with the rights of that user:
//! whatever a link leads to, the file API reaches no more than a program of the sandbox already
//! can (never a root-only file, never `/etc`), unlike the daemon's archive API, which resolves
//! paths as root. Before acting, the script resolves the path (`readlink -f`) and refuses one that
//! leads outside the sandbox's directories (exit 5); a link swapped in between that check and the
//! act can only lead where the user may go anyway. Errors carry the script's words and container
//! paths, never a path of the host.
//!
//! The script needs `/bin/sh`, `readlink -f`, `cat`, `mkdir -p`, `mv`, `rm`, `wc` and `stat -c`
//! (BusyBox and GNU coreutils both have them).

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bytes::Bytes;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::container::Container;
use crate::engine::error::{Result, SessionError};
use crate::engine::sandbox::paths::PathPolicy;
use crate::engine::sandbox::FileStream;

/// The file script: `sh -c SCRIPT files <op> <path> <size> <root>...`. Exit codes: 0 done, 3 no
/// such file, 4 a directory, 5 leads outside the roots (the resolved path on stderr), 6 a file in
/// the way of a directory, 7 anything else (the reason on stderr), 8 a pipe or a socket (never
/// read: it could block for ever). A read prints `+` before the
/// contents, so that its caller knows the file opened before the first byte.
const FILE_SCRIPT: &str = r#"op=$1; p=$2; size=$3; shift 3
within() { w_c=$1; shift; for w_r in "$@"; do case $w_c in "$w_r"|"$w_r"/*) return 0;; esac; [ "$w_r" = / ] && return 0; done; return 1; }
out() { printf '%s' "$1" >&2; exit 5; }
# make_dirs DIR ROOTS...: DIR and its parents, refusing any that lead outside.
make_dirs() {
  d=$1; shift; a=$d
  while [ ! -e "$a" ] && [ ! -L "$a" ]; do a=${a%/*}; [ -n "$a" ] || a=/; done
  r=$(readlink -f -- "$a") || exit 6
  within "$r" "$@" || out "$r"
  [ -d "$r" ] || exit 6
  mkdir -p -- "$d" 2>/dev/null || exit 6
  r=$(readlink -f -- "$d") || exit 6
  within "$r" "$@" || out "$r"
  [ -d "$r" ] || exit 6
}
case $op in
read)
  [ -e "$p" ] || [ -L "$p" ] || exit 3
  r=$(readlink -f -- "$p") || exit 3
  within "$r" "$@" || out "$r"
  [ -d "$r" ] && exit 4
  [ -e "$r" ] || exit 3
  { [ -p "$r" ] || [ -S "$r" ]; } && exit 8
  printf +
  exec cat -- "$r" ;;
write)
  d=${p%/*}; [ -n "$d" ] || d=/
  n=${p##*/}
  make_dirs "$d" "$@"
  t=$r/$n
  if [ -L "$t" ]; then
    l=$(readlink -f -- "$t") && { within "$l" "$@" || out "$l"; }
  elif [ -d "$t" ]; then
    exit 4
  fi
  tmp=$r/.$n.$$.tmp
  cat > "$tmp" || { rm -f -- "$tmp"; exit 7; }
  got=$(wc -c < "$tmp")
  if [ $((got)) -ne "$size" ]; then rm -f -- "$tmp"; echo "received $((got)) of $size bytes" >&2; exit 7; fi
  if [ -f "$t" ] && [ ! -L "$t" ]; then m=$(stat -c %a -- "$t" 2>/dev/null) && chmod "$m" "$tmp" 2>/dev/null; fi
  [ -L "$t" ] && rm -f -- "$t"
  mv -f -- "$tmp" "$t" || { rm -f -- "$tmp"; exit 7; } ;;
mkdir)
  make_dirs "$p" "$@" ;;
*) exit 7 ;;
esac"#;

/// What a file script ended with, when it did not succeed.
enum Failure {
    /// Exit 3.
    Missing,
    /// Exit 4.
    Directory,
    /// Exit 5, with the resolved path.
    Outside,
    /// Exit 6.
    InTheWay,
    /// Exit 8.
    NotAFile,
    /// Any other exit, with what the script said.
    Other(i64, String),
}

impl Failure {
    fn of(code: i64, stderr: &[u8]) -> Failure {
        match code {
            3 => Failure::Missing,
            4 => Failure::Directory,
            5 => Failure::Outside,
            6 => Failure::InTheWay,
            8 => Failure::NotAFile,
            code => Failure::Other(code, String::from_utf8_lossy(stderr).trim().to_owned()),
        }
    }

    /// The error of `doing` on `path`.
    fn into_error(self, policy: &PathPolicy, path: &str, doing: &str) -> SessionError {
        match self {
            Failure::Missing => {
                SessionError::host(format!("Cannot {doing} {path:?}: there is no such file."))
            }
            Failure::Directory => SessionError::input(
                path,
                format!("The path {path:?} is a directory, not a file."),
            ),
            Failure::Outside => policy.leads_out(path),
            Failure::NotAFile => SessionError::input(
                path,
                format!("The path {path:?} is a pipe or a socket, not a file."),
            ),
            Failure::InTheWay => SessionError::input(
                path,
                format!("Cannot {doing} {path:?}: a file is in the way of its directory."),
            ),
            Failure::Other(code, said) => SessionError::host(format!(
                "Could not {doing} {path:?} in the sandbox (exit {code}){}",
                if said.is_empty() {
                    ".".to_owned()
                } else {
                    format!(": {said}")
                }
            )),
        }
    }
}

type Output = std::pin::Pin<
    Box<dyn futures::Stream<Item = std::result::Result<LogOutput, bollard::errors::Error>> + Send>,
>;

impl Container {
    /// Starts the file script for `op` on the absolute `path`, as the sandbox's user.
    async fn start_files(
        &self,
        op: &str,
        path: &str,
        size: usize,
        policy: &PathPolicy,
        stdin: bool,
    ) -> Result<(
        String,
        Output,
        std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    )> {
        let doing = format!("use the files of the container {}", self.name());
        let mut cmd = vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            FILE_SCRIPT.to_owned(),
            "files".to_owned(),
            op.to_owned(),
            path.to_owned(),
            size.to_string(),
        ];
        cmd.extend(policy.roots().iter().cloned());
        let exec = self
            .docker()
            .create_exec(
                self.name(),
                CreateExecOptions {
                    cmd: Some(cmd),
                    user: Some(self.user().to_owned()),
                    working_dir: Some("/".to_owned()),
                    attach_stdin: Some(stdin),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..CreateExecOptions::default()
                },
            )
            .await
            .map_err(|error| self.failure(&doing, error))?;
        let started = self
            .docker()
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    output_capacity: Some(256 * 1024),
                    ..StartExecOptions::default()
                }),
            )
            .await
            .map_err(|error| self.failure(&doing, error))?;
        match started {
            StartExecResults::Attached { output, input } => Ok((exec.id, output, input)),
            StartExecResults::Detached => Err(SessionError::internal(
                "docker started a file script detached",
            )),
        }
    }

    /// The exit code of the exec `id`, once its output ended.
    async fn exit_code(&self, id: &str) -> Result<i64> {
        let inspected = self
            .docker()
            .inspect_exec(id)
            .await
            .map_err(|error| self.failure("learn how a file script ended", error))?;
        Ok(inspected.exit_code.unwrap_or(-1))
    }

    /// The file at the absolute `path` (lexically confined by `policy`) as a stream, or `None`.
    pub(crate) async fn read_as_user(
        self: &std::sync::Arc<Self>,
        policy: &PathPolicy,
        shown: &str,
        path: &str,
    ) -> Result<Option<FileStream>> {
        // The input half stays open as long as the output is read: the connection closes with it.
        let (id, mut output, input) = self.start_files("read", path, 0, policy, false).await?;
        let mut stderr = Vec::new();
        let mut first = None;
        while let Some(frame) = output.next().await {
            match frame.map_err(|error| self.failure("read a file", error))? {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    if !message.is_empty() {
                        first = Some(message);
                        break;
                    }
                }
                LogOutput::StdErr { message } => stderr.extend_from_slice(&message),
                LogOutput::StdIn { .. } => {}
            }
        }
        let Some(first) = first.filter(|first| first.first() == Some(&b'+')) else {
            let code = self.exit_code(&id).await?;
            return match Failure::of(code, &stderr) {
                Failure::Missing => Ok(None),
                failure => Err(failure.into_error(policy, shown, "read")),
            };
        };
        let rest = first.slice(1..);
        let container = self.clone();
        let shown = shown.to_owned();
        let state = (
            Some(output),
            Some(rest),
            stderr,
            container,
            (id, input),
            shown,
        );
        let stream = futures::stream::unfold(
            state,
            |(output, pending, mut stderr, container, id, shown)| async move {
                if let Some(pending) = pending.filter(|pending| !pending.is_empty()) {
                    return Some((Ok(pending), (output, None, stderr, container, id, shown)));
                }
                let mut output = output?;
                loop {
                    match output.next().await {
                        Some(Ok(
                            LogOutput::StdOut { message } | LogOutput::Console { message },
                        )) => {
                            if !message.is_empty() {
                                return Some((
                                    Ok(message),
                                    (Some(output), None, stderr, container, id, shown),
                                ));
                            }
                        }
                        Some(Ok(LogOutput::StdErr { message })) => {
                            stderr.extend_from_slice(&message)
                        }
                        Some(Ok(LogOutput::StdIn { .. })) => {}
                        Some(Err(error)) => {
                            let error = container.failure("read a file", error);
                            return Some((Err(error), (None, None, stderr, container, id, shown)));
                        }
                        None => {
                            let ended = match container.exit_code(&id.0).await {
                                Ok(0) => return None,
                                Ok(code) => Err(SessionError::host(format!(
                                    "Could not read {shown:?} in the sandbox (exit {code}): {}",
                                    String::from_utf8_lossy(&stderr).trim()
                                ))),
                                Err(error) => Err(error),
                            };
                            return Some((ended, (None, None, stderr, container, id, shown)));
                        }
                    }
                }
            },
        );
        Ok(Some(Box::pin(stream)))
    }

    /// Writes `content` to the absolute `path` as the sandbox's user, making its directories.
    pub(crate) async fn write_as_user(
        &self,
        policy: &PathPolicy,
        shown: &str,
        path: &str,
        content: Vec<Bytes>,
    ) -> Result<()> {
        let size: usize = content.iter().map(Bytes::len).sum();
        let (id, mut output, mut input) =
            self.start_files("write", path, size, policy, true).await?;
        let feeding = async move {
            for chunk in &content {
                if input.write_all(chunk).await.is_err() {
                    break;
                }
            }
            let _ = input.shutdown().await;
        };
        let draining = async {
            let mut stderr = Vec::new();
            while let Some(frame) = output.next().await {
                match frame {
                    Ok(LogOutput::StdErr { message }) => stderr.extend_from_slice(&message),
                    Ok(_) => {}
                    Err(error) => return Err(self.failure("write a file", error)),
                }
            }
            Ok(stderr)
        };
        let ((), stderr) = tokio::join!(feeding, draining);
        let stderr = stderr?;
        match self.exit_code(&id).await? {
            0 => Ok(()),
            code => Err(Failure::of(code, &stderr).into_error(policy, shown, "write")),
        }
    }

    /// Makes the directory at the absolute `path` and its parents as the sandbox's user.
    pub(crate) async fn make_directory_as_user(
        &self,
        policy: &PathPolicy,
        shown: &str,
        path: &str,
    ) -> Result<()> {
        let (id, mut output, _input) = self.start_files("mkdir", path, 0, policy, false).await?;
        let mut stderr = Vec::new();
        while let Some(frame) = output.next().await {
            match frame {
                Ok(LogOutput::StdErr { message }) => stderr.extend_from_slice(&message),
                Ok(_) => {}
                Err(error) => return Err(self.failure("make a directory", error)),
            }
        }
        match self.exit_code(&id).await? {
            0 => Ok(()),
            6 => Err(SessionError::input(
                "workingDirectory",
                format!("The fork's working directory {shown} exists and is not a directory."),
            )),
            code => Err(Failure::of(code, &stderr).into_error(policy, shown, "make the directory")),
        }
    }
}
