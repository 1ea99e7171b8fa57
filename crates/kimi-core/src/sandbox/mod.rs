//! The sandbox: where the model's commands may write and whether they reach the network, enforced by
//! the kernel in each child before it runs the shell (docs/sandbox.md).
//!
//! Layout:
//! - [`SandboxMode`] and [`SandboxPolicy`]: what the user asked for (`--sandbox`, `sandbox_mode`,
//!   `sandbox_network`, `sandbox_writable_roots`), with codex's mode names;
//! - `roots`: the writable roots of a command;
//! - `rules`: the kernel's Landlock ABI and the ruleset of one command;
//! - `child`: what a confined child does between fork and exec, or the spawner before it serves;
//! - [`spawner`]: the process, confined once, that starts the confined commands with `posix_spawn`;
//! - `probe`: the start-up trial that decides the [`Enforcement`];
//! - [`Sandbox`]: the policy, that verdict and (read-only mode) the private temp dir. It hands out a
//!   [`CommandSandbox`] for each command and checks the in-process file tools' writes.
//!
//! Never weaker than asked: when the kernel cannot enforce the policy, [`Sandbox::command`] refuses every
//! command instead of running it unconfined. The agent process itself is never confined (it writes the
//! session files); MCP servers and hooks are the user's own programs and are not confined either.

mod child;
mod probe;
mod roots;
mod rules;
pub mod spawner;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use kimi_wire::params::SandboxInfo;
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use child::{ChildSetup, PrivateNetwork};
use spawner::{SpawnRequest, SpawnStdio, SpawnedChild, Spawners};

/// How much of the file system the model's commands may change (codex's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Read everything, write only in a private temp dir.
    ReadOnly,
    /// Read everything, write in the work dir, the extra directories, the temp dirs and
    /// `sandbox_writable_roots`.
    WorkspaceWrite,
    /// No confinement of files: the reference's behaviour, and the default.
    #[default]
    DangerFullAccess,
}

impl SandboxMode {
    /// Every mode, strictest first.
    pub const ALL: [SandboxMode; 3] = [Self::ReadOnly, Self::WorkspaceWrite, Self::DangerFullAccess];

    /// The name used by `--sandbox` and `sandbox_mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }

    /// Whether commands' writes are confined to writable roots.
    pub fn confines_files(self) -> bool {
        !matches!(self, Self::DangerFullAccess)
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            format!("'{s}' is not a sandbox mode (read-only, workspace-write or danger-full-access).")
        })
    }
}

/// What the user asked the sandbox to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// `--sandbox` or `sandbox_mode`.
    pub mode: SandboxMode,
    /// `sandbox_network`: whether commands may use the network (loopback included).
    pub network: bool,
    /// `sandbox_writable_roots` as configured: absolute, `~/...`, or relative to the work dir.
    pub extra_roots: Vec<String>,
}

impl Default for SandboxPolicy {
    fn default() -> Self {
        Self {
            mode: SandboxMode::DangerFullAccess,
            network: true,
            extra_roots: Vec::new(),
        }
    }
}

impl SandboxPolicy {
    /// Whether the policy confines nothing (the default): commands start exactly as without a sandbox.
    pub fn is_unconfined(&self) -> bool {
        !self.mode.confines_files() && self.network
    }
}

/// What the kernel does about the policy, decided once at start by a trial command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// The policy confines nothing.
    Off,
    /// The kernel enforces it, as the trial showed.
    Enforced {
        /// The kernel's Landlock ABI (`None` when only the network is cut).
        landlock_abi: Option<landlock::ABI>,
        /// Whether commands run in the session's private network namespace.
        network_cut: bool,
    },
    /// The kernel cannot enforce it: every command is refused with this reason.
    Unavailable(String),
}

/// Why a command or a write is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The kernel cannot enforce the mode (found at start); commands are not run unconfined.
    #[error(
        "The sandbox ({policy}) cannot be enforced on this machine, so the command was not run: {reason}. \
         Commands never run unconfined when a sandbox is asked for; use --sandbox danger-full-access \
         (and sandbox_network = true) to run them without one."
    )]
    Unavailable {
        /// Mode and network, as [`Sandbox::describe_policy`] words them.
        policy: String,
        /// What the start-up trial found.
        reason: String,
    },
    /// An in-process write outside the writable roots.
    #[error(
        "`{path}` is outside the sandbox's writable roots ({mode}): {roots}. Write inside one of them, \
         or start the agent with another --sandbox mode, --add-dir or sandbox_writable_roots.",
        path = .path.display(),
        roots = display_roots(.roots)
    )]
    OutsideRoots {
        /// Where the write would really land (symlinks followed).
        path: PathBuf,
        /// The mode in effect.
        mode: SandboxMode,
        /// The writable roots.
        roots: Vec<PathBuf>,
    },
}

fn display_roots(roots: &[PathBuf]) -> String {
    if roots.is_empty() {
        return "none".to_owned();
    }
    roots
        .iter()
        .map(|r| r.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The session's sandbox: the policy, what the kernel does about it, and read-only mode's private temp
/// dir (removed when the sandbox is dropped).
#[derive(Debug)]
pub struct Sandbox {
    policy: SandboxPolicy,
    enforcement: Enforcement,
    private_tmp: Option<tempfile::TempDir>,
    /// With the network cut: the namespace every command joins.
    private_network: Option<Arc<PrivateNetwork>>,
    /// `$HOME`, for `~` in `sandbox_writable_roots`.
    home: Option<PathBuf>,
    /// When the policy is enforced: what starts the confined commands.
    spawners: Option<Arc<Spawners>>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::off()
    }
}

impl Sandbox {
    /// No sandbox: commands start as they always have.
    pub fn off() -> Self {
        Self {
            policy: SandboxPolicy::default(),
            enforcement: Enforcement::Off,
            private_tmp: None,
            private_network: None,
            home: None,
            spawners: None,
        }
    }

    /// The sandbox for `policy`: creates read-only mode's private temp dir and runs the trial that tells
    /// whether the kernel can enforce the policy (a confined `/bin/sh -c exit`, a few milliseconds; not
    /// run when the policy confines nothing).
    pub fn start(policy: SandboxPolicy) -> Self {
        let home = crate::paths::home_dir();
        let mut sandbox = Self {
            policy,
            enforcement: Enforcement::Off,
            private_tmp: None,
            private_network: None,
            home,
            spawners: None,
        };
        if sandbox.policy.is_unconfined() {
            return sandbox;
        }
        if sandbox.policy.mode == SandboxMode::ReadOnly {
            match tempfile::Builder::new().prefix("kimi-sandbox-").tempdir() {
                Ok(dir) => sandbox.private_tmp = Some(dir),
                Err(e) => {
                    sandbox.enforcement =
                        Enforcement::Unavailable(format!("cannot create the private temp dir: {e}"));
                    return sandbox;
                }
            }
        }
        if !sandbox.policy.network {
            match PrivateNetwork::create(false) {
                Ok(network) => sandbox.private_network = Some(Arc::new(network)),
                Err(e) => {
                    sandbox.enforcement = Enforcement::Unavailable(format!(
                        "cannot make a network namespace ({e}); cutting the network takes root or \
                         unprivileged user namespaces (`unshare -rn true` must work)"
                    ));
                    return sandbox;
                }
            }
        }
        sandbox.enforcement = probe::run(&sandbox);
        if matches!(sandbox.enforcement, Enforcement::Enforced { .. }) {
            sandbox.spawners = Some(Arc::new(Spawners::new(sandbox.private_network.clone())));
        }
        sandbox
    }

    /// What was asked.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// What the kernel does about it.
    pub fn enforcement(&self) -> &Enforcement {
        &self.enforcement
    }

    /// Whether the model may reach the network (the web tools are offered only then).
    pub fn allows_network(&self) -> bool {
        self.policy.network
    }

    /// `workspace-write, network off`: the policy in a few words.
    pub fn describe_policy(&self) -> String {
        let network = if self.policy.network { "on" } else { "off" };
        format!("{}, network {network}", self.policy.mode)
    }

    /// One line for the log and `info`: the policy and whether (and how) it is enforced.
    pub fn summary(&self) -> String {
        let policy = self.describe_policy();
        match &self.enforcement {
            Enforcement::Off => format!("{policy} (no confinement)"),
            Enforcement::Enforced {
                landlock_abi,
                network_cut,
            } => {
                let mut how = Vec::new();
                if let Some(abi) = landlock_abi {
                    how.push(format!("Landlock ABI {}", rules::abi_number(*abi)));
                }
                if *network_cut {
                    how.push("network namespace".to_owned());
                }
                format!("{policy} (enforced: {})", how.join(", "))
            }
            Enforcement::Unavailable(reason) => {
                format!("{policy} (NOT ENFORCEABLE: {reason}; every command will be refused)")
            }
        }
    }

    /// The directories commands may write in for this work dir and these extra directories, resolved;
    /// `None` when files are not confined.
    pub fn writable_roots(&self, work_dir: &Path, additional_dirs: &[PathBuf]) -> Option<Vec<PathBuf>> {
        if !self.policy.mode.confines_files() {
            return None;
        }
        Some(roots::writable_roots(&roots::RootInputs {
            mode: self.policy.mode,
            work_dir,
            additional_dirs,
            temp_dir: &self.temp_dir(),
            extra: &self.policy.extra_roots,
            home: self.home.as_deref(),
        }))
    }

    /// The temp dir commands use: read-only mode's private one, else the system's.
    fn temp_dir(&self) -> PathBuf {
        match &self.private_tmp {
            Some(dir) => dir.path().to_path_buf(),
            None => std::env::temp_dir(),
        }
    }

    /// The confinement of a command started now in this workspace, or why none may start.
    pub fn command(
        &self,
        work_dir: &Path,
        additional_dirs: &[PathBuf],
    ) -> Result<CommandSandbox, SandboxError> {
        match &self.enforcement {
            Enforcement::Off => Ok(CommandSandbox::unconfined()),
            Enforcement::Unavailable(reason) => Err(SandboxError::Unavailable {
                policy: self.describe_policy(),
                reason: reason.clone(),
            }),
            Enforcement::Enforced { landlock_abi, .. } => Ok(self.confinement(
                *landlock_abi,
                self.writable_roots(work_dir, additional_dirs).unwrap_or_default(),
            )),
        }
    }

    /// The confinement on a kernel with Landlock `landlock_abi` (none for `None`), with these writable
    /// roots.
    fn confinement(&self, landlock_abi: Option<landlock::ABI>, roots: Vec<PathBuf>) -> CommandSandbox {
        CommandSandbox(Some(Confined {
            landlock: landlock_abi.map(|abi| (rules::rights_abi(abi), roots)),
            writable_files: Vec::new(),
            network: self.private_network.clone(),
            tmpdir: self.private_tmp.as_ref().map(|d| d.path().to_path_buf()),
            spawners: self.spawners.clone(),
        }))
    }

    /// Whether an in-process tool may write the file at `real`, a real path (no symlink on it, as the
    /// file tools resolve their target and then open it following none): it must lie in a writable
    /// root, which are real paths too. Always allowed when files are not confined.
    pub fn check_write(
        &self,
        real: &Path,
        work_dir: &Path,
        additional_dirs: &[PathBuf],
    ) -> Result<(), SandboxError> {
        let Some(roots) = self.writable_roots(work_dir, additional_dirs) else {
            return Ok(());
        };
        if roots.iter().any(|root| real.starts_with(root)) {
            return Ok(());
        }
        Err(SandboxError::OutsideRoots {
            path: real.to_path_buf(),
            mode: self.policy.mode,
            roots,
        })
    }

    /// The `initialize` extension field.
    pub fn info(&self, work_dir: &Path, additional_dirs: &[PathBuf]) -> SandboxInfo {
        let (enforced, landlock_abi, error) = match &self.enforcement {
            Enforcement::Off => (false, None, None),
            Enforcement::Enforced { landlock_abi, .. } => (true, landlock_abi.map(rules::abi_number), None),
            Enforcement::Unavailable(reason) => (false, None, Some(reason.clone())),
        };
        SandboxInfo {
            mode: self.policy.mode.as_str().to_owned(),
            network: self.policy.network,
            enforced,
            landlock_abi,
            writable_roots: self
                .writable_roots(work_dir, additional_dirs)
                .map(|roots| roots.iter().map(|r| r.display().to_string()).collect()),
            error,
        }
    }
}

/// How one command is confined; [`CommandSandbox::unconfined`] when there is no sandbox.
#[derive(Debug, Clone, Default)]
pub struct CommandSandbox(Option<Confined>);

#[derive(Debug, Clone)]
struct Confined {
    /// The ABI whose rights the rules use and the directories writable beneath them; `None` when files
    /// are not confined.
    landlock: Option<(landlock::ABI, Vec<PathBuf>)>,
    /// Single files the command may also write (a background task's own log).
    writable_files: Vec<PathBuf>,
    /// Set when the network is cut.
    network: Option<Arc<PrivateNetwork>>,
    /// `TMPDIR` for the command (read-only mode's private temp dir).
    tmpdir: Option<PathBuf>,
    /// The session's spawners (`None` in the start-up trial, which confines its child itself).
    spawners: Option<Arc<Spawners>>,
}

impl CommandSandbox {
    /// No confinement.
    pub fn unconfined() -> Self {
        Self(None)
    }

    /// Whether the command will be confined.
    pub fn is_confined(&self) -> bool {
        self.0.is_some()
    }

    /// Also lets the command write `file` (a background task's log, which it may reopen through
    /// `/dev/stdout`). No effect on an unconfined command.
    #[must_use]
    pub fn with_writable_file(mut self, file: PathBuf) -> Self {
        if let Some(confined) = &mut self.0 {
            confined.writable_files.push(file);
        }
        self
    }

    /// Whether the command is started by the session's spawner ([`CommandSandbox::spawn`]): it is
    /// confined and needs nothing the spawner's fixed confinement lacks. Otherwise the caller starts it:
    /// unconfined in a process group of its own, or confining itself ([`CommandSandbox::confine`]),
    /// which a background task does for the single file it may write besides (its log).
    pub fn uses_spawner(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|c| c.spawners.is_some() && c.writable_files.is_empty())
    }

    /// Starts `request` through the session's spawner, confined, in a process group of its own, with
    /// read-only mode's `TMPDIR` added. Fails when [`CommandSandbox::uses_spawner`] is `false`, or the
    /// spawner cannot start, confine itself or reach the end of the request: the command is then not
    /// run at all.
    pub async fn spawn(&self, mut request: SpawnRequest, stdio: SpawnStdio) -> std::io::Result<SpawnedChild> {
        let (Some(confined), true) = (&self.0, self.uses_spawner()) else {
            return Err(std::io::Error::other(
                "this command is not started by the sandbox's spawner",
            ));
        };
        let Some(spawners) = &confined.spawners else {
            return Err(std::io::Error::other("the sandbox has no spawner"));
        };
        if let Some(tmpdir) = &confined.tmpdir {
            request.env.push(("TMPDIR".into(), tmpdir.into()));
        }
        let (abi, roots) = match &confined.landlock {
            Some((abi, roots)) => (rules::abi_number(*abi), roots.as_slice()),
            None => (0, &[][..]),
        };
        spawners.spawn(abi, roots, request, stdio).await
    }

    /// Sets `cmd` up so that the child confines itself before it runs anything: a session of its own
    /// (so also a process group of its own, and no controlling terminal), the private network, then
    /// Landlock. Returns `false` for an unconfined command, which the caller puts in a process group
    /// itself. Fails when the rules cannot be prepared; the command must then not be started.
    pub fn confine(&self, cmd: &mut std::process::Command) -> std::io::Result<bool> {
        let Some(confined) = &self.0 else {
            return Ok(false);
        };
        let ruleset = match &confined.landlock {
            Some((abi, roots)) => Some(
                rules::ruleset(*abi, roots, &confined.writable_files)
                    .map_err(|e| std::io::Error::other(format!("sandbox rules: {e}")))?,
            ),
            None => None,
        };
        if let Some(tmpdir) = &confined.tmpdir {
            cmd.env("TMPDIR", tmpdir);
        }
        child::install(
            cmd,
            ChildSetup {
                ruleset,
                network: confined.network.clone(),
            },
        );
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::process::{Command, Stdio};

    /// Runs `script` with `sh` confined by `sandbox`; returns its exit success and stdout.
    fn run_confined(sandbox: &CommandSandbox, script: &str) -> (bool, String) {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script])
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        assert!(sandbox.confine(&mut cmd).unwrap());
        let output = cmd.output().unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    }

    fn sandbox(
        mode: SandboxMode,
        enforcement: Enforcement,
        private_tmp: Option<tempfile::TempDir>,
    ) -> Sandbox {
        Sandbox {
            policy: SandboxPolicy {
                mode,
                ..SandboxPolicy::default()
            },
            enforcement,
            private_tmp,
            private_network: None,
            home: None,
            spawners: None,
        }
    }

    #[test]
    fn modes_have_codex_names() {
        for mode in SandboxMode::ALL {
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(mode));
            assert_eq!(
                serde_json::to_value(mode).unwrap(),
                serde_json::json!(mode.as_str())
            );
        }
        assert_eq!(SandboxMode::default(), SandboxMode::DangerFullAccess);
        assert!(SandboxPolicy::default().is_unconfined());
    }

    #[test]
    fn an_unenforceable_sandbox_refuses_every_command() {
        let refused = sandbox(
            SandboxMode::WorkspaceWrite,
            Enforcement::Unavailable("no Landlock here".into()),
            None,
        );
        let error = refused.command(Path::new("/"), &[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "The sandbox (workspace-write, network on) cannot be enforced on this machine, so the command was \
             not run: no Landlock here. Commands never run unconfined when a sandbox is asked for; use \
             --sandbox danger-full-access (and sandbox_network = true) to run them without one."
        );
        assert!(
            !sandbox(SandboxMode::DangerFullAccess, Enforcement::Off, None)
                .command(Path::new("/"), &[])
                .unwrap()
                .is_confined()
        );
    }

    #[test]
    fn in_process_writes_are_judged_against_the_real_roots() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (real_work, private) = (root.join("real-work"), root.join("private"));
        std::fs::create_dir_all(&real_work).unwrap();
        std::fs::create_dir_all(&private).unwrap();
        // The work dir as the user named it: a symlink. Its root is where it really is.
        let work = root.join("work");
        std::os::unix::fs::symlink(&real_work, &work).unwrap();
        let workspace = sandbox(SandboxMode::WorkspaceWrite, Enforcement::Off, None);
        assert_eq!(
            workspace.check_write(&real_work.join("a/b.txt"), &work, &[]),
            Ok(())
        );
        // (Not a path under the system temp dir, which is a root of its own.)
        assert!(
            workspace
                .check_write(Path::new("/etc/kimi-notes"), &work, &[])
                .is_err()
        );

        let tmp = tempfile::Builder::new().tempdir_in(&private).unwrap();
        let tmp_path = tmp.path().to_path_buf();
        let read_only = sandbox(SandboxMode::ReadOnly, Enforcement::Off, Some(tmp));
        assert_eq!(read_only.check_write(&tmp_path.join("notes"), &work, &[]), Ok(()));
        let refused = read_only
            .check_write(&real_work.join("notes"), &work, &[])
            .unwrap_err();
        assert_eq!(
            refused,
            SandboxError::OutsideRoots {
                path: real_work.join("notes"),
                mode: SandboxMode::ReadOnly,
                roots: vec![tmp_path.clone()],
            }
        );
        assert!(
            refused.to_string().starts_with(&format!(
                "`{}` is outside the sandbox's writable roots (read-only): {}. ",
                real_work.join("notes").display(),
                tmp_path.display()
            )),
            "{refused}"
        );
        let full = sandbox(SandboxMode::DangerFullAccess, Enforcement::Off, None);
        assert_eq!(full.check_write(Path::new("/etc/passwd"), &work, &[]), Ok(()));
    }

    /// The kernel's Landlock ABI, or a loud failure: these tests must not pass where it is missing.
    fn landlock_or_fail() -> landlock::ABI {
        rules::kernel_abi()
            .unwrap_or_else(|| panic!("THIS KERNEL HAS NO LANDLOCK: the sandbox cannot be tested here"))
    }

    #[test]
    fn landlock_lets_a_child_write_in_its_roots_and_nowhere_else() {
        let abi = landlock_or_fail();
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (work, outside) = (root.join("work"), root.join("outside"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let off = sandbox(SandboxMode::WorkspaceWrite, Enforcement::Off, None);
        let confined = off.confinement(Some(abi), vec![work.clone()]);
        let (ok, _) = run_confined(&confined, &format!("echo x > {}/f", outside.display()));
        assert!(!ok);
        assert!(!outside.join("f").exists());
        let (ok, out) = run_confined(
            &confined,
            &format!(
                "echo x > {0}/f && cat {0}/f && echo gone > /dev/null",
                work.display()
            ),
        );
        assert_eq!((ok, out.as_str()), (true, "x\n"));
    }

    #[test]
    fn without_the_right_to_a_network_namespace_one_inside_a_user_namespace_keeps_ids() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let network = Arc::new(PrivateNetwork::create(true).unwrap_or_else(|e| {
            panic!("UNPRIVILEGED USER AND NETWORK NAMESPACES ARE NOT AVAILABLE HERE: {e}")
        }));
        assert!(network.has_user_namespace());
        let confined = CommandSandbox(Some(Confined {
            landlock: None,
            writable_files: Vec::new(),
            network: Some(network),
            tmpdir: None,
            spawners: None,
        }));
        let file = dir.path().join("made-inside");
        // Python's socket module, as bash's /dev/tcp may not be there: connect to the host's listener.
        let script = format!(
            "id -u; touch {}; python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 5)\"",
            file.display()
        );
        let (ok, out) = run_confined(&confined, &script);
        assert!(
            !out.is_empty(),
            "UNPRIVILEGED USER AND NETWORK NAMESPACES ARE NOT AVAILABLE: the confined child did not start"
        );
        assert!(!ok, "the host's loopback was reachable");
        assert!(listener.accept().is_err());
        assert_eq!(out.trim(), nix::unistd::geteuid().to_string());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().uid(),
            nix::unistd::geteuid().as_raw()
        );
    }
}
