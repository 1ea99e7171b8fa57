//! The workspace's extra directories: the ones a session keeps in `state.json` (added with `--add-dir`
//! or `/add-dir`), merged at start with the command line's, and checked before `/add-dir` adds one.
//! The rules are the reference's: paths normalized without resolving symlinks, directories inside the
//! work dir or inside an added directory refused as redundant, vanished ones dropped at start.

use std::path::{Path, PathBuf};

use crate::session::canonical_work_dir;

/// The extra directories a session starts with, and whether `state.json` must be rewritten (a stored
/// directory vanished, or the command line added one).
#[derive(Debug, PartialEq, Eq)]
pub struct StartDirs {
    /// The directories, stored ones first.
    pub dirs: Vec<PathBuf>,
    /// Whether they differ from what `state.json` holds.
    pub changed: bool,
}

/// Merges the stored directories (dropping those that are no longer directories) with `--add-dir`
/// (skipping those inside the work dir and those already present).
pub fn start_dirs(stored: &[String], cli: &[PathBuf], work_dir: &Path) -> StartDirs {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut changed = false;
    for stored in stored {
        let dir = canonical_work_dir(Path::new(stored));
        if dir.is_dir() {
            dirs.push(dir);
        } else {
            tracing::warn!(dir = %stored, "additional directory no longer exists; removed from the session");
            changed = true;
        }
    }
    for dir in cli {
        let dir = canonical_work_dir(dir);
        if dir.starts_with(work_dir) {
            tracing::info!(dir = %dir.display(), "--add-dir inside the work dir; skipped");
        } else if !dirs.contains(&dir) {
            dirs.push(dir);
            changed = true;
        }
    }
    StartDirs { dirs, changed }
}

/// Why `/add-dir` refuses a directory; the text is the reference's answer.
pub fn refusal(dir: &Path, work_dir: &Path, added: &[PathBuf]) -> Option<String> {
    let shown = dir.display();
    if !dir.exists() {
        return Some(format!("Directory does not exist: {shown}"));
    }
    if !dir.is_dir() {
        return Some(format!("Not a directory: {shown}"));
    }
    if added.iter().any(|a| a == dir) {
        return Some(format!("Directory already in workspace: {shown}"));
    }
    if dir.starts_with(work_dir) {
        return Some(format!(
            "Directory is already within the working directory: {shown}"
        ));
    }
    added.iter().find(|a| dir.starts_with(a)).map(|a| {
        format!(
            "Directory is already within an added directory `{}`: {shown}",
            a.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn vanished_stored_dirs_are_dropped_and_cli_dirs_added_once() {
        let tmp = tempfile::tempdir().unwrap();
        let (work, a, b) = (
            tmp.path().join("work"),
            tmp.path().join("a"),
            tmp.path().join("b"),
        );
        for d in [&work, &a, &b] {
            std::fs::create_dir(d).unwrap();
        }
        let gone = tmp.path().join("gone").display().to_string();
        let stored = [a.display().to_string(), gone];
        let cli = [b.clone(), a.clone(), work.join("inside")];
        assert_eq!(
            start_dirs(&stored, &cli, &work),
            StartDirs {
                dirs: vec![a.clone(), b],
                changed: true
            }
        );
        let stored = [a.display().to_string()];
        assert_eq!(
            start_dirs(&stored, std::slice::from_ref(&a), &work),
            StartDirs {
                dirs: vec![a],
                changed: false
            }
        );
    }

    #[test]
    fn refusals_name_the_reason() {
        let tmp = tempfile::tempdir().unwrap();
        let (work, a) = (tmp.path().join("work"), tmp.path().join("a"));
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::create_dir_all(a.join("deep")).unwrap();
        std::fs::write(tmp.path().join("file"), "").unwrap();
        let added = [a.clone()];
        let refuse = |dir: &Path| refusal(dir, &work, &added);
        let missing = tmp.path().join("missing");
        assert_eq!(
            refuse(&missing),
            Some(format!("Directory does not exist: {}", missing.display()))
        );
        assert!(refuse(&tmp.path().join("file")).is_some_and(|r| r.starts_with("Not a directory: ")));
        assert!(refuse(&a).is_some_and(|r| r.starts_with("Directory already in workspace: ")));
        assert!(
            refuse(&work.join("sub"))
                .is_some_and(|r| r.starts_with("Directory is already within the working directory: "))
        );
        assert_eq!(
            refuse(&a.join("deep")),
            Some(format!(
                "Directory is already within an added directory `{}`: {}",
                a.display(),
                a.join("deep").display()
            ))
        );
        assert_eq!(refuse(tmp.path()), None);
    }
}
