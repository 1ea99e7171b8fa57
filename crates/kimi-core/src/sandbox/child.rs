//! What a confined child does between `fork` and `exec`, in this order:
//!
//! 1. `setsid`: a session of its own, so also a process group of its own (which the agent signals as
//!    usual) and no controlling terminal to push keystrokes into.
//! 2. With the network cut: it joins the session's [`PrivateNetwork`], a network namespace holding
//!    nothing but its own loopback (a server started by one command is reachable from the next one; the
//!    host's loopback and every other interface are out of reach). Joining costs a `setns`, where making
//!    a namespace per command would cost milliseconds.
//! 3. Landlock: `no_new_privs`, then the ruleset prepared by the agent.
//!
//! A step that fails makes the spawn fail: the command never runs half-confined. Everything here runs
//! in a child forked from a multithreaded process, so it only makes system calls on data prepared
//! before the fork: no allocation, no locks.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::Arc;

use landlock::{RulesetCreated, RulesetError};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sched::CloneFlags;
use nix::sys::socket::{AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType};
use nix::sys::stat::Mode;

/// What the child sets up, prepared by the agent.
#[derive(Debug)]
pub(crate) struct ChildSetup {
    /// The Landlock rules; `None` when files are not confined.
    pub ruleset: Option<RulesetCreated>,
    /// Set when the network is cut.
    pub network: Option<Arc<PrivateNetwork>>,
}

/// The session's network namespace for confined commands, kept alive by the descriptors held here.
#[derive(Debug)]
pub(crate) struct PrivateNetwork {
    net: OwnedFd,
    /// The user namespace owning it, when one was needed to make it (a user without `CAP_SYS_ADMIN`):
    /// commands join it first, mapped to their own uid and gid, so files keep their owner.
    user: Option<OwnedFd>,
}

impl PrivateNetwork {
    /// Makes the namespace: a holder (`/bin/sh` waiting on its stdin) unshares it as the module doc's
    /// step 2 says (a plain network namespace, else one inside a user namespace, unless
    /// `user_namespace_only`), brings its loopback up, and is kept until its namespaces are opened.
    pub(crate) fn create(user_namespace_only: bool) -> io::Result<Self> {
        let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
        let maker = Unshare {
            uid_map: format!("{uid} {uid} 1"),
            gid_map: format!("{gid} {gid} 1"),
            user_namespace_only,
        };
        let mut holder = std::process::Command::new(HOLDER_SHELL);
        holder
            .args(["-c", "read _"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: as in `install`: `Unshare::enter` makes raw system calls only (unshare, open/write/close
        // on /proc, socket/sendto/recv/close) on values built before the fork (the id maps, a request in a
        // constant, C string literals), allocating nothing and taking no lock.
        #[allow(unsafe_code)]
        unsafe {
            holder.pre_exec(move || maker.enter());
        }
        let mut child = holder.spawn()?;
        let opened = Self::open(child.id());
        // EOF on its stdin ends the holder; the namespaces live on in our descriptors.
        drop(child.stdin.take());
        child.wait()?;
        opened
    }

    fn open(pid: u32) -> io::Result<Self> {
        let net = std::fs::File::open(format!("/proc/{pid}/ns/net"))?.into();
        let user = format!("/proc/{pid}/ns/user");
        let own = std::fs::metadata("/proc/self/ns/user")?.ino();
        let user = if std::fs::metadata(&user)?.ino() == own {
            None
        } else {
            Some(std::fs::File::open(user)?.into())
        };
        Ok(Self { net, user })
    }

    /// The namespaces as the spawner receives them: the network's, and the user namespace owning it.
    pub(crate) fn from_fds(net: OwnedFd, user: Option<OwnedFd>) -> Self {
        Self { net, user }
    }

    /// The descriptors to hand to the spawner: the network namespace's, then the user namespace's.
    pub(crate) fn fds(&self) -> (BorrowedFd<'_>, Option<BorrowedFd<'_>>) {
        (self.net.as_fd(), self.user.as_ref().map(AsFd::as_fd))
    }

    /// Whether it lives in a user namespace of its own.
    #[cfg(test)]
    pub(crate) fn has_user_namespace(&self) -> bool {
        self.user.is_some()
    }

    /// Step 2 of the module doc, in the child.
    fn join(&self) -> io::Result<()> {
        if let Some(user) = &self.user {
            nix::sched::setns(user, CloneFlags::CLONE_NEWUSER)?;
        }
        nix::sched::setns(&self.net, CloneFlags::CLONE_NEWNET)?;
        Ok(())
    }
}

/// The holder's shell.
const HOLDER_SHELL: &str = "/bin/sh";

/// How the holder makes the namespace.
#[derive(Debug)]
struct Unshare {
    /// `/proc/self/uid_map` and `gid_map` for the user namespace: the caller's own ids.
    uid_map: String,
    gid_map: String,
    /// Skip the plain network namespace and go through a user namespace (to test that path as root).
    user_namespace_only: bool,
}

impl Unshare {
    fn enter(&self) -> io::Result<()> {
        let plain = !self.user_namespace_only && nix::sched::unshare(CloneFlags::CLONE_NEWNET).is_ok();
        if !plain {
            nix::sched::unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)?;
            // An unprivileged process may map its own ids only after giving up setgroups(2).
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", self.uid_map.as_bytes())?;
            write_proc(c"/proc/self/gid_map", self.gid_map.as_bytes())?;
        }
        loopback_up()
    }
}

impl ChildSetup {
    /// Steps 1 to 3 of the module doc, in the child (or in the spawner, which its children inherit).
    pub(crate) fn enter(&self) -> io::Result<()> {
        nix::unistd::setsid()?;
        if let Some(network) = &self.network {
            network.join()?;
        }
        if let Some(ruleset) = &self.ruleset {
            // A copy (one `dup`), so a command spawned twice is confined twice, never zero times.
            ruleset.try_clone()?.restrict_self().map_err(landlock_error)?;
        }
        Ok(())
    }
}

/// Makes `cmd`'s child run [`ChildSetup::enter`] before it executes the program.
pub(crate) fn install(cmd: &mut std::process::Command, setup: ChildSetup) {
    // SAFETY: the closure runs in the forked child of a multithreaded process, where only
    // async-signal-safe work is sound. `ChildSetup::enter` makes raw system calls only (setsid, setns,
    // dup, prctl, landlock_restrict_self) on values built before the fork (the ruleset's and the
    // namespaces' descriptors); nix's wrappers and the landlock crate's `try_clone`/`restrict_self`
    // neither allocate nor lock on these paths, and the errors built are plain errno values. It touches
    // no state shared with other threads, and the parent's copy of `setup` is untouched.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || setup.enter());
    }
}

fn write_proc(path: &std::ffi::CStr, contents: &[u8]) -> io::Result<()> {
    let fd = nix::fcntl::open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())?;
    let written = nix::unistd::write(&fd, contents)?;
    if written == contents.len() {
        Ok(())
    } else {
        Err(Errno::EIO.into())
    }
}

/// `RTM_NEWLINK` for interface 1 (a new namespace's loopback is always interface 1) setting `IFF_UP`,
/// asking for an acknowledgement: `nlmsghdr` then `ifinfomsg`, in host byte order.
const LOOPBACK_UP: [u8; 32] = loopback_up_request();

const fn loopback_up_request() -> [u8; 32] {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    let mut out = [0u8; 32];
    let len = 32u32.to_ne_bytes();
    let kind = RTM_NEWLINK.to_ne_bytes();
    let flags = (NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes();
    let seq = 1u32.to_ne_bytes();
    let index = 1i32.to_ne_bytes();
    let up = IFF_UP.to_ne_bytes();
    let mut i = 0;
    while i < 4 {
        out[i] = len[i]; // nlmsg_len
        out[8 + i] = seq[i]; // nlmsg_seq (pid at 12..16 stays 0: the kernel fills it)
        // ifinfomsg at 16: family, pad, type (all 0), then index, flags, change
        out[20 + i] = index[i];
        out[24 + i] = up[i];
        out[28 + i] = up[i];
        i += 1;
    }
    out[4] = kind[0];
    out[5] = kind[1];
    out[6] = flags[0];
    out[7] = flags[1];
    out
}

/// Brings the namespace's loopback up over rtnetlink and reads the kernel's acknowledgement.
fn loopback_up() -> io::Result<()> {
    const NLMSG_ERROR: u16 = 2;
    let socket = nix::sys::socket::socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )?;
    let kernel = NetlinkAddr::new(0, 0);
    nix::sys::socket::sendto(socket.as_raw_fd(), &LOOPBACK_UP, &kernel, MsgFlags::empty())?;
    let mut reply = [0u8; 64];
    let n = nix::sys::socket::recv(socket.as_raw_fd(), &mut reply, MsgFlags::empty())?;
    // nlmsghdr (type at 4..6), then for NLMSG_ERROR a negative errno (0 for the acknowledgement).
    if n < 20 || u16::from_ne_bytes([reply[4], reply[5]]) != NLMSG_ERROR {
        return Err(Errno::EPROTO.into());
    }
    match i32::from_ne_bytes([reply[16], reply[17], reply[18], reply[19]]) {
        0 => Ok(()),
        error => Err(io::Error::from_raw_os_error(-error)),
    }
}

/// The errno of a failed Landlock call (the landlock crate's error carries it).
fn landlock_error(error: RulesetError) -> io::Error {
    let errno = match error {
        RulesetError::RestrictSelf(landlock::RestrictSelfError::SetNoNewPrivsCall { source, .. })
        | RulesetError::RestrictSelf(landlock::RestrictSelfError::RestrictSelfCall { source, .. }) => {
            source.raw_os_error()
        }
        _ => None,
    };
    io::Error::from_raw_os_error(errno.unwrap_or(Errno::EPERM as i32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_request_is_a_well_formed_netlink_message() {
        let r = LOOPBACK_UP;
        assert_eq!(u32::from_ne_bytes([r[0], r[1], r[2], r[3]]), 32);
        assert_eq!(u16::from_ne_bytes([r[4], r[5]]), 16);
        assert_eq!(u16::from_ne_bytes([r[6], r[7]]), 5);
        assert_eq!(i32::from_ne_bytes([r[20], r[21], r[22], r[23]]), 1);
        assert_eq!(u32::from_ne_bytes([r[24], r[25], r[26], r[27]]), 1);
        assert_eq!(u32::from_ne_bytes([r[28], r[29], r[30], r[31]]), 1);
    }
}
