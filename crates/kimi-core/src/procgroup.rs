//! Process groups: signalling one, asking whether it still has members, and stopping it (SIGTERM, a
//! grace period, SIGKILL). Commands we start run in their own group, so stopping the group also stops
//! whatever they started.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

use crate::sandbox::CommandSandbox;
use crate::sandbox::spawner::{SpawnRequest, SpawnStdio, SpawnedChild};

/// `shell -c command` in `cwd`, in a process group of its own, with no stdin, as the Shell tool and
/// background tasks run commands (the caller sets where the output goes). The environment is the
/// children's ([`crate::child_env`]) and [`shell_vars`]. A confined command (`sandbox`) confines itself
/// in the child before the shell starts, in a session (so a group) of its own; preparing its rules may
/// fail, and then nothing is started. (A command the session's spawner can start goes through
/// [`spawn_shell`] instead.)
pub fn shell_command(
    shell: &Path,
    command: &str,
    cwd: &Path,
    sandbox: &CommandSandbox,
) -> std::io::Result<tokio::process::Command> {
    let mut cmd = tokio::process::Command::new(shell);
    crate::child_env::apply(&mut cmd);
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .envs(shell_vars(shell))
        .stdin(std::process::Stdio::null());
    if !sandbox.confine(cmd.as_std_mut())? {
        cmd.process_group(0);
    }
    Ok(cmd)
}

/// What a shell command gets on top of the children's environment: `SHELL` names the shell, and git
/// fails instead of asking for credentials nobody will type (reference).
fn shell_vars(shell: &Path) -> Vec<(OsString, OsString)> {
    let mut vars = vec![("SHELL".into(), shell.into())];
    if std::env::var_os("GIT_TERMINAL_PROMPT").is_none() {
        vars.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
    }
    vars
}

/// Starts `shell -c command` as [`shell_command`] describes, its stdout and stderr going to `stdout`
/// and `stderr`: through the session's spawner when the sandbox starts it there
/// ([`CommandSandbox::uses_spawner`]), else as our own child (killed if dropped unwaited).
pub async fn spawn_shell(
    shell: &Path,
    command: &str,
    cwd: &Path,
    sandbox: &CommandSandbox,
    stdout: OwnedFd,
    stderr: OwnedFd,
) -> std::io::Result<GroupChild> {
    if sandbox.uses_spawner() {
        let env = crate::child_env::current()
            .vars()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .chain(shell_vars(shell))
            .collect();
        let request = SpawnRequest {
            program: absolute(shell),
            args: vec!["-c".into(), command.into()],
            env,
            cwd: cwd.to_owned(),
        };
        let stdio = SpawnStdio {
            stdin: crate::sandbox::spawner::null()?,
            stdout,
            stderr,
        };
        return Ok(GroupChild::Spawned(sandbox.spawn(request, stdio).await?));
    }
    let mut cmd = shell_command(shell, command, cwd, sandbox)?;
    cmd.stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true);
    // `cmd` goes at the end of this statement, and with it our copies of the output's descriptors.
    Ok(GroupChild::Own(cmd.spawn()?))
}

/// `program` as an absolute path: the spawner looks up nothing (a bare name is resolved here, in our
/// `PATH`, as a shell started directly would be).
fn absolute(program: &Path) -> PathBuf {
    if program.is_absolute() {
        return program.to_owned();
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| program.to_owned())
}

/// A started command, leader of its own process group: our own child, or one the sandbox's spawner
/// started (and reaps, reporting its status).
#[derive(Debug)]
pub enum GroupChild {
    /// Started by us (unconfined, or confining itself in the child).
    Own(tokio::process::Child),
    /// Started by the session's spawner.
    Spawned(SpawnedChild),
}

impl GroupChild {
    /// Its pid, also its process group's id; `None` once tokio has reaped our own child.
    pub fn id(&self) -> Option<u32> {
        match self {
            Self::Own(child) => child.id(),
            Self::Spawned(child) => Some(child.id()),
        }
    }

    /// Waits for it to end.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        match self {
            Self::Own(child) => child.wait().await,
            Self::Spawned(child) => child.wait().await,
        }
    }

    /// Its status if it has ended (reaping our own child's zombie).
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        match self {
            Self::Own(child) => child.try_wait(),
            Self::Spawned(child) => child.try_wait(),
        }
    }
}

/// How often a stopping group is checked for survivors.
const POLL: Duration = Duration::from_millis(50);

/// Sends `signal` to the group `pgid`; a group that is already gone is not an error.
pub fn signal(pgid: i32, signal: Signal) {
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => tracing::warn!(pgid, ?signal, error = %e, "signalling a process group failed"),
    }
}

/// Whether any process of the group remains (a permission error means one does). Zombies count until
/// their parent reaps them.
pub fn is_alive(pgid: i32) -> bool {
    pgid > 0 && !matches!(killpg(Pid::from_raw(pgid), None), Err(Errno::ESRCH))
}

/// SIGTERM to the group, up to `grace` for it to go away (calling `reap` on each check, so the caller
/// can collect its own child's zombie), then SIGKILL to whatever is left.
pub async fn terminate(pgid: i32, grace: Duration, mut reap: impl FnMut()) {
    signal(pgid, Signal::SIGTERM);
    let end = Instant::now() + grace;
    loop {
        reap();
        if !is_alive(pgid) {
            return;
        }
        if Instant::now() >= end {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    signal(pgid, Signal::SIGKILL);
}

/// The one guard of a child's process group (Shell commands, background tasks, hooks, MCP servers):
/// from its spawn (in a group of its own, after [`crate::guardian::start`]) it is registered with the
/// [`crate::guardian`], which kills it if the agent dies without doing so; [`GroupGuard::terminate`]
/// stops it (TERM, grace, KILL); dropped while armed, it SIGKILLs the group.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl GroupGuard {
    /// Watches the group led by `pid` (a child spawned with `process_group(0)`).
    pub fn watch(pid: u32) -> Self {
        // No Linux pid exceeds i32; 0 would name our own group, so it is never signalled.
        let pgid = i32::try_from(pid).unwrap_or(0);
        if pgid > 1 {
            crate::guardian::watch(pid);
        }
        Self { pgid, armed: true }
    }

    /// The group's id (its leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Sends `sig` to the group.
    pub fn signal(&self, sig: Signal) {
        if self.pgid > 1 {
            signal(self.pgid, sig);
        }
    }

    /// Whether any process of the group remains.
    pub fn is_alive(&self) -> bool {
        self.pgid > 1 && is_alive(self.pgid)
    }

    /// SIGTERM, up to `grace` for the group to go (calling `reap` on each check), then SIGKILL.
    pub async fn terminate(&self, grace: Duration, reap: impl FnMut()) {
        if self.pgid > 1 {
            terminate(self.pgid, grace, reap).await;
        }
    }

    /// The child is over; whatever it left running is left alone (the guardian too).
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            self.signal(Signal::SIGKILL);
        }
        if let Ok(pgid) = u32::try_from(self.pgid)
            && pgid > 1
        {
            crate::guardian::release(pgid);
        }
    }
}

/// Python's `returncode` for an exit status: the exit code, or minus the signal number that ended the
/// process.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => -signal,
        (None, None) => -1,
    }
}

/// When process `pid` started, in seconds since the Unix epoch (Linux: `/proc`), to tell a process we
/// started from an unrelated one that reuses its id. `None` where that cannot be known.
pub fn started_at(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields after its last ')' are fixed.
    let after_name = stat.rsplit_once(')')?.1;
    // Field 22 (starttime) is the 20th after the name (state is field 3).
    let ticks: f64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot: f64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    Some(boot + ticks / per_second as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn terminate_escalates_to_sigkill() {
        use tokio::io::AsyncBufReadExt;

        let mut child = tokio::process::Command::new("bash")
            .args(["-c", "trap '' TERM; echo trapped; sleep 30 & wait"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pgid = i32::try_from(child.id().unwrap()).unwrap();
        // Signal only once bash ignores TERM, which it says on stdout.
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(5), stdout.read_line(&mut line))
            .await
            .expect("bash installed its trap")
            .unwrap();
        assert_eq!(line, "trapped\n");
        assert!(is_alive(pgid));
        // A deadline on the awaited escalation, far under the sleeper's 30 s: SIGKILL followed the grace.
        tokio::time::timeout(
            Duration::from_secs(3),
            terminate(pgid, Duration::from_millis(300), || {
                let _ = child.try_wait();
            }),
        )
        .await
        .expect("terminate escalated to SIGKILL after the grace");
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        for _ in 0..100 {
            if !is_alive(pgid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!is_alive(pgid));
        assert!(!is_alive(0));
    }

    #[test]
    fn our_own_start_time_is_recent() {
        if !std::path::Path::new("/proc/self/stat").exists() {
            return;
        }
        let ours = started_at(i32::try_from(std::process::id()).unwrap()).unwrap();
        let now = crate::notifications::unix_now();
        assert!(ours <= now + 2.0 && ours > now - 3600.0, "{ours} vs {now}");
        assert_eq!(started_at(i32::MAX), None);
    }
}
