//! Which directories a confined command may write.
//!
//! The roots are real paths: Landlock's rules hold on the directory a path names when the rule is made
//! (symlinks followed), so the roots the in-process file tools compare their (real) targets against
//! must be those same directories.

use std::path::{Path, PathBuf};

use super::SandboxMode;

/// Shared memory (`shm_open`, POSIX semaphores) lives here: a temp dir in all but name, which test
/// runners and browsers need.
const SHARED_MEMORY_DIR: &str = "/dev/shm";

/// What the writable roots are computed from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RootInputs<'a> {
    pub mode: SandboxMode,
    pub work_dir: &'a Path,
    /// `--add-dir` and `/add-dir` directories (relative ones are taken from the work dir).
    pub additional_dirs: &'a [PathBuf],
    /// The temp dir commands use (read-only mode: its private one).
    pub temp_dir: &'a Path,
    /// `sandbox_writable_roots` as configured.
    pub extra: &'a [String],
    /// For `~` in `extra`.
    pub home: Option<&'a Path>,
}

/// The writable roots, each resolved to the directory it really is, in a stable order (work dir, extra
/// directories, temp dirs, configured roots) without repeats. A root that does not exist is left out:
/// there is nothing to write in, and a rule can only name what exists.
pub(crate) fn writable_roots(inputs: &RootInputs<'_>) -> Vec<PathBuf> {
    let candidates: Vec<PathBuf> = match inputs.mode {
        SandboxMode::DangerFullAccess => Vec::new(),
        SandboxMode::ReadOnly => vec![inputs.temp_dir.to_path_buf()],
        SandboxMode::WorkspaceWrite => {
            let mut all = vec![inputs.work_dir.to_path_buf()];
            all.extend(inputs.additional_dirs.iter().map(|d| inputs.work_dir.join(d)));
            all.push(inputs.temp_dir.to_path_buf());
            all.push(PathBuf::from(SHARED_MEMORY_DIR));
            all.extend(
                inputs
                    .extra
                    .iter()
                    .map(|raw| configured_root(raw, inputs.work_dir, inputs.home)),
            );
            all
        }
    };
    let mut roots: Vec<PathBuf> = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        match std::fs::canonicalize(&candidate) {
            Ok(root) if !roots.contains(&root) => roots.push(root),
            Ok(_) => {}
            Err(e) => tracing::debug!(root = %candidate.display(), error = %e, "writable root left out"),
        }
    }
    roots
}

/// A `sandbox_writable_roots` entry as a path: `~` is the home directory, a relative path starts at
/// the work dir.
fn configured_root(raw: &str, work_dir: &Path, home: Option<&Path>) -> PathBuf {
    match (raw.strip_prefix('~'), home) {
        (Some(""), Some(home)) => home.to_path_buf(),
        (Some(rest), Some(home)) if rest.starts_with('/') => home.join(rest.trim_start_matches('/')),
        _ => work_dir.join(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::symlink;

    struct Layout {
        _tmp: tempfile::TempDir,
        /// Real path of the temp root.
        root: PathBuf,
    }

    impl Layout {
        fn new() -> Layout {
            let tmp = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(tmp.path()).unwrap();
            for dir in ["real-work", "extra", "tmp", "cfg", "home/cache"] {
                std::fs::create_dir_all(root.join(dir)).unwrap();
            }
            symlink(root.join("real-work"), root.join("work")).unwrap();
            Layout { _tmp: tmp, root }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.root.join(rel)
        }
    }

    fn roots_of(layout: &Layout, mode: SandboxMode, additional: &[PathBuf], extra: &[&str]) -> Vec<PathBuf> {
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        writable_roots(&RootInputs {
            mode,
            work_dir: &layout.path("work"),
            additional_dirs: additional,
            temp_dir: &layout.path("tmp"),
            extra: &extra,
            home: Some(&layout.path("home")),
        })
    }

    #[test]
    fn workspace_write_roots_are_real_paths_in_order_without_missing_ones() {
        let layout = Layout::new();
        let roots = roots_of(
            &layout,
            SandboxMode::WorkspaceWrite,
            // Relative: from the work dir; a missing one is left out.
            &[PathBuf::from("../extra"), layout.path("gone")],
            &["~/cache", "../cfg", "/nonexistent-root-for-kimi-tests", "~"],
        );
        let mut expected = vec![
            // The symlinked work dir is where it really is.
            layout.path("real-work"),
            layout.path("extra"),
            layout.path("tmp"),
        ];
        if Path::new(SHARED_MEMORY_DIR).is_dir() {
            expected.push(std::fs::canonicalize(SHARED_MEMORY_DIR).unwrap());
        }
        expected.extend([layout.path("home/cache"), layout.path("cfg"), layout.path("home")]);
        assert_eq!(roots, expected);
    }

    #[test]
    fn repeated_roots_appear_once() {
        let layout = Layout::new();
        let roots = roots_of(
            &layout,
            SandboxMode::WorkspaceWrite,
            &[layout.path("real-work"), layout.path("work")],
            &["."],
        );
        assert_eq!(
            roots.iter().filter(|r| **r == layout.path("real-work")).count(),
            1
        );
    }

    #[test]
    fn read_only_writes_only_in_its_temp_dir_and_full_access_has_no_roots() {
        let layout = Layout::new();
        let extra = [layout.path("extra")];
        assert_eq!(
            roots_of(&layout, SandboxMode::ReadOnly, &extra, &["../cfg"]),
            vec![layout.path("tmp")]
        );
        assert_eq!(
            roots_of(&layout, SandboxMode::DangerFullAccess, &extra, &["../cfg"]),
            Vec::<PathBuf>::new()
        );
    }
}
