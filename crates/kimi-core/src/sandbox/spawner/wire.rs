//! What the agent and its spawner say to each other over their socket pair (a stream socket).
//!
//! Agent to spawner: a message is an 8-byte header (body length, number of descriptors, both `u32`
//! little-endian) sent with `sendmsg`, the descriptors attached to it as `SCM_RIGHTS`, then the body.
//! The kernel hands descriptors over with the first byte of the `sendmsg` that carried them, so they
//! always arrive with the header. Bodies are a tag byte, then fields: `u32`/`u64` little-endian, byte
//! strings as a `u32` length and the bytes (paths, arguments and variables need not be UTF-8).
//!
//! Spawner to agent: fixed 16-byte replies ([`Reply`]), never with descriptors, so the agent's reader
//! never has descriptors forced on it and a confused or hijacked spawner can send nothing but numbers.

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags};

/// Bytes of a request header.
const HEADER: usize = 8;
/// The largest body accepted: more than a command line and environment can be (Linux takes at most a
/// quarter of an 8 MiB stack for both), so only a broken peer hits it.
const MAX_BODY: usize = 8 << 20;
/// The most descriptors one request carries (a command's stdin, stdout and stderr).
const MAX_FDS: usize = 3;
/// Bytes of a reply.
pub(super) const REPLY: usize = 16;

/// How the spawner confines itself, sent once, first. Its descriptors are the private network
/// namespace's and, when one owns it, the user namespace's, in that order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Init {
    /// The Landlock ABI of the rules ([`super::super::rules::abi_number`]); 0 when files are not
    /// confined.
    pub abi: u32,
    /// The writable roots.
    pub roots: Vec<PathBuf>,
    /// Whether the network is cut (a network namespace's descriptor comes with the message).
    pub network: bool,
}

/// One command to start: its stdin, stdout and stderr come with the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Spawn {
    /// Echoed in the reply.
    pub id: u64,
    /// An absolute path (a bare name would be looked up in the spawner's `PATH`).
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The whole environment, in order (a later duplicate wins).
    pub env: Vec<(OsString, OsString)>,
    pub cwd: PathBuf,
}

/// A request to the spawner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Request {
    Init(Init),
    Spawn(Spawn),
}

const TAG_INIT: u8 = 1;
const TAG_SPAWN: u8 = 2;

impl Request {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Self::Init(init) => {
                out.push(TAG_INIT);
                put_u32(&mut out, init.abi);
                out.push(u8::from(init.network));
                put_list(&mut out, init.roots.iter().map(|r| r.as_os_str().as_bytes()));
            }
            Self::Spawn(spawn) => {
                out.push(TAG_SPAWN);
                out.extend_from_slice(&spawn.id.to_le_bytes());
                put_bytes(&mut out, spawn.program.as_os_str().as_bytes());
                put_list(&mut out, spawn.args.iter().map(|a| a.as_bytes()));
                put_list(&mut out, spawn.env.iter().map(|(name, _)| name.as_bytes()));
                put_list(&mut out, spawn.env.iter().map(|(_, value)| value.as_bytes()));
                put_bytes(&mut out, spawn.cwd.as_os_str().as_bytes());
            }
        }
        out
    }

    pub(super) fn decode(body: &[u8]) -> io::Result<Self> {
        let mut r = Fields(body);
        let request = match r.u8()? {
            TAG_INIT => Self::Init(Init {
                abi: r.u32()?,
                network: r.u8()? != 0,
                roots: r.list()?.into_iter().map(PathBuf::from).collect(),
            }),
            TAG_SPAWN => {
                let id = r.u64()?;
                let program = PathBuf::from(r.bytes()?);
                let args = r.list()?;
                let names = r.list()?;
                let values = r.list()?;
                if names.len() != values.len() {
                    return Err(malformed());
                }
                let cwd = PathBuf::from(r.bytes()?);
                Self::Spawn(Spawn {
                    id,
                    program,
                    args,
                    env: names.into_iter().zip(values).collect(),
                    cwd,
                })
            }
            _ => return Err(malformed()),
        };
        if r.0.is_empty() {
            Ok(request)
        } else {
            Err(malformed())
        }
    }
}

fn put_u32(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // A byte string over 4 GiB cannot be part of a body under MAX_BODY anyway: cut, the peer refuses it.
    put_u32(out, u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(bytes);
}

fn put_list<'a>(out: &mut Vec<u8>, items: impl ExactSizeIterator<Item = &'a [u8]>) {
    put_u32(out, u32::try_from(items.len()).unwrap_or(u32::MAX));
    for item in items {
        put_bytes(out, item);
    }
}

fn malformed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "malformed spawner message")
}

/// A body being read.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(malformed());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> io::Result<u32> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self) -> io::Result<u64> {
        let mut le = [0u8; 8];
        le.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(le))
    }

    fn len(&mut self) -> io::Result<usize> {
        usize::try_from(self.u32()?).map_err(|_| malformed())
    }

    fn bytes(&mut self) -> io::Result<OsString> {
        let n = self.len()?;
        Ok(OsString::from_vec(self.take(n)?.to_vec()))
    }

    fn list(&mut self) -> io::Result<Vec<OsString>> {
        let n = self.len()?;
        // Every item takes at least its 4-byte length: a count beyond that is a lie, not an allocation.
        if n > self.0.len() / 4 {
            return Err(malformed());
        }
        (0..n).map(|_| self.bytes()).collect()
    }
}

/// Sends `request` with `fds` attached.
pub(super) fn send(socket: &UnixStream, request: &Request, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let body = request.encode();
    if body.len() > MAX_BODY || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the command line and environment are too large to start",
        ));
    }
    let mut header = [0u8; HEADER];
    header[..4].copy_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    header[4..].copy_from_slice(&u32::try_from(fds.len()).unwrap_or(u32::MAX).to_le_bytes());
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let rights = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage<'_>] = if raw.is_empty() { &[] } else { &rights };
    let sent = loop {
        match nix::sys::socket::sendmsg::<()>(
            socket.as_raw_fd(),
            &[IoSlice::new(&header)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(n) => break n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    // The descriptors went with the first byte; whatever of the header is left is plain data.
    let mut rest = socket;
    rest.write_all(&header[sent..])?;
    rest.write_all(&body)
}

/// Receives one request and its descriptors; `None` at the end of the stream.
pub(super) fn receive(socket: &UnixStream) -> io::Result<Option<(Request, Vec<OwnedFd>)>> {
    let mut header = [0u8; HEADER];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let (got, fds, truncated) = loop {
        let mut iov = [IoSliceMut::new(&mut header)];
        match nix::sys::socket::recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for cmsg in msg.cmsgs()? {
                    if let ControlMessageOwned::ScmRights(received) = cmsg {
                        fds.extend(received.into_iter().map(owned));
                    }
                }
                let truncated = msg.flags.contains(MsgFlags::MSG_CTRUNC);
                break (msg.bytes, fds, truncated);
            }
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    if got == 0 {
        return Ok(None);
    }
    let mut stream = socket;
    stream.read_exact(&mut header[got..])?;
    let len = usize::try_from(u32::from_le_bytes([header[0], header[1], header[2], header[3]]))
        .map_err(|_| malformed())?;
    let count = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if truncated || len > MAX_BODY || usize::try_from(count).ok() != Some(fds.len()) {
        return Err(malformed());
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(Some((Request::decode(&body)?, fds)))
}

/// Takes ownership of a descriptor the kernel just installed in our table.
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` comes from an SCM_RIGHTS message `recvmsg` just returned: the kernel installed it in
    // this process's table for this call alone, so it is open and nothing else owns or will close it.
    #[allow(unsafe_code)]
    unsafe {
        OwnedFd::from_raw_fd(fd)
    }
}

/// What the spawner answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// Confined as the init asked; requests may come.
    Ready,
    /// It could not confine itself (the errno); it exits.
    InitFailed(i32),
    /// Request `id` started as process `pid`, leader of its own process group.
    Spawned { id: u64, pid: u32 },
    /// Request `id` could not start (the errno).
    Failed { id: u64, errno: i32 },
    /// Process `pid` ended with this wait status.
    Exited { pid: u32, status: i32 },
}

impl Reply {
    pub(super) fn encode(self) -> [u8; REPLY] {
        let (tag, small, big): (u32, u32, u64) = match self {
            Self::Ready => (1, 0, 0),
            Self::InitFailed(errno) => (2, errno.cast_unsigned(), 0),
            Self::Spawned { id, pid } => (3, pid, id),
            Self::Failed { id, errno } => (4, errno.cast_unsigned(), id),
            Self::Exited { pid, status } => (5, status.cast_unsigned(), u64::from(pid)),
        };
        let mut out = [0u8; REPLY];
        out[..4].copy_from_slice(&tag.to_le_bytes());
        out[4..8].copy_from_slice(&small.to_le_bytes());
        out[8..].copy_from_slice(&big.to_le_bytes());
        out
    }

    /// `None` for anything a spawner does not send.
    pub(super) fn decode(bytes: &[u8; REPLY]) -> Option<Self> {
        let tag = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let small = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let mut big = [0u8; 8];
        big.copy_from_slice(&bytes[8..]);
        let big = u64::from_le_bytes(big);
        Some(match tag {
            1 => Self::Ready,
            2 => Self::InitFailed(small.cast_signed()),
            3 => Self::Spawned { id: big, pid: small },
            4 => Self::Failed {
                id: big,
                errno: small.cast_signed(),
            },
            5 => Self::Exited {
                pid: u32::try_from(big).ok()?,
                status: small.cast_signed(),
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn spawn() -> Request {
        Request::Spawn(Spawn {
            id: 7,
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".into(), OsString::from_vec(b"echo \xff".to_vec())],
            env: vec![("PATH".into(), "/bin".into()), ("EMPTY".into(), "".into())],
            cwd: PathBuf::from("/tmp"),
        })
    }

    #[test]
    fn requests_and_replies_survive_the_trip() {
        let init = Request::Init(Init {
            abi: 7,
            roots: vec!["/w".into(), "/tmp".into()],
            network: true,
        });
        for request in [init, spawn()] {
            assert_eq!(Request::decode(&request.encode()).unwrap(), request);
        }
        for reply in [
            Reply::Ready,
            Reply::InitFailed(22),
            Reply::Spawned {
                id: u64::MAX,
                pid: 4_194_304,
            },
            Reply::Failed { id: 3, errno: 2 },
            Reply::Exited { pid: 9, status: 0x8b },
        ] {
            assert_eq!(Reply::decode(&reply.encode()), Some(reply));
        }
        assert_eq!(Reply::decode(&[9; REPLY]), None);
    }

    #[test]
    fn malformed_bodies_are_refused_without_allocating_what_they_claim() {
        let good = spawn().encode();
        for cut in 0..good.len() {
            assert!(Request::decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = good;
        trailing.push(0);
        assert!(Request::decode(&trailing).is_err());
        // A spawn whose argument count claims four billion items.
        let mut huge = vec![TAG_SPAWN];
        huge.extend_from_slice(&1u64.to_le_bytes());
        put_bytes(&mut huge, b"/bin/sh");
        put_u32(&mut huge, u32::MAX);
        assert!(Request::decode(&huge).is_err());
        assert!(Request::decode(&[42]).is_err());
    }

    #[test]
    fn descriptors_travel_with_their_request() {
        let (a, b) = UnixStream::pair().unwrap();
        let (read, write) = std::io::pipe().unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsFd;
        send(&a, &spawn(), &[null.as_fd(), write.as_fd(), write.as_fd()]).unwrap();
        drop(write);
        send(&a, &spawn(), &[]).unwrap();
        let (request, fds) = receive(&b).unwrap().unwrap();
        assert_eq!(request, spawn());
        assert_eq!(fds.len(), 3);
        // What was written through the received copy comes out of our pipe.
        std::fs::File::from(fds[1].try_clone().unwrap())
            .write_all(b"hi")
            .unwrap();
        drop(fds);
        let mut got = String::new();
        std::io::Read::read_to_string(&mut &read, &mut got).unwrap();
        assert_eq!(got, "hi");
        let (_, none) = receive(&b).unwrap().unwrap();
        assert!(none.is_empty());
        drop(a);
        assert!(receive(&b).unwrap().is_none());
    }
}
