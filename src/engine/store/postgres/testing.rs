//! For tests: a real PostgreSQL server to run against.
//!
//! `HARNESS_SESSIONS_TEST_PG_URL`, when set, names one (`scripts/test.mjs` starts one and sets
//! it). Otherwise the first test that asks starts a throwaway cluster of this test process
//! (`initdb` in a temporary folder, as the `postgres` user when run as root, on a free loopback
//! port, `fsync=off`), stopped when the process exits. With no PostgreSQL binaries on the machine
//! the tests are skipped, with the reason printed, unless `HARNESS_SESSIONS_REQUIRE_POSTGRES` is
//! `1`: then they fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use super::{PostgresStore, PostgresStoreOptions};

/// A running throwaway cluster.
pub(crate) struct Cluster {
    /// Its folder (data, socket, log).
    pub(crate) dir: PathBuf,
    /// Its port on 127.0.0.1.
    pub(crate) port: u16,
    /// The folder of the PostgreSQL binaries it was made with.
    pub(crate) bin: PathBuf,
}

impl Cluster {
    /// `postgres://postgres@127.0.0.1:<port>/postgres`, with `query` appended when not empty.
    pub(crate) fn url(&self, query: &str) -> String {
        let url = format!("postgres://postgres@127.0.0.1:{}/postgres", self.port);
        if query.is_empty() {
            url
        } else {
            format!("{url}?{query}")
        }
    }

    /// Stops the cluster at once (`pg_ctl stop -m immediate`).
    pub(crate) fn stop(&self) {
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .args(["-D"])
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// The folder of the newest PostgreSQL binaries on the machine (`/usr/lib/postgresql/<n>/bin`,
/// else `pg_config --bindir`), if any.
pub(crate) fn binaries() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return Some(bin);
    }
    let output = Command::new("pg_config").arg("--bindir").output().ok()?;
    let bin = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    bin.join("initdb").exists().then_some(bin)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `program` run as the `postgres` user when this process is root (initdb refuses root).
fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// Starts a throwaway cluster with `settings` (`-c name=value` each) and, with `ssl`, a
/// self-signed certificate for `localhost` (made by `openssl`).
///
/// # Panics
/// When the cluster cannot be made or started.
pub(crate) fn start_cluster(bin: &Path, settings: &[&str], ssl: bool) -> Cluster {
    let dir = std::env::temp_dir().join(format!(
        "hs-pg-{}-{}",
        std::process::id(),
        super::config::random_instance_id()
    ));
    std::fs::create_dir_all(&dir).expect("the cluster's folder");
    if is_root() {
        let status = Command::new("chown")
            .args(["postgres"])
            .arg(&dir)
            .status()
            .expect("chown");
        assert!(status.success(), "chown postgres {}", dir.display());
    }
    let data = dir.join("data");
    let output = as_postgres(&bin.join("initdb"))
        .args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
            "-E",
            "UTF8",
            "-D",
        ])
        .arg(&data)
        .output()
        .expect("initdb runs");
    assert!(
        output.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut options = vec![
        "-c listen_addresses=127.0.0.1".to_owned(),
        "-c fsync=off".to_owned(),
        "-c max_connections=200".to_owned(),
    ];
    if ssl {
        // An authority (`ca.crt` in the cluster's folder) and a certificate for `localhost`
        // signed by it: webpki refuses a self-signed authority as the server's own certificate.
        let script = format!(
            "set -e; cd '{dir}'; \
             openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=hs-test-ca \
               -keyout ca.key -out ca.crt 2>/dev/null; \
             openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
               -keyout '{data}/server.key' -out server.csr 2>/dev/null; \
             printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\n' > ext.cnf; \
             openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
               -extfile ext.cnf -out '{data}/server.crt' 2>/dev/null; \
             chmod 600 '{data}/server.key'",
            dir = dir.display(),
            data = data.display()
        );
        let output = as_postgres(Path::new("sh"))
            .args(["-c", &script])
            .output()
            .expect("openssl runs");
        assert!(
            output.status.success(),
            "openssl failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        options.push("-c ssl=on".to_owned());
    }
    options.extend(settings.iter().map(|setting| format!("-c {setting}")));
    for _attempt in 0..5 {
        let port = free_port();
        let output = as_postgres(&bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .args(["-w", "-t", "60", "-l"])
            .arg(dir.join("pg.log"))
            .arg("-o")
            .arg(format!(
                "-p {port} -k {} {}",
                dir.display(),
                options.join(" ")
            ))
            .arg("start")
            .output()
            .expect("pg_ctl runs");
        if output.status.success() {
            return Cluster {
                dir,
                port,
                bin: bin.to_owned(),
            };
        }
    }
    panic!(
        "the throwaway cluster did not start: {}",
        std::fs::read_to_string(dir.join("pg.log")).unwrap_or_default()
    );
}

/// The clusters this process started, stopped at its exit.
static STARTED: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

extern "C" fn stop_started() {
    let started = STARTED.lock().map(|s| s.clone()).unwrap_or_default();
    for (bin, dir) in started {
        let _ = as_postgres(&bin.join("pg_ctl"))
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Notes `cluster` to be stopped (and its folder removed) when the process exits.
pub(crate) fn stop_at_exit(cluster: &Cluster) {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        // SAFETY: `stop_started` is an `extern "C" fn()` that does not unwind across the boundary
        // (every failure in it is ignored).
        unsafe {
            libc::atexit(stop_started);
        }
    });
    if let Ok(mut started) = STARTED.lock() {
        started.push((cluster.bin.clone(), cluster.dir.clone()));
    }
}

/// The URL of the server the tests use, or `None` (a reason printed) to skip.
///
/// # Panics
/// When no server can be had and `HARNESS_SESSIONS_REQUIRE_POSTGRES` is `1`.
pub(crate) fn server_url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        if let Ok(url) = std::env::var("HARNESS_SESSIONS_TEST_PG_URL") {
            if !url.is_empty() {
                return Some(url);
            }
        }
        match binaries() {
            Some(bin) => {
                let cluster = start_cluster(&bin, &[], false);
                stop_at_exit(&cluster);
                Some(cluster.url(""))
            }
            None => {
                assert!(
                    std::env::var("HARNESS_SESSIONS_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                    "HARNESS_SESSIONS_REQUIRE_POSTGRES=1 but no PostgreSQL is here: install \
                     Debian's postgresql (node scripts/postgres.mjs install) or set \
                     HARNESS_SESSIONS_TEST_PG_URL"
                );
                None
            }
        }
    })
    .clone()
}

/// Prints why a test is skipped.
pub(crate) fn skipping(test: &str) {
    eprintln!(
        "skipping {test}: no PostgreSQL binaries here and HARNESS_SESSIONS_TEST_PG_URL unset \
         (set HARNESS_SESSIONS_REQUIRE_POSTGRES=1 to fail instead)"
    );
}

/// A schema name no other test uses: `t_<what>_<random>`.
pub(crate) fn fresh_schema(what: &str) -> String {
    let random = super::config::random_instance_id();
    let tail = &random[random.len() - 12..];
    format!("t_{what}_{tail}")
}

/// A store on the test server in a schema of its own, or `None` to skip.
pub(crate) fn options(what: &str) -> Option<PostgresStoreOptions> {
    let url = server_url()?;
    let mut options = PostgresStoreOptions::new(&url).expect("the test URL is usable");
    options.schema = fresh_schema(what);
    Some(options)
}

/// [`options`], connected and migrated.
pub(crate) async fn store(what: &str) -> Option<PostgresStore> {
    let options = options(what)?;
    Some(
        PostgresStore::connect(options)
            .await
            .expect("the test store connects"),
    )
}
