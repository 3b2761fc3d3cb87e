//! The behaviour every sandbox must have, run against the local and the Docker sandbox.
//!
//! Docker tests run when a Docker Engine answers (at `DOCKER_HOST`, else the socket
//! `scripts/docker/start.sh` makes) and has the test image (`HARNESS_SESSIONS_TEST_IMAGE`, default
//! `harness-sessions-test:busybox`, made by `scripts/docker/build-test-image.sh`). Without them
//! they are skipped, unless `HARNESS_SESSIONS_REQUIRE_DOCKER=1`: then they fail.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::docker::{DockerSandbox, DockerSandboxOptions, Endpoint};
use super::local::{LocalSandbox, LocalSandboxOptions};
use super::{Command, ForkOptions, PortProtocol, SandboxProvider, SandboxSession};
use crate::engine::error::SessionError;

/// A sandbox implementation under test.
struct Backend {
    name: &'static str,
    make: Box<dyn Fn() -> Arc<dyn SandboxProvider> + Send + Sync>,
    /// The home directory of its sessions, when fixed.
    home: Option<String>,
    _root: Option<tempfile::TempDir>,
}

fn local_backend() -> Backend {
    let root = tempfile::tempdir().expect("a temporary folder");
    let path = root.path().to_path_buf();
    Backend {
        name: "local",
        make: Box::new(move || {
            Arc::new(
                LocalSandbox::new(LocalSandboxOptions {
                    root: path.clone(),
                    ports: vec![4000],
                    ..LocalSandboxOptions::default()
                })
                .expect("valid options"),
            )
        }),
        home: None,
        _root: Some(root),
    }
}

pub(super) fn test_image() -> String {
    std::env::var("HARNESS_SESSIONS_TEST_IMAGE")
        .unwrap_or_else(|_| "harness-sessions-test:busybox".to_owned())
}

/// The Docker endpoint of the tests: `DOCKER_HOST`, else the socket of scripts/docker/start.sh.
pub(super) fn test_docker_host() -> Option<String> {
    if let Ok(host) = std::env::var("DOCKER_HOST") {
        return Some(host);
    }
    let socket = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/docker/docker.sock");
    std::path::Path::new(socket)
        .exists()
        .then(|| format!("unix://{socket}"))
}

/// Whether Docker tests can run; panics when they must and cannot.
pub(super) async fn docker_ready() -> bool {
    let required = std::env::var("HARNESS_SESSIONS_REQUIRE_DOCKER").is_ok_and(|value| value == "1");
    let problem = match Endpoint::parse(test_docker_host().as_deref()).and_then(|endpoint| endpoint.connect()) {
        Err(error) => Some(error.to_string()),
        Ok(docker) => match docker.ping().await {
            Err(error) => Some(format!("the Docker Engine does not answer: {error}")),
            Ok(_) => match docker.inspect_image(&test_image()).await {
                Err(error) => Some(format!(
                    "the test image {} is missing ({error}): run scripts/docker/build-test-image.sh",
                    test_image()
                )),
                Ok(_) => None,
            },
        },
    };
    match problem {
        None => true,
        Some(problem) if required => panic!("HARNESS_SESSIONS_REQUIRE_DOCKER=1 but {problem}"),
        Some(problem) => {
            eprintln!("skipping a Docker sandbox test: {problem}");
            false
        }
    }
}

pub(super) fn docker_options() -> DockerSandboxOptions {
    DockerSandboxOptions {
        image: test_image(),
        host: test_docker_host(),
        name_prefix: "hs-test-".into(),
        ..DockerSandboxOptions::default()
    }
}

async fn docker_backend() -> Option<Backend> {
    if !docker_ready().await {
        return None;
    }
    Some(Backend {
        name: "docker",
        make: Box::new(|| Arc::new(DockerSandbox::new(docker_options()).expect("valid options"))),
        home: Some("/home/sandbox".into()),
        _root: None,
    })
}

pub(super) fn unique(name: &str) -> String {
    format!("{name}-{:08x}", super::view::random_u64() as u32)
}

async fn run(session: &Arc<dyn SandboxSession>, command: &str) -> super::CommandOutput {
    session
        .run(Command::new(command))
        .await
        .expect("the command runs")
}

fn assert_input_error(result: Result<impl std::fmt::Debug, SessionError>, path: &str, words: &str) {
    match result {
        Err(SessionError::Input { path: at, message }) => {
            assert_eq!(at, path, "{message}");
            assert!(message.contains(words), "{message:?} should say {words:?}");
        }
        other => panic!("{path}: expected an input error saying {words:?}, got {other:?}"),
    }
}

async fn lifecycle(backend: Backend) {
    let provider = (backend.make)();
    let id = unique("life");
    let session = provider.create(Some(&id)).await.expect("created");
    assert!(session.default_working_directory().starts_with('/'));
    let output = run(&session, "echo ready; pwd").await;
    assert_eq!(output.exit_code, 0);
    assert_eq!(
        output.stdout,
        format!("ready\n{}\n", session.default_working_directory())
    );
    session
        .write_text("kept.txt", "across a stop")
        .await
        .expect("written");
    assert!(
        matches!(provider.create(Some(&id)).await, Err(SessionError::Host { message, .. }) if message.contains("already exists")),
        "a second create of the same session is refused"
    );
    session.stop().await.expect("stopped");
    session.stop().await.expect("stop is idempotent");
    assert!(
        session.run(Command::new("true")).await.is_err(),
        "a stopped sandbox runs nothing"
    );

    // A fresh provider, as a new process would have, finds it by the session id.
    let fresh = (backend.make)();
    let resumed = fresh.resume(&id).await.expect("resumed");
    assert_eq!(resumed.id(), session.id());
    assert_eq!(
        resumed.default_working_directory(),
        session.default_working_directory()
    );
    assert_eq!(
        resumed
            .read_text("kept.txt")
            .await
            .expect("read")
            .as_deref(),
        Some("across a stop")
    );
    assert_eq!(run(&resumed, "cat kept.txt").await.stdout, "across a stop");

    resumed.destroy().await.expect("destroyed");
    resumed.destroy().await.expect("destroy is idempotent");
    assert!(fresh.find(&id).await.expect("looked up").is_none());
    match fresh.resume(&id).await {
        Err(SessionError::Host { message, .. }) => {
            assert!(message.contains("No sandbox"), "{message}")
        }
        Err(other) => panic!("{}: {other:?}", backend.name),
        Ok(_) => panic!("{}: a destroyed sandbox resumed", backend.name),
    }
    assert!(session.run(Command::new("true")).await.is_err());
}

async fn exec(backend: Backend) {
    let provider = (backend.make)();
    let session = provider
        .create(Some(&unique("exec")))
        .await
        .expect("created");
    let output = session
        .run(
            Command::new("echo out; echo err >&2; echo \"$GREETING\"; exit 3")
                .with_env("GREETING", "hello there"),
        )
        .await
        .expect("ran");
    assert_eq!(
        output,
        super::CommandOutput {
            exit_code: 3,
            stdout: "out\nhello there\n".into(),
            stderr: "err\n".into()
        }
    );
    assert!(!run(&session, "printf %s \"$HOME\"").await.stdout.is_empty());
    if let Some(home) = &backend.home {
        assert_eq!(&run(&session, "printf %s \"$HOME\"").await.stdout, home);
    }
    session
        .run(Command::new("mkdir -p sub/dir"))
        .await
        .expect("mkdir");
    let inside = session
        .run(Command::new("pwd").in_directory("sub/dir"))
        .await
        .expect("ran");
    assert_eq!(
        inside.stdout.trim(),
        format!("{}/sub/dir", session.default_working_directory())
    );
    assert!(matches!(
        session
            .run(Command::new("pwd").in_directory("/no/such/dir"))
            .await,
        Err(SessionError::Input { .. })
    ));
    assert!(matches!(
        session.run(Command::new(" ")).await,
        Err(SessionError::Input { .. })
    ));

    // Output streams while the command runs, in chunks.
    let mut process = session
        .spawn(Command::new("echo first; sleep 1; echo second"))
        .await
        .expect("spawned");
    assert!(process.pid.is_some());
    let started = Instant::now();
    let first = process.stdout.read().await.expect("a first chunk");
    assert_eq!(&first[..], b"first\n");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "the first line came before the command ended"
    );
    assert_eq!(
        process.collect().await.expect("collected").stdout,
        "second\n"
    );

    // A long command is killed with what it started, at once.
    let process = session
        .spawn(Command::new("sleep 30 & sleep 30; echo never"))
        .await
        .expect("spawned");
    let control = process.control.clone();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    control.kill().await.expect("killed");
    let status = control.wait().await.expect("ended");
    assert!(status.killed);
    assert_ne!(status.code, 0);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the kill took {:?}",
        started.elapsed()
    );
    let output = process.collect().await.expect("collected");
    assert_eq!(output.stdout, "");
    let left = run(
        &session,
        "ps -o pid,comm 2>/dev/null | grep -c 'sleep' || true",
    )
    .await;
    if backend.name == "docker" {
        // Only the keep-alive sleep of the container remains.
        assert!(
            left.stdout.trim().parse::<u32>().unwrap_or(0) <= 1,
            "{}",
            left.stdout
        );
    }
    control.kill().await.expect("kill is idempotent");
    session.destroy().await.expect("destroyed");
}

async fn files(backend: Backend) {
    let provider = (backend.make)();
    let session = provider
        .create(Some(&unique("files")))
        .await
        .expect("created");
    let wd = session.default_working_directory().to_owned();
    assert_eq!(session.read_text("missing.txt").await.expect("read"), None);
    assert_eq!(
        session.read_bytes("no/such/dir/file").await.expect("read"),
        None
    );
    session
        .write_text("a/b/c.txt", "nested\n")
        .await
        .expect("written");
    assert_eq!(
        session
            .read_text(&format!("{wd}/a/b/c.txt"))
            .await
            .expect("read")
            .as_deref(),
        Some("nested\n")
    );
    assert_eq!(
        run(&session, "cat a/b/c.txt; ls -ld a/b | cut -c1-10")
            .await
            .stdout,
        "nested\ndrwxr-xr-x\n"
    );
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    session
        .write_bytes("bin/all.bin", bytes.clone())
        .await
        .expect("written");
    assert_eq!(
        session.read_bytes("bin/all.bin").await.expect("read"),
        Some(bytes.clone())
    );
    assert_eq!(
        run(&session, "wc -c < bin/all.bin").await.stdout.trim(),
        "300000"
    );
    session
        .write_text("a/b/c.txt", "replaced")
        .await
        .expect("overwritten");
    assert_eq!(
        session
            .read_text("a/b/c.txt")
            .await
            .expect("read")
            .as_deref(),
        Some("replaced")
    );
    // Written files belong to the user commands run as.
    assert_eq!(
        run(&session, "echo more >> a/b/c.txt && cat a/b/c.txt")
            .await
            .stdout,
        "replacedmore\n"
    );
    // The home directory is one of the sandbox's directories.
    let home = run(&session, "printf %s \"$HOME\"").await.stdout;
    session
        .write_text(&format!("{home}/.config/x.json"), "{}")
        .await
        .expect("written in home");
    assert_eq!(run(&session, "cat ~/.config/x.json").await.stdout, "{}");

    assert_input_error(session.read_text("../outside").await, "../outside", "`..`");
    assert_input_error(
        session.write_text("a/../../x", "x").await,
        "a/../../x",
        "`..`",
    );
    assert_input_error(
        session.read_text("/etc/passwd").await,
        "/etc/passwd",
        "outside",
    );
    assert_input_error(
        session.write_text("/etc/evil", "x").await,
        "/etc/evil",
        "outside",
    );
    assert_input_error(session.read_text("a").await, "a", "directory");

    run(&session, "ln -s /etc out && ln -s /etc/passwd pw && ln -s a/b/c.txt alias && ln -s ../../../../../../etc/hostname rel").await;
    assert_input_error(
        session.read_text("out/passwd").await,
        "out/passwd",
        "symbolic link",
    );
    assert_input_error(
        session.write_text("out/evil", "x").await,
        "out/evil",
        "symbolic link",
    );
    assert_input_error(session.read_text("pw").await, "pw", "symbolic link");
    assert_input_error(session.write_text("pw", "x").await, "pw", "symbolic link");
    assert_input_error(session.read_text("rel").await, "rel", "symbolic link");
    let untouched = run(&session, "head -c 5 /etc/passwd").await.stdout;
    assert_eq!(untouched.len(), 5);
    // A link that stays inside is followed.
    assert_eq!(
        session.read_text("alias").await.expect("read").as_deref(),
        Some("replacedmore\n")
    );
    // A pipe planted at a path is refused at once, never waited on.
    run(&session, "mkfifo pipe").await;
    let read = tokio::time::timeout(Duration::from_secs(60), session.read_text("pipe"))
        .await
        .expect("the read of a pipe returns");
    assert_input_error(read, "pipe", "pipe");
    session.destroy().await.expect("destroyed");
}

async fn fork(backend: Backend) {
    let provider = (backend.make)();
    let session = provider
        .create(Some(&unique("fork")))
        .await
        .expect("created");
    let wd = session.default_working_directory().to_owned();
    let view = session
        .fork(ForkOptions {
            ports: vec![4000],
            working_directory: Some("views/one".into()),
        })
        .await;
    // A container without a network serves a fork's ports through the host, as any other.
    let view = view.expect("forked");
    assert_eq!(view.id(), session.id());
    assert_eq!(view.default_working_directory(), format!("{wd}/views/one"));
    assert_eq!(
        run(&view, "pwd").await.stdout.trim(),
        format!("{wd}/views/one")
    );
    view.write_text("mine.txt", "view").await.expect("written");
    assert_eq!(
        session
            .read_text("views/one/mine.txt")
            .await
            .expect("read")
            .as_deref(),
        Some("view")
    );
    if backend.name == "local" {
        // The session holds 4000 already: the fork is handed another port, free.
        let port = view.ports()[0];
        assert_ne!(port, 4000, "a port is held by one view at most");
        assert_eq!(
            view.port_endpoint(port, PortProtocol::Ws)
                .map(|endpoint| endpoint.url),
            Ok(format!("ws://127.0.0.1:{port}"))
        );
    }
    assert!(view.port_endpoint(4999, PortProtocol::Http).is_err());
    let other = session.fork(ForkOptions::default()).await.expect("forked");
    assert_ne!(
        other.default_working_directory(),
        view.default_working_directory()
    );
    assert!(other
        .default_working_directory()
        .starts_with(&format!("{wd}/fork-")));

    // Stopping a view ends its own processes, not the sandbox's.
    let theirs = session
        .spawn(Command::new("sleep 30"))
        .await
        .expect("spawned");
    let mine = view.spawn(Command::new("sleep 30")).await.expect("spawned");
    tokio::time::sleep(Duration::from_millis(200)).await;
    view.stop().await.expect("view stopped");
    tokio::time::timeout(Duration::from_secs(5), mine.control.wait())
        .await
        .expect("the view's process ended")
        .expect("an exit status");
    assert!(
        theirs.control.status().is_none(),
        "the sandbox's own process still runs"
    );
    assert_eq!(run(&session, "echo alive").await.stdout, "alive\n");
    theirs.control.kill().await.expect("killed");

    view.destroy().await.expect("view destroyed");
    assert_eq!(
        session.read_text("views/one/mine.txt").await.expect("read"),
        None
    );
    assert_input_error(
        session
            .fork(ForkOptions {
                ports: vec![],
                working_directory: Some("/etc".into()),
            })
            .await
            .map(|_| ()),
        "/etc",
        "outside",
    );
    session.destroy().await.expect("destroyed");
}

macro_rules! for_both_backends {
    ($($case:ident),* $(,)?) => {
        mod local_sandbox {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::local_backend()).await;
                }
            )*
        }
        mod docker_sandbox {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    if let Some(backend) = super::docker_backend().await {
                        super::$case(backend).await;
                    }
                }
            )*
        }
    };
}

for_both_backends!(lifecycle, exec, files, fork);
