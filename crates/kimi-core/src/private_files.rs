//! Files only the user can read. The share directory holds API keys (`config.toml`), credentials,
//! and session transcripts full of code and command output, so it and everything the agent writes
//! there are created with mode 0700 (directories) and 0600 (files), whatever the umask; an existing
//! one that is looser (group or others may read it) is tightened when the agent opens it.
//!
//! The owner's own bits are kept when tightening (an executable stays executable for its owner).
//! Files the agent writes in the workspace are not made private: they are the user's project files.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of directories the agent creates in the share directory.
pub const DIR_MODE: u32 = 0o700;
/// Mode of files the agent creates in the share directory.
pub const FILE_MODE: u32 = 0o600;
/// The bits that let anyone but the owner in.
const OTHERS: u32 = 0o077;

/// Creates `path` and its missing parents as private directories, and tightens `path` itself when it
/// already existed looser.
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(path)?;
    tighten(path);
    Ok(())
}

/// Takes group and others' bits off `path` if it has any. Failing to (a file someone else owns) is
/// logged, not an error: the file still works.
pub fn tighten(path: &Path) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode();
    if mode & OTHERS == 0 {
        return;
    }
    if let Err(error) = std::fs::set_permissions(path, Permissions::from_mode(mode & !OTHERS & 0o7777)) {
        tracing::debug!(path = %path.display(), %error, "could not make private");
    }
}

/// The same for an open file (no path to be swapped under us between the open and the change).
pub fn tighten_open(file: &File) -> io::Result<()> {
    let mode = file.metadata()?.permissions().mode();
    if mode & OTHERS != 0 {
        file.set_permissions(Permissions::from_mode(mode & !OTHERS & 0o7777))?;
    }
    Ok(())
}

/// Opens `path` for appending, creating it private; an existing looser file is tightened.
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(path)?;
    tighten_open(&file)?;
    Ok(file)
}

/// Creates (or empties) `path` as a private file.
pub fn create(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)?;
    tighten_open(&file)?;
    Ok(file)
}

/// Creates `path`, which must not exist yet, as a private file.
pub fn create_new(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(FILE_MODE)
        .open(path)?;
    tighten_open(&file)?;
    Ok(file)
}

/// Writes `bytes` to `path` through a private temp file and a rename, so readers never see half a
/// file and the result is private whatever the old file's mode was. Missing parents are created
/// private.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, false)
}

/// [`write_atomic`] for credentials (OAuth tokens, client ids), also flushed to the disk before the
/// rename: a crash must not cost the user a sign-in. Rare enough that the `fsync` does not matter.
pub fn write_secret(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)
}

/// Removes `path`; removing what is not there is fine.
pub fn remove(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn replace(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        create_dir_all(parent)?;
    }
    // A name of its own per write: two writers of one file (threads, or two agents on one
    // credential) never share a temp file, and the last rename wins whole.
    let tmp = parent
        .unwrap_or_else(|| Path::new("."))
        .join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut file = create_new(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn everything_created_is_private_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        create_dir_all(&nested).unwrap();
        assert_eq!((mode(&dir.path().join("a")), mode(&nested)), (0o700, 0o700));
        open_append(&nested.join("log")).unwrap();
        create(&nested.join("new")).unwrap();
        create_new(&nested.join("fresh")).unwrap();
        write_atomic(&nested.join("c/state.json"), b"{}").unwrap();
        for file in ["log", "new", "fresh", "c/state.json"] {
            assert_eq!(mode(&nested.join(file)), 0o600, "{file}");
        }
        assert_eq!(mode(&nested.join("c")), 0o700);
        assert_eq!(std::fs::read(nested.join("c/state.json")).unwrap(), b"{}");
    }

    #[test]
    fn looser_existing_ones_are_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let share = dir.path().join("share");
        std::fs::create_dir(&share).unwrap();
        std::fs::set_permissions(&share, Permissions::from_mode(0o755)).unwrap();
        let log = share.join("kimi.log");
        std::fs::write(&log, "old").unwrap();
        std::fs::set_permissions(&log, Permissions::from_mode(0o644)).unwrap();
        let script = share.join("run.sh");
        std::fs::write(&script, "").unwrap();
        std::fs::set_permissions(&script, Permissions::from_mode(0o755)).unwrap();
        create_dir_all(&share).unwrap();
        open_append(&log).unwrap();
        tighten(&script);
        assert_eq!((mode(&share), mode(&log), mode(&script)), (0o700, 0o600, 0o700));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "old");
        let state = share.join("state.json");
        std::fs::write(&state, "{}").unwrap();
        std::fs::set_permissions(&state, Permissions::from_mode(0o666)).unwrap();
        write_atomic(&state, b"[]").unwrap();
        assert_eq!(mode(&state), 0o600);
    }

    #[test]
    fn secrets_are_replaced_whole_and_leave_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds/token.json");
        write_secret(&path, b"first").unwrap();
        write_secret(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!((mode(&path), mode(path.parent().unwrap())), (0o600, 0o700));
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert!(!path.exists());
    }
}
