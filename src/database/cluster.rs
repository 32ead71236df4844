//! A private PostgreSQL cluster for development and tests.
//!
//! When `DATABASE_URL` is unset, Holdfast runs its own cluster from the
//! machine's PostgreSQL binaries, with its data in a git-ignored folder of the
//! project. A cluster that is already running is reused; several processes
//! starting at once agree through a file lock. Missing binaries are installed
//! from Debian's `postgresql` package when we are root on a Debian machine.

use std::fs::{self, File};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// Where the cluster lives and listens.
#[derive(Debug, Clone)]
pub struct LocalCluster {
    /// Folder holding `postgres/` (the data directory) and the logs.
    pub home: PathBuf,
    pub port: u16,
}

impl LocalCluster {
    pub fn new(home: impl Into<PathBuf>, port: u16) -> Self {
        Self {
            home: home.into(),
            port,
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.home.join("postgres")
    }

    fn log_file(&self) -> PathBuf {
        self.home.join("postgres.log")
    }

    /// URL of a database in this cluster (trust authentication on loopback).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Stop the server (fast: sessions are ended, nothing is lost). Blocking.
    pub fn stop(&self) -> anyhow::Result<()> {
        let bin = find_binaries()?;
        let status = self
            .pg_command(&bin, "pg_ctl", running_as_root())
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("cannot run pg_ctl")?;
        if !status.success() {
            bail!("PostgreSQL on port {} did not stop", self.port);
        }
        Ok(())
    }

    /// Make sure the cluster exists and is running. Blocking; call it from
    /// `spawn_blocking` in async code.
    pub fn ensure_running(&self) -> anyhow::Result<()> {
        let reachable = self.reachable();
        let this = reachable.as_ref().unwrap_or(self);
        this.ensure_running_here()
    }

    /// As root, initdb and the server run as the postgres user, who must be
    /// able to walk to the data folder. When the project sits somewhere that
    /// user cannot reach (a home folder with mode 700, say), the cluster
    /// lives in /var/tmp instead, under a name derived from the project path.
    fn reachable(&self) -> Option<LocalCluster> {
        if !running_as_root() {
            return None;
        }
        let _ = fs::create_dir_all(&self.home);
        let absolute = self.home.canonicalize().ok()?;
        if searchable_by_others(&absolute) {
            return None;
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in absolute.as_os_str().as_encoded_bytes() {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        let elsewhere = PathBuf::from(format!("/var/tmp/holdfast-{hash:016x}"));
        eprintln!(
            "holdfast: the postgres user cannot reach {}; keeping the private cluster in {}",
            absolute.display(),
            elsewhere.display()
        );
        Some(LocalCluster::new(elsewhere, self.port))
    }

    fn ensure_running_here(&self) -> anyhow::Result<()> {
        fs::create_dir_all(&self.home)
            .with_context(|| format!("cannot create {}", self.home.display()))?;
        let lock_path = self.home.join("cluster.lock");
        let lock = File::create(&lock_path)
            .with_context(|| format!("cannot create {}", lock_path.display()))?;
        // Only one process sets the cluster up; the others wait and reuse it.
        lock.lock()
            .with_context(|| format!("cannot lock {}", lock_path.display()))?;

        if self.accepts_connections() {
            return Ok(());
        }
        if self.port_taken() {
            bail!(
                "port {} is taken by a server that is not Holdfast's private cluster in {}; \
                 set HOLDFAST_PG_PORT to a free port or DATABASE_URL to that server",
                self.port,
                self.data_dir().display()
            );
        }
        let bin = find_binaries()?;
        if !self.data_dir().join("PG_VERSION").exists() {
            self.init(&bin)?;
        }
        self.start(&bin)?;
        Ok(())
    }

    fn port_taken(&self) -> bool {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
    }

    /// Our cluster is up: something answers on the port and our data folder
    /// has a running postmaster.
    fn accepts_connections(&self) -> bool {
        self.port_taken() && self.data_dir().join("postmaster.pid").exists()
    }

    fn init(&self, bin: &Path) -> anyhow::Result<()> {
        let data = self.data_dir();
        fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
        let as_postgres = running_as_root();
        if as_postgres {
            chown_to_postgres(&self.home)?;
            chown_to_postgres(&data)?;
        }
        let status = self
            .pg_command(bin, "initdb", as_postgres)
            .args(["-D"])
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("cannot run initdb")?;
        if !status.status.success() {
            bail!(
                "initdb failed for {}: {}",
                data.display(),
                String::from_utf8_lossy(&status.stderr).trim()
            );
        }
        // Our settings go last so that they win over the defaults above them.
        let conf = format!(
            "\n# Holdfast's private cluster\n\
             listen_addresses = '127.0.0.1'\n\
             port = {}\n\
             unix_socket_directories = ''\n\
             max_connections = 600\n\
             shared_buffers = 256MB\n\
             log_min_messages = warning\n",
            self.port
        );
        let conf_path = data.join("postgresql.conf");
        let mut text = fs::read_to_string(&conf_path).context("cannot read postgresql.conf")?;
        text.push_str(&conf);
        fs::write(&conf_path, text).context("cannot write postgresql.conf")?;
        Ok(())
    }

    fn start(&self, bin: &Path) -> anyhow::Result<()> {
        let as_postgres = running_as_root();
        let log = self.log_file();
        if as_postgres {
            // pg_ctl writes the log as the postgres user
            File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
            chown_to_postgres(&log)?;
        }
        let output = self
            .pg_command(bin, "pg_ctl", as_postgres)
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "60", "start"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("cannot run pg_ctl")?;
        if !output.status.success() {
            let tail = fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(5).collect();
            bail!(
                "PostgreSQL did not start on port {} ({}); last log lines: {}",
                self.port,
                String::from_utf8_lossy(&output.stderr).trim(),
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            );
        }
        Ok(())
    }

    fn pg_command(&self, bin: &Path, program: &str, as_postgres: bool) -> Command {
        let program = bin.join(program);
        if as_postgres {
            // initdb and the server refuse to run as root
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        }
    }
}

fn running_as_root() -> bool {
    // the effective uid, read from /proc to stay free of libc
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

/// The newest PostgreSQL server binaries on the machine, installing Debian's
/// package when there are none and we may.
fn find_binaries() -> anyhow::Result<PathBuf> {
    if let Some(bin) = newest_installed() {
        return Ok(bin);
    }
    if running_as_root() && Path::new("/usr/bin/apt-get").exists() {
        eprintln!("holdfast: PostgreSQL is not installed; installing Debian's postgresql package");
        let quiet = |args: &[&str]| {
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(Stdio::null())
                .status()
        };
        let updated = quiet(&["update", "-q"]);
        let installed = quiet(&["install", "-y", "-q", "postgresql"]);
        if matches!((updated, installed), (Ok(u), Ok(i)) if u.success() && i.success())
            && let Some(bin) = newest_installed()
        {
            return Ok(bin);
        }
    }
    bail!(
        "PostgreSQL server binaries not found: install Debian's postgresql package \
         (apt-get install postgresql) or set DATABASE_URL to a running server"
    )
}

fn newest_installed() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn chown_to_postgres(path: &Path) -> anyhow::Result<()> {
    let status = Command::new("chown")
        .arg("postgres:")
        .arg(path)
        .status()
        .context("cannot run chown")?;
    if !status.success() {
        bail!(
            "cannot give {} to the postgres user (does the user exist?)",
            path.display()
        );
    }
    Ok(())
}

/// Whether every folder above `dir` lets others through.
fn searchable_by_others(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    dir.ancestors().skip(1).all(|ancestor| {
        fs::metadata(ancestor).is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0)
    })
}
