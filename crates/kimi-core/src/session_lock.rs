//! One writer per session: [`SessionLock`], an advisory lock on a file in the session directory.
//!
//! A process writes a session's files only while it holds this lock; another process on the same
//! session still serves what only reads (see [`crate::session_gate`]). The lock is `flock(2)` on
//! [`LOCK_FILE`], so the kernel releases it when its holder dies, however it dies: a killed holder never
//! leaves the session stuck, and a file left behind by one blocks nobody. The file holds the holder's pid,
//! so a refused process can say who holds the session.
//!
//! The holder removes the file when it lets go. Whoever locks a file checks afterwards that it is still
//! the one at the path: a process that opened the file just before the holder removed it would
//! otherwise hold a lock on a file nobody else can see, beside a new holder of the new file.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The lock file's name inside the session directory.
pub const LOCK_FILE: &str = "kimi-agent.lock";

/// How often a lock that vanished under us (its holder was removing it) is tried again before giving up.
/// Each retry means another holder let go in between, so a few are plenty.
const ATTEMPTS: usize = 8;

/// The held lock of one session. The session's files may be written while it lives; dropping it (or
/// [`SessionLock::release`]) lets the next process take the session.
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
    file: Flock<File>,
}

/// Who holds a session this process could not lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionHolder {
    /// The holder's pid, as it wrote it in the lock file; `None` in the instant between its lock and
    /// its write, or when the file is not ours.
    pub pid: Option<u32>,
}

impl SessionHolder {
    /// Whether the process named in the lock file is gone. Its lock then outlives it only in a child
    /// it forked just before it died, between `fork` and `exec` (which closes the lock's descriptor):
    /// the lock is free a moment later.
    pub fn is_gone(&self) -> bool {
        let Some(pid) = self.pid.and_then(|pid| i32::try_from(pid).ok()) else {
            return false;
        };
        // Signal 0 only checks: ESRCH means no such process; EPERM one of another user's.
        matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(Errno::ESRCH)
        )
    }
}

impl std::fmt::Display for SessionHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "pid {pid}"),
            None => f.write_str("pid unknown"),
        }
    }
}

/// The outcome of [`SessionLock::try_acquire`].
#[derive(Debug)]
pub enum LockAttempt {
    /// This process holds the session now.
    Acquired(SessionLock),
    /// Another process does.
    Held(SessionHolder),
}

/// Why the lock could not even be tried.
#[derive(Debug, thiserror::Error)]
#[error("cannot lock the session ({path}): {source}")]
pub struct LockError {
    /// The lock file.
    pub path: PathBuf,
    /// What went wrong.
    pub source: std::io::Error,
}

impl SessionLock {
    /// Takes the lock of the session in `session_dir` (created if missing) without waiting: either it
    /// is ours now, or someone else holds it.
    pub fn try_acquire(session_dir: &Path) -> Result<LockAttempt, LockError> {
        let path = session_dir.join(LOCK_FILE);
        let error = |source| LockError {
            path: path.clone(),
            source,
        };
        for _ in 0..ATTEMPTS {
            crate::private_files::create_dir_all(session_dir).map_err(error)?;
            let file = create_lock_file(&path).map_err(error)?;
            let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(file) => file,
                Err((_, Errno::EWOULDBLOCK)) => return Ok(LockAttempt::Held(read_holder(&path))),
                Err((_, errno)) => return Err(error(errno.into())),
            };
            if !is_file_at(&file, &path) {
                // Its holder removed it between our open and our lock: try the file there now.
                continue;
            }
            let lock = Self {
                path: path.clone(),
                file,
            };
            lock.write_pid().map_err(error)?;
            return Ok(LockAttempt::Acquired(lock));
        }
        Err(error(std::io::Error::other(
            "the lock file kept changing under us",
        )))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lets go of the session: the file is removed, then the lock released (the same as dropping it).
    pub fn release(self) {
        drop(self);
    }

    /// Writes our pid over the file's first line, then cuts what an earlier, longer pid left: a reader
    /// sees the previous first line or ours, never an empty file (except before the very first write).
    fn write_pid(&self) -> std::io::Result<()> {
        let text = format!("{}\n", std::process::id());
        let mut file: &File = &self.file;
        std::io::Seek::rewind(&mut file)?;
        file.write_all(text.as_bytes())?;
        file.set_len(text.len() as u64)
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Only while the path is still our file: the session directory may have been removed (an empty
        // session) and the name taken by the next holder since.
        if is_file_at(&self.file, &self.path)
            && let Err(e) = std::fs::remove_file(&self.path)
        {
            tracing::debug!(path = %self.path.display(), error = %e, "lock file not removed");
        }
        // Dropping `file` unlocks and closes it.
    }
}

/// Opens (creating if needed) the lock file. The one place it is created, so its permissions are set
/// in one place. Like every file std opens, it is close-on-exec: a child process (a shell command, an
/// MCP server, a kept-alive background task) must never inherit the lock and keep the session held
/// after we are gone.
fn create_lock_file(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(crate::private_files::FILE_MODE)
        .open(path)
        .inspect(|file| {
            // One left readable by others by an older version is tightened too.
            let _ = crate::private_files::tighten_open(file);
        })
}

/// Whether `file` is the file at `path` now (same device and inode).
fn is_file_at(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(ours), Ok(there)) => ours.dev() == there.dev() && ours.ino() == there.ino(),
        _ => false,
    }
}

/// Reads the holder's pid from the lock file's first line.
fn read_holder(path: &Path) -> SessionHolder {
    let mut text = String::new();
    let pid = File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .ok()
        .and_then(|_| text.lines().next()?.trim().parse().ok());
    SessionHolder { pid }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn acquired(attempt: LockAttempt) -> SessionLock {
        match attempt {
            LockAttempt::Acquired(lock) => lock,
            LockAttempt::Held(holder) => panic!("held by {holder:?}"),
        }
    }

    fn held(attempt: LockAttempt) -> SessionHolder {
        match attempt {
            LockAttempt::Held(holder) => holder,
            LockAttempt::Acquired(lock) => panic!("acquired {}", lock.path().display()),
        }
    }

    // flock belongs to an open file, not a process: two opens in one process exclude each other as two
    // processes would, so these tests need no second process.

    #[test]
    fn a_held_session_names_its_holder_and_is_free_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquired(SessionLock::try_acquire(dir.path()).unwrap());
        assert_eq!(
            std::fs::read_to_string(first.path()).unwrap(),
            format!("{}\n", std::process::id())
        );
        let holder = held(SessionLock::try_acquire(dir.path()).unwrap());
        assert_eq!(holder.pid, Some(std::process::id()));
        first.release();
        assert!(!dir.path().join(LOCK_FILE).exists());
        let _second = acquired(SessionLock::try_acquire(dir.path()).unwrap());
    }

    #[test]
    fn a_lock_file_left_by_a_dead_process_blocks_nobody_and_gets_our_pid() {
        let dir = tempfile::tempdir().unwrap();
        // A long pid of a process that is gone: the file is there, but nobody has it locked.
        // Left readable by others, as an older version made it.
        std::fs::write(dir.path().join(LOCK_FILE), "4000000000\n").unwrap();
        let others = std::fs::Permissions::from_mode(0o644);
        std::fs::set_permissions(dir.path().join(LOCK_FILE), others).unwrap();
        let lock = acquired(SessionLock::try_acquire(dir.path()).unwrap());
        assert_eq!(
            std::fs::read_to_string(lock.path()).unwrap(),
            format!("{}\n", std::process::id())
        );
        let mode = std::fs::metadata(lock.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_missing_session_directory_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("sessions/abc/s1");
        let _lock = acquired(SessionLock::try_acquire(&session).unwrap());
        assert!(session.join(LOCK_FILE).is_file());
    }

    #[test]
    fn a_lock_on_a_file_its_holder_removed_is_not_taken_for_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let first = acquired(SessionLock::try_acquire(dir.path()).unwrap());
        // A late process opened the file before the holder removed it...
        let stale = create_lock_file(&path).unwrap();
        first.release();
        // ...and wins the old file's lock: the path check must send it to the new file.
        let stale = Flock::lock(stale, FlockArg::LockExclusiveNonblock).unwrap();
        assert!(!is_file_at(&stale, &path));
        let lock = acquired(SessionLock::try_acquire(dir.path()).unwrap());
        assert!(is_file_at(&lock.file, &path));
    }

    #[test]
    fn dropping_a_lock_whose_directory_was_removed_spares_the_next_holders_file() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s1");
        let first = acquired(SessionLock::try_acquire(&dir).unwrap());
        // The holder deletes its empty session, and another process starts the session anew.
        std::fs::remove_dir_all(&dir).unwrap();
        let second = acquired(SessionLock::try_acquire(&dir).unwrap());
        drop(first);
        assert!(second.path().is_file());
        let holder = held(SessionLock::try_acquire(&dir).unwrap());
        assert_eq!(holder.pid, Some(std::process::id()));
    }

    #[test]
    fn a_child_process_does_not_inherit_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let lock = acquired(SessionLock::try_acquire(dir.path()).unwrap());
        // A child that outlives our hold on the session (a kept-alive background task).
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        drop(lock);
        let taken = SessionLock::try_acquire(dir.path()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        acquired(taken);
    }

    #[test]
    fn a_holder_is_gone_only_when_its_pid_names_no_process() {
        assert!(
            !SessionHolder {
                pid: Some(std::process::id())
            }
            .is_gone()
        );
        assert!(!SessionHolder { pid: None }.is_gone());
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(SessionHolder { pid: Some(pid) }.is_gone());
    }

    #[test]
    fn an_unreadable_pid_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        std::fs::write(&path, "not a pid").unwrap();
        assert_eq!(read_holder(&path), SessionHolder { pid: None });
        assert_eq!(
            read_holder(&dir.path().join("missing")),
            SessionHolder { pid: None }
        );
    }
}
