//! The spawner process: `kimi-agent __sandbox-spawner`, its socket to the agent on stdin.
//!
//! One thread, on purpose: joining a user namespace needs a single-threaded process, and nothing here
//! waits on more than the socket and its children. It confines itself exactly as a confined child did
//! between `fork` and `exec` ([`ChildSetup::enter`]: `setsid`, the private network, `no_new_privs` and
//! Landlock), answers `Ready` (or the errno of the step that failed, and exits), then starts each
//! requested command with std's `Command` and `process_group(0)` and no `pre_exec`, so std uses
//! `posix_spawn`: the commands inherit the confinement and cost what an unconfined command costs. Each
//! child is watched through a pidfd, reaped when it ends, and its wait status reported.
//!
//! At the end of the socket (the agent retired it, or died) no more requests are read; the spawner
//! waits for the children it started, reporting their ends while anyone listens, and exits. Killing
//! them when the agent dies is the guardian's job, as for every command.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::wait::{WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use super::wire::{self, Init, Reply, Request, Spawn};
use crate::sandbox::child::{ChildSetup, PrivateNetwork};
use crate::sandbox::rules;

/// Runs the spawner on the socket at stdin; returns when it is done.
pub(crate) fn main() {
    let Ok(socket) = take_socket() else { return };
    let ready = match setup(&socket) {
        Ok(true) => Reply::Ready,
        Ok(false) => return,
        Err(e) => Reply::InitFailed(e.raw_os_error().unwrap_or(Errno::EIO as i32)),
    };
    if (&socket).write_all(&ready.encode()).is_err() || ready != Reply::Ready {
        return;
    }
    serve(&socket);
}

/// Moves the socket off stdin (which the commands must not inherit) and puts `/dev/null` there.
fn take_socket() -> io::Result<UnixStream> {
    let socket = io::stdin().as_fd().try_clone_to_owned()?;
    nix::unistd::dup2_stdin(std::fs::File::open("/dev/null")?)?;
    Ok(UnixStream::from(socket))
}

/// Reads the init and confines this process; `false` when the agent went away before sending it.
fn setup(socket: &UnixStream) -> io::Result<bool> {
    // Nothing the commands could read through /proc or ptrace (the confinement alone allows a command
    // to trace its own spawner): no core, no same-user access. Commands get a fresh flag from exec.
    nix::sys::prctl::set_dumpable(false)?;
    let Some((request, fds)) = wire::receive(socket)? else {
        return Ok(false);
    };
    let Request::Init(init) = request else {
        return Err(Errno::EPROTO.into());
    };
    confine(&init, fds)?;
    Ok(true)
}

fn confine(init: &Init, fds: Vec<OwnedFd>) -> io::Result<()> {
    let mut fds = fds.into_iter();
    let network = if init.network {
        let net = fds.next().ok_or(Errno::EPROTO)?;
        Some(Arc::new(PrivateNetwork::from_fds(net, fds.next())))
    } else {
        None
    };
    if fds.next().is_some() {
        return Err(Errno::EPROTO.into());
    }
    let ruleset = match init.abi {
        0 => None,
        number => {
            let abi = rules::abi_from_number(number).ok_or(Errno::EINVAL)?;
            Some(
                rules::ruleset(abi, &init.roots, &[])
                    .map_err(|e| io::Error::other(format!("sandbox rules: {e}")))?,
            )
        }
    };
    // The namespaces' and the ruleset's descriptors go with `setup`: the commands never see them.
    ChildSetup { ruleset, network }.enter()
}

/// Starts commands until the socket ends, then waits for the last of them.
fn serve(socket: &UnixStream) {
    let mut children: BTreeMap<u32, OwnedFd> = BTreeMap::new();
    let mut open = true;
    let mut listening = true;
    while open || !children.is_empty() {
        let ready = match poll(socket, open, &children) {
            Ok(ready) => ready,
            Err(_) => return,
        };
        for pid in ready.ended {
            children.remove(&pid);
            if let Some(status) = reap(pid) {
                listening = listening && reply(socket, Reply::Exited { pid, status });
            }
        }
        if ready.request {
            match wire::receive(socket) {
                Ok(Some((Request::Spawn(spawn), fds))) => {
                    let id = spawn.id;
                    let answer = match start(spawn, fds) {
                        Ok((pid, pidfd)) => {
                            children.insert(pid, pidfd);
                            Reply::Spawned { id, pid }
                        }
                        Err(e) => Reply::Failed {
                            id,
                            errno: e.raw_os_error().unwrap_or(Errno::EIO as i32),
                        },
                    };
                    listening = listening && reply(socket, answer);
                }
                // The end, a second init or garbage: no more requests from this socket.
                Ok(Some((Request::Init(_), _)) | None) | Err(_) => open = false,
            }
        }
    }
}

/// What woke the loop.
struct Ready {
    request: bool,
    ended: Vec<u32>,
}

fn poll(socket: &UnixStream, open: bool, children: &BTreeMap<u32, OwnedFd>) -> io::Result<Ready> {
    let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(children.len() + 1);
    if open {
        fds.push(PollFd::new(socket.as_fd(), PollFlags::POLLIN));
    }
    fds.extend(
        children
            .values()
            .map(|pidfd| PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)),
    );
    loop {
        match nix::poll::poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => break,
            Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let woke = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
    let (request, pidfds) = if open {
        (woke(&fds[0]), &fds[1..])
    } else {
        (false, &fds[..])
    };
    let ended = children
        .keys()
        .zip(pidfds)
        .filter(|(_, fd)| woke(fd))
        .map(|(pid, _)| *pid)
        .collect();
    Ok(Ready { request, ended })
}

/// Starts one command in a process group of its own; its pid and a pidfd on it.
fn start(spawn: Spawn, fds: Vec<OwnedFd>) -> io::Result<(u32, OwnedFd)> {
    let [stdin, stdout, stderr]: [OwnedFd; 3] = fds.try_into().map_err(|_| Errno::EPROTO)?;
    let mut command = Command::new(&spawn.program);
    // No `pre_exec`, no `setsid`, an absolute program: std keeps to `posix_spawn` (the whole point).
    command
        .args(&spawn.args)
        .env_clear()
        .envs(spawn.env)
        .current_dir(&spawn.cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    let child = command.spawn()?;
    // Our copies of its stdio go now: the agent sees the end of its output when the command's do.
    drop(command);
    let pid = child.id();
    match pidfd_open(pid) {
        Ok(pidfd) => Ok((pid, pidfd)),
        Err(e) => {
            // Unwatchable: never leave it running unreported.
            let _ = nix::sys::signal::killpg(
                Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = reap(pid);
            Err(e)
        }
    }
}

/// A pidfd for our child `pid`: readable once it ends.
fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    let raw_pid = nix::libc::pid_t::try_from(pid).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `pidfd_open(2)` takes a pid and flags by value and returns a new descriptor or -1; no
    // memory is passed. `pid` is our own unreaped child, so the number cannot name another process.
    #[allow(unsafe_code)]
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, raw_pid, 0) };
    let fd = i32::try_from(fd).map_err(|_| Errno::EBADF)?;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    #[allow(unsafe_code)]
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reaps `pid`, which ended; its wait status as `waitpid(2)` encodes it.
fn reap(pid: u32) -> Option<i32> {
    let pid = Pid::from_raw(i32::try_from(pid).ok()?);
    loop {
        return match nix::sys::wait::waitpid(pid, Some(WaitPidFlag::empty())) {
            Ok(WaitStatus::Exited(_, code)) => Some((code & 0xff) << 8),
            Ok(WaitStatus::Signaled(_, signal, core)) => Some(signal as i32 | if core { 0x80 } else { 0 }),
            Err(Errno::EINTR) => continue,
            Ok(_) => continue,
            Err(_) => None,
        };
    }
}

/// Sends `reply`; `false` once nobody listens (the spawner carries on reaping).
fn reply(mut socket: &UnixStream, reply: Reply) -> bool {
    socket.write_all(&reply.encode()).is_ok()
}
