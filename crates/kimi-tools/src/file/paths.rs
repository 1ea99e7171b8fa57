//! Path handling shared by the file tools: `~` expansion, the reference's lexical "canonical" form
//! (absolute, `.`/`..` folded, symlinks left alone), the workspace test, and the two-level directory
//! listing the Glob tool returns when it refuses a pattern.
//!
//! Everything here is lexical except `list_directory`; relative paths resolve against the work dir
//! we are given, never the process's current directory.

use std::path::{Component, Path, PathBuf};

use kimi_core::Environment;

/// Expands a leading `~` (alone or followed by `/`) to `$HOME`, as the reference's `expanduser` does
/// for the current user. `~user` forms are left as they are.
pub(crate) fn expand_user(raw: &str) -> PathBuf {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match (raw, home) {
        ("~", Some(home)) => PathBuf::from(home),
        (r, Some(home)) if r.starts_with("~/") => PathBuf::from(home).join(&r[2..]),
        _ => PathBuf::from(raw),
    }
}

/// The path as the reference prints a `PurePath` built from it: repeated slashes and `.` components
/// dropped, no trailing slash, `.` for nothing.
pub(crate) fn pure_display(path: &Path) -> String {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        out.to_string_lossy().into_owned()
    }
}

/// Joins `path` to `base` when it is relative, then folds `.` and `..` lexically (`..` never climbs
/// above the root). Symlinks are not resolved, as in the reference's `KaosPath.canonical()`.
pub(crate) fn canonical(path: &Path, base: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    normalize(&joined)
}

/// Folds `.` and `..` components without touching the file system.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !path.is_absolute() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

/// Whether `path` (already canonical) lies in the work dir or one of the additional directories.
/// The test is by path components, so `/work-other` is not inside `/work`.
pub(crate) fn is_within_workspace(path: &Path, env: &Environment) -> bool {
    path.starts_with(&env.work_dir) || env.in_additional_dir(path)
}

/// The reference's rule for paths the model gives the file tools: a relative path must land inside
/// the workspace; anything outside needs an absolute path. `verb` completes "to {verb} a file"
/// (`read`, `write`, `edit`). Returns the canonical path, or the error message and brief.
pub(crate) fn resolve_tool_path(raw: &str, env: &Environment, verb: &str) -> Result<PathBuf, String> {
    let expanded = expand_user(raw);
    let resolved = canonical(&expanded, &env.work_dir);
    if !is_within_workspace(&resolved, env) && !expanded.is_absolute() {
        return Err(format!(
            "`{}` is not an absolute path. You must provide an absolute path to {verb} a file outside the working directory.",
            pure_display(&expanded)
        ));
    }
    Ok(resolved)
}

/// How many entries of the listed directory itself are shown.
const LIST_ROOT_WIDTH: usize = 30;
/// How many entries of each of its subdirectories are shown.
const LIST_CHILD_WIDTH: usize = 10;

/// A compact two-level tree of `dir` (directories first, then by name; 30 entries at the top, 10 per
/// subdirectory, with `... and N more` lines), as the reference shows it.
pub(crate) fn list_directory(dir: &Path) -> String {
    let (entries, total) = match collect_entries(dir, LIST_ROOT_WIDTH) {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(dir = %dir.display(), error = %e, "directory not listable");
            (Vec::new(), 0)
        }
    };
    let remaining = total - entries.len();
    let mut lines = Vec::new();
    for (i, (name, is_dir)) in entries.iter().enumerate() {
        let is_last = i + 1 == entries.len() && remaining == 0;
        let connector = if is_last { "└── " } else { "├── " };
        if !is_dir {
            lines.push(format!("{connector}{name}"));
            continue;
        }
        lines.push(format!("{connector}{name}/"));
        let child_prefix = if is_last { "    " } else { "│   " };
        let Ok((children, child_total)) = collect_entries(&dir.join(name), LIST_CHILD_WIDTH) else {
            lines.push(format!("{child_prefix}└── [not readable]"));
            continue;
        };
        let child_remaining = child_total - children.len();
        for (j, (child, child_is_dir)) in children.iter().enumerate() {
            let last = j + 1 == children.len() && child_remaining == 0;
            let connector = if last { "└── " } else { "├── " };
            let suffix = if *child_is_dir { "/" } else { "" };
            lines.push(format!("{child_prefix}{connector}{child}{suffix}"));
        }
        if child_remaining > 0 {
            lines.push(format!("{child_prefix}└── ... and {child_remaining} more"));
        }
    }
    if remaining > 0 {
        lines.push(format!("└── ... and {remaining} more entries"));
    }
    if lines.is_empty() {
        "(empty directory)".to_owned()
    } else {
        lines.join("\n")
    }
}

/// Up to `width` entries of `dir`, sorted directories first and then by name, plus the total count.
fn collect_entries(dir: &Path, width: usize) -> std::io::Result<(Vec<(String, bool)>, usize)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        // The reference stats each entry (following symlinks); an error counts as "not a directory".
        let is_dir = std::fs::metadata(entry.path())
            .map(|m| m.is_dir())
            .unwrap_or(false);
        all.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    all.sort_by(|a, b| (!a.1, &a.0).cmp(&(!b.1, &b.0)));
    let total = all.len();
    all.truncate(width);
    Ok((all, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env(work: &str) -> Environment {
        Environment::new(
            PathBuf::from(work),
            vec![PathBuf::from("/extra")],
            PathBuf::from("/session"),
        )
    }

    #[test]
    fn pure_display_matches_python_purepath() {
        assert_eq!(pure_display(Path::new("./a//b/./c/")), "a/b/c");
        assert_eq!(pure_display(Path::new("")), ".");
        assert_eq!(pure_display(Path::new("../x")), "../x");
        assert_eq!(pure_display(Path::new("/abs/./y")), "/abs/y");
    }

    #[test]
    fn canonical_folds_dots_without_the_file_system() {
        assert_eq!(
            canonical(Path::new("a/../b/./c"), Path::new("/w")),
            PathBuf::from("/w/b/c")
        );
        assert_eq!(
            canonical(Path::new("../../.."), Path::new("/w")),
            PathBuf::from("/")
        );
        assert_eq!(
            canonical(Path::new("/x/y/../z"), Path::new("/w")),
            PathBuf::from("/x/z")
        );
    }

    #[test]
    fn workspace_is_tested_by_components() {
        let env = env("/work");
        assert!(is_within_workspace(Path::new("/work/a"), &env));
        assert!(is_within_workspace(Path::new("/work"), &env));
        assert!(is_within_workspace(Path::new("/extra/z"), &env));
        assert!(!is_within_workspace(Path::new("/work-other/a"), &env));
    }

    #[test]
    fn relative_paths_outside_the_workspace_are_refused() {
        let env = env("/work");
        assert_eq!(
            resolve_tool_path("a/b.txt", &env, "read"),
            Ok(PathBuf::from("/work/a/b.txt"))
        );
        assert_eq!(
            resolve_tool_path("/etc/hosts", &env, "read"),
            Ok(PathBuf::from("/etc/hosts"))
        );
        assert_eq!(
            resolve_tool_path("./../etc//hosts", &env, "write"),
            Err("`../etc/hosts` is not an absolute path. You must provide an absolute path to write a file outside the working directory.".to_owned())
        );
    }

    #[test]
    fn list_directory_shows_two_levels() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("src"))?;
        std::fs::write(dir.path().join("src/main.rs"), "")?;
        std::fs::write(dir.path().join("README.md"), "")?;
        for i in 0..12 {
            std::fs::write(dir.path().join("src").join(format!("m{i:02}.rs")), "")?;
        }
        let listing = list_directory(dir.path());
        let expected = [
            "├── src/",
            "│   ├── m00.rs",
            "│   ├── m01.rs",
            "│   ├── m02.rs",
            "│   ├── m03.rs",
            "│   ├── m04.rs",
            "│   ├── m05.rs",
            "│   ├── m06.rs",
            "│   ├── m07.rs",
            "│   ├── m08.rs",
            "│   ├── m09.rs",
            "│   └── ... and 3 more",
            "└── README.md",
        ]
        .join("\n");
        assert_eq!(listing, expected);
        let empty = tempfile::tempdir()?;
        assert_eq!(list_directory(empty.path()), "(empty directory)");
        Ok(())
    }
}
