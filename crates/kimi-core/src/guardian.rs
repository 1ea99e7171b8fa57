//! The guardian: a small process that kills our children's process groups if we die without doing it
//! ourselves (SIGKILL, OOM killer, a crash under `panic = "abort"`).
//!
//! Every command and MCP server runs in its own process group, which we signal when a call, a turn or the
//! session ends. That needs us alive. The guardian is this same binary started as `__guardian` in its
//! own process group (so a Ctrl-C aimed at ours does not reach it), reading `+PGID` / `-PGID` lines on
//! its stdin. The kernel closes that pipe however we die; at EOF the guardian SIGKILLs every group still
//! registered and exits. On a normal exit we have already reaped them, so it finds nothing to do.
//!
//! The guardian is process-wide state on purpose, like a signal handler: process groups are
//! process-wide, and every place that spawns one must be able to register it without threading a
//! handle through unrelated APIs. Without [`enable`] (tests, subcommands), registering does nothing; after
//! it, the guardian process starts with the first registered group.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The hidden subcommand that runs the guardian.
pub const SUBCOMMAND: &str = "__guardian";

struct Guardian {
    stdin: ChildStdin,
    // Kept so the child is not reaped behind our back; never waited on (it outlives our exit).
    _child: Child,
}

/// Whether the guardian is wanted, and if so whether it runs yet.
enum State {
    /// [`enable`] was not called (tests, subcommands): registering does nothing.
    Off,
    /// Wanted, but no process group needed it yet.
    Enabled,
    Running(Guardian),
}

static GUARDIAN: Mutex<State> = Mutex::new(State::Off);

/// Arms the guardian (once per process). The process itself starts with the first process group
/// registered: a session that never runs a command or an MCP server does not pay a second exec of
/// this binary before it can answer `initialize`.
pub fn enable() {
    let mut state = lock();
    if matches!(*state, State::Off) {
        *state = State::Enabled;
    }
}

/// Starts the guardian process if it is wanted and not running yet. Called just before spawning a
/// child: starting the guardian execs this binary, which takes a while; were it done in [`watch`], after
/// the spawn, a SIGKILL in that while would leave the child unwatched. Once it runs, [`watch`] is one
/// write.
pub fn start() {
    start_locked(&mut lock());
}

fn start_locked(state: &mut State) {
    if matches!(*state, State::Enabled) {
        match spawn() {
            Ok(guardian) => *state = State::Running(guardian),
            Err(e) => {
                // Tried once: a guardian that cannot start now would not start for the next group.
                tracing::warn!(error = %e, "process guardian not started; children may outlive a killed agent");
                *state = State::Off;
            }
        }
    }
}

/// Registers process group `pgid`: the guardian kills it if we die. Call [`start`] before spawning
/// the group's leader.
pub fn watch(pgid: u32) {
    let mut state = lock();
    start_locked(&mut state);
    send(&mut state, '+', pgid);
}

/// Unregisters `pgid` (it ended, or it is meant to outlive us).
pub fn release(pgid: u32) {
    send(&mut lock(), '-', pgid);
}

fn lock() -> std::sync::MutexGuard<'static, State> {
    crate::sync::lock(&GUARDIAN)
}

/// Starts the guardian from our own executable.
fn spawn() -> std::io::Result<Guardian> {
    let exe = std::env::current_exe()?;
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(exe)
            .arg(SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?
    };
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("guardian has no stdin"))?;
    Ok(Guardian { stdin, _child: child })
}

fn send(state: &mut State, op: char, pgid: u32) {
    let State::Running(guardian) = state else { return };
    // A line is far below PIPE_BUF and the guardian reads continuously, so this does not block.
    if let Err(e) = writeln!(guardian.stdin, "{op}{pgid}") {
        tracing::warn!(pgid, error = %e, "process guardian unreachable");
    }
}

/// The guardian's main loop: track the groups, kill what is left at EOF.
pub fn run(input: impl BufRead) {
    let mut groups = BTreeSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        apply(&mut groups, &line);
    }
    for pgid in groups {
        if let Ok(pgid) = i32::try_from(pgid) {
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

/// Applies one `+PGID` / `-PGID` line; anything else is ignored.
fn apply(groups: &mut BTreeSet<u32>, line: &str) {
    let (op, rest) = line.split_at(line.len().min(1));
    // Group 0 and 1 would mean "our own group" and init to killpg: never accepted.
    match (op, rest.trim().parse::<u32>()) {
        ("+", Ok(pgid)) if pgid > 1 => {
            groups.insert(pgid);
        }
        ("-", Ok(pgid)) => {
            groups.remove(&pgid);
        }
        _ => {}
    }
}

/// Entry point for `kimi-agent __guardian`. Its own process group keeps a terminal's Ctrl-C for the
/// agent away from it; only EOF ends it.
pub fn main() {
    run(std::io::stdin().lock());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_register_and_release_groups() {
        let mut groups = BTreeSet::new();
        for line in ["+100", "+200", "-100", "+0", "+1", "junk", "", "+x", "-999"] {
            apply(&mut groups, line);
        }
        assert_eq!(groups.into_iter().collect::<Vec<_>>(), [200]);
    }

    #[test]
    fn at_eof_the_registered_groups_are_killed() {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sleep").arg("60").process_group(0).spawn().unwrap();
        let pgid = child.id();
        run(format!("+{pgid}\n").as_bytes());
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9));
    }
}
