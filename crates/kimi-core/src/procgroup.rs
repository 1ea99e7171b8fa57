//! Process groups: signalling one, asking whether it still has members, and stopping it (SIGTERM, a
//! grace period, SIGKILL). Commands we start run in their own group, so stopping the group also stops
//! whatever they started.

use std::path::Path;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::time::Instant;

use crate::sandbox::CommandSandbox;

/// `shell -c command` in `cwd`, in a process group of its own, with no stdin, as the Shell tool and
/// background tasks run commands (the caller sets where the output goes). The environment is the
/// children's ([`crate::child_env`]); `SHELL` names the shell, and git fails instead of asking for
/// credentials nobody will type (reference). A confined command (`sandbox`) confines itself in the
/// child before the shell starts, in a session (so a group) of its own; preparing its rules may fail,
/// and then nothing is started.
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
        .env("SHELL", shell)
        .stdin(std::process::Stdio::null());
    if !sandbox.confine(cmd.as_std_mut())? {
        cmd.process_group(0);
    }
    if std::env::var_os("GIT_TERMINAL_PROMPT").is_none() {
        cmd.env("GIT_TERMINAL_PROMPT", "0");
    }
    Ok(cmd)
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
        let mut child = tokio::process::Command::new("bash")
            .args(["-c", "trap '' TERM; sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = i32::try_from(child.id().unwrap()).unwrap();
        // Let bash install its trap before we signal.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(is_alive(pgid));
        let started = std::time::Instant::now();
        terminate(pgid, Duration::from_millis(300), || {
            let _ = child.try_wait();
        })
        .await;
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        for _ in 0..100 {
            if !is_alive(pgid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!is_alive(pgid));
        assert!(started.elapsed() < Duration::from_secs(3));
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
