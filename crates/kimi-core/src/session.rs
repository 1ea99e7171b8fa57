//! Session directories and the files around them (reference `session.py`, `metadata.py`).
//!
//! A session lives in `<share>/sessions/<md5 of the work dir>/<session id>/` with `context.jsonl`,
//! `wire.jsonl` and `state.json`. `kimi.json` in the share dir remembers, per work dir, the last session,
//! which `--continue` resumes. The work dir is made absolute and normalized but symlinks are not resolved,
//! exactly as the reference hashes it, so both implementations find the same directory.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which session to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChoice {
    /// A new session with a fresh id.
    New,
    /// This id: resumed if it exists, created with this id otherwise.
    Id(String),
    /// The last session of this work dir.
    Continue,
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// `--continue` without an earlier session (reference wording).
    #[error("No previous session found for the working directory")]
    NoPreviousSession,
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// What.
        source: std::io::Error,
    },
}

/// An opened session's paths.
#[derive(Debug, Clone)]
pub struct Session {
    /// The session id.
    pub id: String,
    /// The normalized work dir.
    pub work_dir: PathBuf,
    /// The session directory.
    pub dir: PathBuf,
    /// Whether the directory existed already (a resume).
    pub resumed: bool,
}

impl Session {
    /// `context.jsonl`.
    pub fn context_path(&self) -> PathBuf {
        self.dir.join("context.jsonl")
    }

    /// `wire.jsonl`.
    pub fn wire_path(&self) -> PathBuf {
        self.dir.join("wire.jsonl")
    }

    /// `state.json`.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }
}

/// Makes `path` absolute and removes `.`/`..` without touching the file system (Python `normpath`).
pub fn canonical_work_dir(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Opens (creating if needed) the session `choice` names for `work_dir`.
pub fn open(share_dir: &Path, work_dir: &Path, choice: &SessionChoice) -> Result<Session, SessionError> {
    let work_dir = canonical_work_dir(work_dir);
    let id = match choice {
        SessionChoice::New => uuid::Uuid::new_v4().to_string(),
        SessionChoice::Id(id) => id.clone(),
        SessionChoice::Continue => {
            last_session_id(share_dir, &work_dir).ok_or(SessionError::NoPreviousSession)?
        }
    };
    let dir = crate::paths::work_dir_sessions_dir(share_dir, &work_dir).join(&id);
    let resumed = dir.is_dir();
    crate::private_files::create_dir_all(&dir).map_err(|source| SessionError::Io {
        path: dir.clone(),
        source,
    })?;
    // The work dir's folder and `sessions/` may predate private modes.
    for parent in dir.ancestors().skip(1).take(2) {
        crate::private_files::tighten(parent);
    }
    Ok(Session {
        id,
        work_dir,
        dir,
        resumed,
    })
}

/// `kimi.json`: `{"work_dirs": [{"path", "kaos", "last_session_id"}]}` plus whatever else it holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Metadata {
    #[serde(default)]
    work_dirs: Vec<WorkDirEntry>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WorkDirEntry {
    path: String,
    #[serde(default = "local")]
    kaos: String,
    #[serde(default)]
    last_session_id: Option<String>,
    #[serde(flatten)]
    other: serde_json::Map<String, Value>,
}

fn local() -> String {
    "local".to_owned()
}

fn read_metadata(share_dir: &Path) -> Metadata {
    std::fs::read_to_string(crate::paths::metadata_file(share_dir))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

fn last_session_id(share_dir: &Path, work_dir: &Path) -> Option<String> {
    let path = work_dir.to_string_lossy();
    read_metadata(share_dir)
        .work_dirs
        .into_iter()
        .find(|entry| entry.path == path && entry.kaos == "local")
        .and_then(|entry| entry.last_session_id)
}

/// The work dir whose sessions live under `sessions/<hash>/`, found among those `kimi.json` knows.
pub fn work_dir_with_hash(share_dir: &Path, hash: &str) -> Option<PathBuf> {
    read_metadata(share_dir)
        .work_dirs
        .into_iter()
        .map(|entry| PathBuf::from(entry.path))
        .find(|path| crate::paths::work_dir_sessions_dir(share_dir, path).ends_with(hash))
}

/// Records `session` as the last one of its work dir (atomically: write a temp file, then rename).
pub fn remember_last_session(share_dir: &Path, session: &Session) -> Result<(), SessionError> {
    let mut metadata = read_metadata(share_dir);
    let path = session.work_dir.to_string_lossy().into_owned();
    match metadata
        .work_dirs
        .iter_mut()
        .find(|e| e.path == path && e.kaos == "local")
    {
        Some(entry) => entry.last_session_id = Some(session.id.clone()),
        None => metadata.work_dirs.push(WorkDirEntry {
            path,
            kaos: local(),
            last_session_id: Some(session.id.clone()),
            other: Default::default(),
        }),
    }
    let target = crate::paths::metadata_file(share_dir);
    let text = serde_json::to_string_pretty(&metadata).unwrap_or_default();
    write_atomic(&target, text.as_bytes())
}

/// Writes `bytes` to `path` through a temp file and a rename, so readers never see half a file; the
/// file is private (0600), as everything in the share directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    crate::private_files::write_atomic(path, bytes).map_err(|source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Removes a session directory that holds no conversation (reference: empty sessions are deleted).
pub fn remove_if_empty(session: &Session, has_conversation: bool) {
    if has_conversation {
        return;
    }
    if let Err(e) = std::fs::remove_dir_all(&session.dir) {
        tracing::warn!(dir = %session.dir.display(), error = %e, "empty session not removed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_dirs_are_normalized_without_resolving_symlinks() {
        assert_eq!(
            canonical_work_dir(Path::new("/a/./b/../c")),
            PathBuf::from("/a/c")
        );
        assert_eq!(canonical_work_dir(Path::new("/a/b/")), PathBuf::from("/a/b"));
    }

    #[test]
    fn the_sessions_dir_is_the_md5_of_the_path() {
        // md5("/tmp/work") computed independently.
        let dir = crate::paths::work_dir_sessions_dir(Path::new("/share"), Path::new("/tmp/work"));
        assert_eq!(
            dir,
            PathBuf::from(format!("/share/sessions/{:x}", md5::compute(b"/tmp/work")))
        );
    }

    #[test]
    fn continue_finds_the_remembered_session() {
        let share = tempfile::tempdir().unwrap();
        let work = Path::new("/some/work");
        assert!(matches!(
            open(share.path(), work, &SessionChoice::Continue),
            Err(SessionError::NoPreviousSession)
        ));
        let first = open(share.path(), work, &SessionChoice::Id("s1".into())).unwrap();
        assert!(!first.resumed);
        remember_last_session(share.path(), &first).unwrap();
        let again = open(share.path(), work, &SessionChoice::Continue).unwrap();
        assert_eq!(again.id, "s1");
        assert!(again.resumed);
    }
}
