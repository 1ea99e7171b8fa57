//! Where a path really leads, and opening exactly that file.
//!
//! The model names paths, and anyone who could write to the workspace may have planted symlinks in it.
//! So every decision the file tools make (inside the workspace or not, a secret or not, which file an
//! approval names) is made on the *real* path: each directory resolved through its symlinks, and a
//! final symlink followed to its target (a dangling one to the file it would create). A real path
//! holds no symlink, so the tool then opens it refusing to follow any: `openat2` with
//! `RESOLVE_NO_SYMLINKS` on Linux, a walk from `/` opening each component with `O_NOFOLLOW` where the
//! kernel has no `openat2` (or a seccomp filter hides it) and on other systems. If something on the
//! path was swapped for a symlink after the decision, the open fails instead of landing elsewhere.
//!
//! All of this goes through `rustix`, so there is no `unsafe` here.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// Symlinks followed at most while resolving one path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// The real path of the absolute `path`: every directory on it resolved (they must exist) and a final
/// symlink followed, repeatedly, to its target. A final component that does not exist is kept as it is,
/// so a file about to be created has a real path too.
pub(crate) fn real_path(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let (Some(parent), Some(name)) = (current.parent(), current.file_name()) else {
            // `/`, or a path ending in `..`: a directory, which must exist.
            return std::fs::canonicalize(&current);
        };
        let candidate = std::fs::canonicalize(parent)?.join(name);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&candidate)?;
                // A relative target starts at the link's own (real) directory; an absolute one replaces it.
                current = candidate
                    .parent()
                    .map_or_else(|| target.clone(), |dir| dir.join(&target));
            }
            _ => return Ok(candidate),
        }
    }
    Err(Errno::LOOP.into())
}

/// What a resolved file is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenFor {
    /// Reading.
    Read,
    /// Replacing the whole content (created when missing).
    Overwrite,
    /// Adding to the end (created when missing).
    Append,
}

impl OpenFor {
    fn flags(self) -> OFlags {
        // Non-blocking: a FIFO put in the file's place must not hang the tool (regular files ignore it).
        let common = OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        common
            | match self {
                Self::Read => OFlags::RDONLY,
                Self::Overwrite => OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
                Self::Append => OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND,
            }
    }
}

/// Whose a written file is, which decides its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The user's project file: created 0666 less the umask, as `std::fs::write` creates files.
    User,
    /// The agent's own file (the plan file, under `~/.kimi`): created 0600 and tightened when it is
    /// looser, as everything the agent keeps there ([`kimi_core::private_files`]).
    Agent,
}

/// Opens the regular file at `real` (a path [`real_path`] returned) without following any symlink.
/// A symlink met on the way fails with [`changed_error`]'s text; anything but a regular file fails too.
pub(crate) fn open_real(real: &Path, how: OpenFor) -> io::Result<File> {
    open_owned(real, how, Owner::User)
}

/// [`open_real`] for a file that belongs to `owner`.
fn open_owned(real: &Path, how: OpenFor, owner: Owner) -> io::Result<File> {
    // openat2 wants no mode without O_CREAT.
    let mode = match (how, owner) {
        (OpenFor::Read, _) => Mode::empty(),
        (OpenFor::Overwrite | OpenFor::Append, Owner::User) => Mode::from_bits_truncate(0o666),
        (OpenFor::Overwrite | OpenFor::Append, Owner::Agent) => {
            Mode::from_bits_truncate(kimi_core::private_files::FILE_MODE)
        }
    };
    let fd = open_no_symlinks(real, how.flags(), mode).map_err(|errno| match errno {
        Errno::LOOP => changed_error(real),
        other => other.into(),
    })?;
    let file = File::from(fd);
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(Errno::ISDIR.into());
    }
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            real.display()
        )));
    }
    if owner == Owner::Agent {
        kimi_core::private_files::tighten_open(&file)?;
    }
    Ok(file)
}

/// The whole content of the regular file at `real`, read without following symlinks.
pub(crate) fn read_real(real: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_real(real, OpenFor::Read)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `bytes` to the regular file at `real` (replacing or appending, created when missing, with the
/// mode `owner` gives) without following symlinks, and returns the file's size afterwards.
pub(crate) fn write_real(real: &Path, how: OpenFor, owner: Owner, bytes: &[u8]) -> io::Result<u64> {
    let mut file = open_owned(real, how, owner)?;
    file.write_all(bytes)?;
    file.flush()?;
    Ok(file.metadata()?.len())
}

/// The error when a path decided on was changed to go through a symlink before it was opened.
fn changed_error(real: &Path) -> io::Error {
    io::Error::other(format!(
        "{} changed after it was checked: a symbolic link now stands on its path",
        real.display()
    ))
}

#[cfg(target_os = "linux")]
fn open_no_symlinks(path: &Path, flags: OFlags, mode: Mode) -> Result<rustix::fd::OwnedFd, Errno> {
    use rustix::fs::ResolveFlags;
    match rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        flags,
        mode,
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    ) {
        // Kernels before 5.6, and sandboxes whose seccomp filter refuses the call.
        Err(Errno::NOSYS | Errno::PERM) => open_by_walk(path, flags, mode),
        other => other,
    }
}

#[cfg(not(target_os = "linux"))]
fn open_no_symlinks(path: &Path, flags: OFlags, mode: Mode) -> Result<rustix::fd::OwnedFd, Errno> {
    open_by_walk(path, flags, mode)
}

/// Opens `path` one component at a time from `/`, each with `O_NOFOLLOW`, so no symlink is followed.
fn open_by_walk(path: &Path, flags: OFlags, mode: Mode) -> Result<rustix::fd::OwnedFd, Errno> {
    let mut names: Vec<&OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir => {}
            Component::Normal(name) => names.push(name),
            // Real paths are absolute and hold no `.` or `..`.
            Component::Prefix(_) | Component::CurDir | Component::ParentDir => return Err(Errno::INVAL),
        }
    }
    let Some((last, dirs)) = names.split_last() else {
        return Err(Errno::ISDIR);
    };
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open("/", dir_flags, Mode::empty())?;
    for name in dirs {
        dir = rustix::fs::openat(&dir, *name, dir_flags, Mode::empty())?;
    }
    rustix::fs::openat(&dir, *last, flags, mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::symlink;

    fn temp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        (dir, root)
    }

    #[test]
    fn plain_paths_are_their_own_real_path() {
        let (_dir, root) = temp();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        assert_eq!(real_path(&root.join("a.txt")).unwrap(), root.join("a.txt"));
        // A file about to be created keeps its name.
        assert_eq!(real_path(&root.join("new.txt")).unwrap(), root.join("new.txt"));
        assert_eq!(real_path(Path::new("/")).unwrap(), PathBuf::from("/"));
    }

    #[test]
    fn symlinks_are_followed_to_their_target_wherever_they_stand() {
        let (_dir, root) = temp();
        let (_other, outside) = temp();
        std::fs::write(outside.join("secret"), "s").unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        symlink(outside.join("secret"), root.join("notes.txt")).unwrap();
        symlink(&outside, root.join("linkdir")).unwrap();
        symlink("../real", root.join("real/self")).unwrap();
        symlink(outside.join("not-yet"), root.join("dangling")).unwrap();
        symlink("notes.txt", root.join("chain")).unwrap();
        for (named, real) in [
            (root.join("notes.txt"), outside.join("secret")),
            (root.join("linkdir/secret"), outside.join("secret")),
            (root.join("linkdir/new"), outside.join("new")),
            (root.join("real/self/x"), root.join("real/x")),
            (root.join("dangling"), outside.join("not-yet")),
            (root.join("chain"), outside.join("secret")),
        ] {
            assert_eq!(real_path(&named).unwrap(), real, "{}", named.display());
        }
    }

    #[test]
    fn a_missing_directory_or_a_loop_is_an_error() {
        let (_dir, root) = temp();
        assert_eq!(
            real_path(&root.join("no/such/file")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        symlink("b", root.join("a")).unwrap();
        symlink("a", root.join("b")).unwrap();
        assert!(real_path(&root.join("a")).is_err());
    }

    #[test]
    fn opening_reads_and_writes_the_real_file() {
        let (_dir, root) = temp();
        let path = root.join("f.txt");
        open_real(&path, OpenFor::Overwrite)
            .unwrap()
            .write_all(b"one")
            .unwrap();
        open_real(&path, OpenFor::Append)
            .unwrap()
            .write_all(b"two")
            .unwrap();
        let mut text = String::new();
        open_real(&path, OpenFor::Read)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "onetwo");
        open_real(&path, OpenFor::Overwrite)
            .unwrap()
            .write_all(b"3")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "3");
    }

    #[test]
    fn the_agents_files_are_private_and_the_users_follow_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let (_dir, root) = temp();
        let (plan, project) = (root.join("plan.md"), root.join("main.rs"));
        write_real(&plan, OpenFor::Overwrite, Owner::Agent, b"plan").unwrap();
        write_real(&project, OpenFor::Overwrite, Owner::User, b"fn main() {}").unwrap();
        assert_eq!(mode(&plan), 0o600);
        std::fs::write(root.join("by-std"), "").unwrap();
        assert_eq!(mode(&project), mode(&root.join("by-std")));
        // An older plan left readable by others is tightened when the agent writes it again.
        std::fs::set_permissions(&plan, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_real(&plan, OpenFor::Append, Owner::Agent, b" more").unwrap();
        assert_eq!(mode(&plan), 0o600);
        assert_eq!(std::fs::read_to_string(&plan).unwrap(), "plan more");
    }

    #[test]
    fn a_symlink_swapped_in_after_the_check_is_refused() {
        let (_dir, root) = temp();
        let (_other, outside) = temp();
        std::fs::write(outside.join("bashrc"), "keep").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        let planned = real_path(&root.join("d/notes.md")).unwrap();
        // The file itself becomes a symlink.
        symlink(outside.join("bashrc"), root.join("d/notes.md")).unwrap();
        for how in [OpenFor::Read, OpenFor::Overwrite, OpenFor::Append] {
            let error = open_real(&planned, how).unwrap_err();
            assert!(
                error.to_string().contains("changed after it was checked"),
                "{error}"
            );
        }
        // A directory on the way becomes a symlink.
        std::fs::remove_file(root.join("d/notes.md")).unwrap();
        std::fs::remove_dir(root.join("d")).unwrap();
        symlink(&outside, root.join("d")).unwrap();
        std::fs::write(outside.join("notes.md"), "keep").unwrap();
        assert!(open_real(&planned, OpenFor::Overwrite).is_err());
        assert_eq!(std::fs::read_to_string(outside.join("bashrc")).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(outside.join("notes.md")).unwrap(), "keep");
    }

    #[test]
    fn the_walk_refuses_symlinks_as_openat2_does() {
        let (_dir, root) = temp();
        let (_other, outside) = temp();
        std::fs::write(outside.join("t"), "x").unwrap();
        std::fs::write(root.join("plain"), "p").unwrap();
        symlink(outside.join("t"), root.join("link")).unwrap();
        symlink(&outside, root.join("dirlink")).unwrap();
        let flags = OpenFor::Read.flags();
        assert!(open_by_walk(&root.join("plain"), flags, Mode::empty()).is_ok());
        assert_eq!(
            open_by_walk(&root.join("link"), flags, Mode::empty()).unwrap_err(),
            Errno::LOOP
        );
        assert!(open_by_walk(&root.join("dirlink/t"), flags, Mode::empty()).is_err());
        assert_eq!(
            open_by_walk(Path::new("/a/../b"), flags, Mode::empty()).unwrap_err(),
            Errno::INVAL
        );
    }

    #[test]
    fn only_regular_files_open() {
        let (_dir, root) = temp();
        std::fs::create_dir(root.join("d")).unwrap();
        assert!(open_real(&root.join("d"), OpenFor::Read).is_err());
        let fifo = root.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let error = open_real(&fifo, OpenFor::Read).unwrap_err();
            assert!(error.to_string().contains("not a regular file"), "{error}");
        }
    }
}
