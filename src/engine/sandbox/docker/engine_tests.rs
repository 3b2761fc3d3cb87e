//! What only the Docker sandbox does, checked on a real engine: the container's security
//! settings and limits as Docker and the kernel apply them, ports on host networking, errors in
//! words, and (ignored, run on demand) the timings of a session's lifecycle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, InspectContainerOptions, RemoveContainerOptionsBuilder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{AllowedHost, DockerSandbox, DockerSandboxOptions, Endpoint, NetworkMode};
use crate::engine::error::SessionError;
use crate::engine::sandbox::conformance::{docker_options, docker_ready, test_docker_host, unique};
use crate::engine::sandbox::{Command, ForkOptions, PortProtocol, SandboxProvider, SandboxSession};

fn docker() -> bollard::Docker {
    Endpoint::parse(test_docker_host().as_deref())
        .and_then(|endpoint| endpoint.connect())
        .expect("a Docker client")
}

async fn output(session: &Arc<dyn SandboxSession>, command: &str) -> String {
    let output = session
        .run(Command::new(command))
        .await
        .expect("the command runs");
    assert_eq!(output.exit_code, 0, "{command}: {}", output.stderr);
    output.stdout.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_settings_and_limits_are_applied() {
    if !docker_ready().await {
        return;
    }
    let provider = DockerSandbox::new(DockerSandboxOptions {
        memory_bytes: 256 * 1024 * 1024,
        cpus: 0.5,
        pids_limit: 64,
        env: vec![("SANDBOX_FLAVOUR".into(), "test".into())],
        ..docker_options()
    })
    .expect("valid options");
    let id = unique("secure");
    let session = provider.create(Some(&id)).await.expect("created");
    let name = provider.container_name(&id);
    assert_eq!(session.id(), name);

    let inspected = docker()
        .inspect_container(&name, None::<InspectContainerOptions>)
        .await
        .expect("inspected");
    let config = inspected.config.expect("a config");
    assert_eq!(config.user.as_deref(), Some("1000:1000"));
    assert_eq!(
        config
            .labels
            .unwrap_or_default()
            .get(super::LABEL_SESSION)
            .map(String::as_str),
        Some(id.as_str())
    );
    let host = inspected.host_config.expect("a host config");
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
    assert_eq!(
        host.security_opt,
        Some(vec!["no-new-privileges".to_owned()])
    );
    assert_eq!(host.memory, Some(256 * 1024 * 1024));
    assert_eq!(host.memory_swap, Some(256 * 1024 * 1024));
    assert_eq!(host.nano_cpus, Some(500_000_000));
    assert_eq!(host.pids_limit, Some(64));
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.init, Some(true));
    assert_ne!(host.privileged, Some(true));

    // As the kernel sees it, from inside.
    assert_eq!(output(&session, "id -u; id -g").await, "1000\n1000");
    assert_eq!(
        output(&session, "grep CapEff /proc/self/status | tr -s '\\t ' ' '").await,
        "CapEff: 0000000000000000"
    );
    assert_eq!(
        output(
            &session,
            "grep NoNewPrivs /proc/self/status | tr -s '\\t ' ' '"
        )
        .await,
        "NoNewPrivs: 1"
    );
    assert_eq!(
        output(
            &session,
            "cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max"
        )
        .await,
        "64"
    );
    assert_eq!(
        output(&session, "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max").await,
        (256 * 1024 * 1024).to_string()
    );
    assert_eq!(output(&session, "ls /sys/class/net").await, "lo");
    assert_eq!(output(&session, "echo $SANDBOX_FLAVOUR").await, "test");
    let denied = session
        .run(Command::new("touch /etc/x"))
        .await
        .expect("ran");
    assert_ne!(denied.exit_code, 0, "the user may not write in /etc");
    assert!(session.description().contains("non-root user 1000:1000"));
    assert!(session.description().contains("Network: none"));
    assert!(matches!(
        session.port_endpoint(4000, PortProtocol::Http),
        Err(SessionError::Input { message, .. }) if message.contains("exposes no port")
    ));
    session.destroy().await.expect("destroyed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_are_reached_on_loopback_with_host_networking() {
    if !docker_ready().await {
        return;
    }
    let free_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .expect("a free port")
    };
    let (port, fork_port) = (free_port(), free_port());
    let provider = DockerSandbox::new(DockerSandboxOptions {
        ports: vec![port],
        network: Some(NetworkMode::Host),
        ..docker_options()
    })
    .expect("valid options");
    assert_eq!(provider.network, NetworkMode::Host);
    let session = provider
        .create(Some(&unique("ports")))
        .await
        .expect("created");
    assert_eq!(session.ports(), &[port]);
    let endpoint = session
        .port_endpoint(port, PortProtocol::Http)
        .expect("an endpoint");
    assert_eq!(endpoint.url, format!("http://127.0.0.1:{port}"));

    session
        .write_text("site/index.html", "served from the sandbox")
        .await
        .expect("written");
    let server = session
        .spawn(Command::new(format!(
            "exec httpd -f -p 127.0.0.1:{port} -h site"
        )))
        .await
        .expect("spawned");
    let body = fetch(port).await;
    assert!(body.ends_with("served from the sandbox"), "{body}");

    // A fork has its own port; its server stops with it.
    let view = session
        .fork(ForkOptions {
            ports: vec![fork_port],
            working_directory: Some("views/a".into()),
        })
        .await
        .expect("forked");
    assert_eq!(view.ports(), &[fork_port]);
    view.write_text("index.html", "the fork")
        .await
        .expect("written");
    let _fork_server = view
        .spawn(Command::new(format!(
            "exec httpd -f -p 127.0.0.1:{fork_port} -h ."
        )))
        .await
        .expect("spawned");
    assert!(fetch(fork_port).await.ends_with("the fork"));
    view.stop().await.expect("stopped");
    // The killed server lets go of its port as soon as the kernel has reaped it.
    let mut closed = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", fork_port))
            .await
            .is_err()
        {
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(closed, "the fork's server still answers after stop()");
    assert!(
        fetch(port).await.ends_with("served from the sandbox"),
        "the sandbox's server still runs"
    );

    server.control.kill().await.expect("killed");
    session.destroy().await.expect("destroyed");
}

/// Runs `script` in `session` and returns its exit code and its output, both streams.
async fn attempt(session: &Arc<dyn SandboxSession>, script: &str) -> (i32, String) {
    let output = session.run(Command::new(script)).await.expect("ran");
    (
        output.exit_code,
        format!("{}{}", output.stdout, output.stderr),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_are_forwarded_into_a_container_without_a_network() {
    if !docker_ready().await {
        return;
    }
    // A server of the test on the host's loopback: what a sandbox must not reach.
    let host_server = std::net::TcpListener::bind("127.0.0.1:0").expect("a host server");
    let host_port = host_server.local_addr().expect("its address").port();
    let provider = DockerSandbox::new(DockerSandboxOptions {
        ports: vec![41011],
        ..docker_options()
    })
    .expect("valid options");
    assert_eq!(provider.network, NetworkMode::None);
    let (first, second) = (unique("fwd-a"), unique("fwd-b"));
    let a = provider.create(Some(&first)).await.expect("created");
    let b = provider.create(Some(&second)).await.expect("created");
    assert_eq!(a.ports(), &[41011]);
    assert_eq!(b.ports(), &[41011]);
    let url_a = a
        .port_endpoint(41011, PortProtocol::Http)
        .expect("an endpoint")
        .url;
    let url_b = b
        .port_endpoint(41011, PortProtocol::Http)
        .expect("an endpoint")
        .url;
    assert_ne!(
        url_a, url_b,
        "two sandboxes are reached on different host ports"
    );
    let port_of = |url: &str| -> u16 {
        url.rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("a port")
    };
    for (session, text) in [(&a, "served from a"), (&b, "served from b")] {
        session
            .write_text("site/index.html", text)
            .await
            .expect("written");
        // `httpd` without `-f` makes itself a daemon: it leaves the command's process group.
        let (code, said) = attempt(session, "httpd -p 41011 -h site").await;
        assert_eq!(code, 0, "{said}");
    }
    assert!(fetch(port_of(&url_a)).await.ends_with("served from a"));
    assert!(fetch(port_of(&url_b)).await.ends_with("served from b"));

    // From inside: the host's loopback, the other sandbox's host port and the metadata address
    // are out of reach (refused on the container's own loopback, or no route at all).
    for target in [
        format!("127.0.0.1 {host_port}"),
        format!("127.0.0.1 {}", port_of(&url_b)),
        "169.254.169.254 80".to_owned(),
    ] {
        let (code, said) = attempt(&a, &format!("nc -w 3 {target} </dev/null")).await;
        assert_ne!(code, 0, "{target} was reached from the sandbox: {said}");
        assert!(
            said.contains("refused") || said.contains("unreachable"),
            "{target}: {said}"
        );
    }
    assert_eq!(output(&a, "ls /sys/class/net").await, "lo");
    assert!(a.description().contains("Network: none; ports 41011"));

    // A fork's daemon, left running, ends when the fork is stopped; its port is free again.
    let view = a
        .fork(ForkOptions {
            ports: vec![41012],
            working_directory: Some("views/a".into()),
        })
        .await
        .expect("forked");
    let fork_url = view
        .port_endpoint(41012, PortProtocol::Http)
        .expect("an endpoint")
        .url;
    view.write_text("index.html", "the fork")
        .await
        .expect("written");
    let (code, said) = attempt(
        &view,
        "setsid httpd -p 41012 -h . </dev/null >/dev/null 2>&1 &",
    )
    .await;
    assert_eq!(code, 0, "{said}");
    assert!(fetch(port_of(&fork_url)).await.ends_with("the fork"));
    view.stop().await.expect("stopped");
    let (code, said) = attempt(
        &a,
        "echo 'GET / HTTP/1.0
' | nc -w 3 127.0.0.1 41012",
    )
    .await;
    assert_ne!(code, 0, "the fork's daemon outlived it: {said}");
    assert!(
        fetch(port_of(&url_a)).await.ends_with("served from a"),
        "the sandbox's own server still runs"
    );
    drop(host_server);
    a.destroy().await.expect("destroyed");
    b.destroy().await.expect("destroyed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_are_the_only_ways_out() {
    if !docker_ready().await {
        return;
    }
    use std::io::Write;
    use std::net::ToSocketAddrs;
    // Two servers of the test on the host's loopback: one allowed, one not.
    let serve = |greeting: &'static str| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a server");
        let port = listener.local_addr().expect("its address").port();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.write_all(greeting.as_bytes());
            }
        });
        port
    };
    let (allowed, refused) = (serve("ALLOWED SERVICE"), serve("OTHER SERVICE"));
    // This host's own name, when it resolves to its loopback (as most do), stands for a named
    // host reached through the proxy.
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let named = (name.as_str(), allowed)
        .to_socket_addrs()
        .is_ok_and(|mut addresses| addresses.any(|address| address.ip().is_loopback()))
        && !name.is_empty()
        && name != "localhost";
    let mut hosts =
        vec![AllowedHost::parse(&format!("127.0.0.1:{allowed}"), "allowedHosts").expect("valid")];
    if named {
        hosts
            .push(AllowedHost::parse(&format!("{name}:{allowed}"), "allowedHosts").expect("valid"));
    } else {
        hosts.push(AllowedHost::parse("example.invalid", "allowedHosts").expect("valid"));
    }
    let provider = DockerSandbox::new(DockerSandboxOptions {
        allowed_hosts: hosts,
        ..docker_options()
    })
    .expect("valid options");
    let session = provider
        .create(Some(&unique("egress")))
        .await
        .expect("created");
    // The allowed loopback port, forwarded into the container's own loopback.
    let (code, said) = attempt(&session, &format!("nc -w 3 127.0.0.1 {allowed} </dev/null")).await;
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("ALLOWED SERVICE"), "{said}");
    let (code, said) = attempt(&session, &format!("nc -w 3 127.0.0.1 {refused} </dev/null")).await;
    assert_ne!(code, 0, "a port not listed was reached: {said}");
    // The proxy: a CONNECT to a host not listed is refused; to a listed one, tunnelled.
    let connect = |target: String| {
        format!("printf 'CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n' | nc -w 3 127.0.0.1 3128")
    };
    let (_, said) = attempt(&session, &connect(format!("127.0.0.1:{refused}"))).await;
    assert!(said.contains("403") && !said.contains("OTHER"), "{said}");
    let (_, said) = attempt(&session, &connect("example.com:443".into())).await;
    assert!(said.contains("403"), "{said}");
    assert_eq!(
        output(&session, "echo $HTTPS_PROXY").await,
        "http://127.0.0.1:3128"
    );
    if named {
        let (_, said) = attempt(&session, &connect(format!("{name}:{allowed}"))).await;
        assert!(said.contains("200 Connection Established"), "{said}");
        assert!(said.contains("ALLOWED SERVICE"), "{said}");
    }
    session.destroy().await.expect("destroyed");
}

/// `GET /` on 127.0.0.1:`port`, retried while the server starts.
async fn fetch(port: u16) -> String {
    for _ in 0..50 {
        if let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            let _ = stream.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").await;
            let mut response = String::new();
            let _ = stream.read_to_string(&mut response).await;
            if !response.is_empty() {
                return response;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing answered on 127.0.0.1:{port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_say_what_failed() {
    if !docker_ready().await {
        return;
    }
    let message = |result: Result<Arc<dyn SandboxSession>, SessionError>| match result {
        Err(error) => error.to_string(),
        Ok(_) => panic!("expected a failure"),
    };

    let nowhere = DockerSandbox::new(DockerSandboxOptions {
        host: Some("unix:///nonexistent/docker.sock".into()),
        ..docker_options()
    })
    .expect("valid options");
    let said = message(nowhere.create(Some("x")).await);
    assert!(
        said.starts_with("No Docker Engine at unix:///nonexistent/docker.sock"),
        "{said}"
    );

    let no_image = DockerSandbox::new(DockerSandboxOptions {
        image: "harness-sessions-test:does-not-exist".into(),
        ..docker_options()
    })
    .expect("valid options");
    let said = message(no_image.create(Some(&unique("noimage"))).await);
    assert!(
        said.contains("The image harness-sessions-test:does-not-exist is not on the Docker Engine"),
        "{said}"
    );

    let provider = DockerSandbox::new(docker_options()).expect("valid options");
    let id = unique("gone");
    let session = provider.create(Some(&id)).await.expect("created");
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    docker()
        .remove_container(&provider.container_name(&id), Some(options))
        .await
        .expect("removed behind its back");
    let said = session
        .run(Command::new("true"))
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(said.contains("is gone"), "{said}");
    let said = session
        .write_text("x", "y")
        .await
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(said.contains("is gone"), "{said}");
    let said = message(provider.resume(&id).await);
    assert!(
        said.contains(&format!(
            "No sandbox container {}",
            provider.container_name(&id)
        )),
        "{said}"
    );
    session
        .stop()
        .await
        .expect("stopping a gone container is fine");
    session
        .destroy()
        .await
        .expect("destroying a gone container is fine");

    // A container of the same name that is not a sandbox is left alone.
    let foreign = unique("foreign");
    docker()
        .create_container(
            Some(
                CreateContainerOptionsBuilder::default()
                    .name(&provider.container_name(&foreign))
                    .build(),
            ),
            ContainerCreateBody {
                image: Some(super::super::conformance::test_image()),
                cmd: Some(vec!["true".into()]),
                ..ContainerCreateBody::default()
            },
        )
        .await
        .expect("created by hand");
    let said = message(provider.resume(&foreign).await);
    assert!(said.contains("was not made by harness-sessions"), "{said}");
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    let _ = docker()
        .remove_container(&provider.container_name(&foreign), Some(options))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_finds_the_shared_sandbox_again() {
    if !docker_ready().await {
        return;
    }
    let provider = DockerSandbox::new(docker_options()).expect("valid options");
    let name = unique("shared");
    let first = provider.open(&name).await.expect("created");
    first.write_text("mark", "1").await.expect("written");
    let again = DockerSandbox::new(docker_options())
        .expect("valid options")
        .open(&name)
        .await
        .expect("found");
    assert_eq!(
        again.read_text("mark").await.expect("read").as_deref(),
        Some("1")
    );
    again.destroy().await.expect("destroyed");
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Prints the median of 10 of each step of a session's life. Run on demand:
/// `cargo test --no-default-features docker_timings -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a test: run it on demand"]
async fn docker_timings() {
    if !docker_ready().await {
        return;
    }
    let (mut ready, mut stop, mut resume, mut fork, mut run, mut destroy) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for _ in 0..10 {
        let provider = DockerSandbox::new(docker_options()).expect("valid options");
        let id = unique("timing");
        let started = Instant::now();
        let session = provider.create(Some(&id)).await.expect("created");
        ready.push(started.elapsed());
        let started = Instant::now();
        session.run(Command::new("true")).await.expect("ran");
        run.push(started.elapsed());
        let started = Instant::now();
        session.stop().await.expect("stopped");
        stop.push(started.elapsed());
        let fresh = DockerSandbox::new(docker_options()).expect("valid options");
        let started = Instant::now();
        let resumed = fresh.resume(&id).await.expect("resumed");
        resume.push(started.elapsed());
        let started = Instant::now();
        let _view = resumed
            .fork(ForkOptions {
                ports: Vec::new(),
                working_directory: Some("views/s1".into()),
            })
            .await
            .expect("forked");
        fork.push(started.elapsed());
        let started = Instant::now();
        resumed.destroy().await.expect("destroyed");
        destroy.push(started.elapsed());
    }
    println!(
        "docker sandbox, median of 10: create→ready {:?}, run `true` {:?}, stop {:?}, resume (fresh client) {:?}, fork {:?}, destroy {:?}",
        median(ready),
        median(run),
        median(stop),
        median(resume),
        median(fork),
        median(destroy)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_container_is_reclaimed_by_create() {
    if !docker_ready().await {
        return;
    }
    let id = unique("leftover");
    let provider = DockerSandbox::new(docker_options()).expect("valid options");
    let first = provider.create(Some(&id)).await.expect("created");
    first
        .write_text("old.txt", "left behind")
        .await
        .expect("written");
    // Held by this process: a second create is refused.
    assert!(
        matches!(provider.create(Some(&id)).await, Err(SessionError::Host { message, .. }) if message.contains("already exists")),
        "a container this process holds is not reclaimed"
    );
    // What a crash leaves: the container, running, and nothing of this process holding it.
    let name = first.id().to_owned();
    drop(first);
    let fresh = DockerSandbox::new(docker_options()).expect("valid options");
    let again = fresh
        .create(Some(&id))
        .await
        .expect("the leftover reclaimed");
    assert_eq!(again.id(), name);
    assert_eq!(again.read_text("old.txt").await.expect("read"), None);
    again.destroy().await.expect("destroyed");

    // A container of that name not made for this session is never reclaimed.
    let foreign = unique("foreign");
    let foreign_name = fresh.container_name(&foreign);
    let docker = docker();
    docker
        .create_container(
            Some(
                CreateContainerOptionsBuilder::default()
                    .name(&foreign_name)
                    .build(),
            ),
            ContainerCreateBody {
                image: Some(docker_options().image),
                cmd: Some(vec!["true".into()]),
                ..ContainerCreateBody::default()
            },
        )
        .await
        .expect("a foreign container");
    let refused = fresh.create(Some(&foreign)).await;
    let _ = docker
        .remove_container(
            &foreign_name,
            Some(RemoveContainerOptionsBuilder::default().force(true).build()),
        )
        .await;
    assert!(
        matches!(refused, Err(SessionError::Host { message, .. }) if message.contains("already exists")),
        "a foreign container is left alone"
    );
}

/// The bytes `path` takes on its disk, its files' included.
fn allocated(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            total += allocated(&entry.path());
        }
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_bytes_bound_what_a_sandbox_writes() {
    if !docker_ready().await {
        return;
    }
    let endpoint = Endpoint::parse(test_docker_host().as_deref()).expect("an endpoint");
    if let Some(why) = super::disk::unavailable(&endpoint) {
        // Not root, or no loop devices: the bound is refused when asked for.
        let provider = DockerSandbox::new(DockerSandboxOptions {
            disk_bytes: Some(64 << 20),
            ..docker_options()
        })
        .expect("valid options");
        let refused = provider.create(Some(&unique("nodisk"))).await;
        assert!(
            matches!(&refused, Err(SessionError::Host { .. })),
            "{why}: {:?}",
            refused.map(|_| ())
        );
        return;
    }
    // An image no container names, older than any create under way: swept at the first create.
    let orphan =
        super::disk::directory().join(format!("{}-0123456789abcdef.img", unique("hs-test-orphan")));
    std::fs::create_dir_all(super::disk::directory()).expect("the disk folder");
    let file = std::fs::File::create(&orphan).expect("an orphan image");
    file.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .expect("backdated");
    drop(file);
    let provider = DockerSandbox::new(DockerSandboxOptions {
        disk_bytes: Some(64 << 20),
        ..docker_options()
    })
    .expect("valid options");
    let id = unique("disk");
    let session = provider.create(Some(&id)).await.expect("created");
    let name = provider.container_name(&id);
    let inspected = docker()
        .inspect_container(&name, None::<InspectContainerOptions>)
        .await
        .expect("inspected");
    let disk = inspected
        .config
        .as_ref()
        .and_then(|config| config.labels.as_ref())
        .and_then(|labels| labels.get(super::LABEL_DISK))
        .and_then(|image| super::disk::Disk::from_label(image))
        .expect("a label naming the disk image");
    assert!(disk.image.is_file(), "no image at {}", disk.image.display());
    assert!(!orphan.exists(), "the orphan image was not swept");
    let upper = inspected
        .graph_driver
        .and_then(|driver| driver.data.get("UpperDir").cloned())
        .map(std::path::PathBuf::from)
        .expect("an overlay2 upper layer");
    let layer_before = allocated(&upper);

    // 100 MiB into a 64 MiB bound: ENOSPC, in the working directory and in /tmp alike.
    for target in ["big", "/tmp/big", "$HOME/big"] {
        let written = session
            .run(Command::new(format!(
                "dd if=/dev/zero of={target} bs=1M count=100 2>&1; code=$?; rm -f {target}; exit $code"
            )))
            .await
            .expect("dd runs");
        assert_ne!(written.exit_code, 0, "{target}: {}", written.stdout);
        assert!(
            written.stdout.contains("No space left on device"),
            "{target}: {}",
            written.stdout
        );
    }
    // The host's disk took at most the bound: the image (sparse) and nothing in the layer.
    let image = allocated(&disk.image);
    assert!(image <= 64 << 20, "the image takes {image} bytes");
    let layer_after = allocated(&upper);
    assert!(
        layer_after < layer_before + (4 << 20),
        "the container's layer grew from {layer_before} to {layer_after} bytes"
    );

    // Its files survive a stop and a start, and a host that lost the mount (a reboot).
    assert_eq!(
        output(
            &session,
            "echo kept > kept.txt && echo k2 > $HOME/k2 && cat kept.txt"
        )
        .await,
        "kept"
    );
    docker()
        .stop_container(
            &name,
            None::<bollard::query_parameters::StopContainerOptions>,
        )
        .await
        .expect("stopped");
    drop(session);
    let resumed = provider
        .find(&id)
        .await
        .expect("found")
        .expect("still there");
    assert_eq!(output(&resumed, "cat kept.txt $HOME/k2").await, "kept\nk2");
    docker()
        .stop_container(
            &name,
            None::<bollard::query_parameters::StopContainerOptions>,
        )
        .await
        .expect("stopped");
    drop(resumed);
    let unmounted = std::process::Command::new("umount")
        .arg(&disk.mount)
        .status()
        .expect("umount runs");
    assert!(unmounted.success());
    let resumed = provider
        .find(&id)
        .await
        .expect("found")
        .expect("still there");
    assert_eq!(output(&resumed, "cat kept.txt").await, "kept");

    // Destroy removes the image and its mount point.
    resumed.destroy().await.expect("destroyed");
    assert!(!disk.image.exists(), "the image is left");
    assert!(!disk.mount.exists(), "the mount point is left");
}
