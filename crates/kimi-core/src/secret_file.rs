//! Files that hold secrets (OAuth tokens): replaced atomically and readable by their owner only.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` through a temp file and a rename, so a concurrent reader sees the old
/// content or the new, never half of either. The file is mode 0600 whatever the umask; a missing
/// parent directory is created with mode 0700.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let temp = dir.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        // `mode` is filtered by the umask; the secret must not be readable by anyone else regardless.
        out.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        out.write_all(bytes)?;
        out.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Removes `path`; removing what is not there is fine.
pub fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn secrets_are_private_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds/token.json");
        write(&path, b"first").unwrap();
        write(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1,
            "no temp file left"
        );
        remove(&path).unwrap();
        remove(&path).unwrap();
        assert!(!path.exists());
    }
}
