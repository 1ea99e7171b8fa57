//! Where a resolved path stands: in the workspace (the work dir and the `--add-dir` directories), in
//! one of the other places the reading tools may look without asking (skills, the session directory,
//! plans), or outside; and how an approval names it.
//!
//! Roots are compared by real path, so a workspace reached through a symlink (`--work-dir ~/proj` with
//! `~/proj -> /data/proj`) still contains its files; a path inside a root is shown under the root's
//! name as the user gave it, everything else by its real path.

use std::io;
use std::path::{Path, PathBuf};

use kimi_core::Environment;

use super::real_path::real_path;

/// A directory as it was named and as it really is.
#[derive(Debug, Clone)]
struct Root {
    named: PathBuf,
    real: PathBuf,
}

/// A set of directories, tested by real path.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roots(Vec<Root>);

impl Roots {
    /// The workspace of `env` as it is now: its work dir and extra directories.
    pub(crate) fn workspace(env: &Environment) -> Self {
        let mut roots = Self::default();
        roots.push(&env.work_dir);
        for dir in env.additional_dirs() {
            roots.push(&dir);
        }
        roots
    }

    /// These roots and `dirs`.
    pub(crate) fn and<'a>(mut self, dirs: impl IntoIterator<Item = &'a PathBuf>) -> Self {
        for dir in dirs {
            self.push(dir);
        }
        self
    }

    fn push(&mut self, named: &Path) {
        // A root that cannot be resolved (not created yet) is taken as named.
        let real = real_path(named).unwrap_or_else(|_| named.to_path_buf());
        self.0.push(Root {
            named: named.to_path_buf(),
            real,
        });
    }

    /// Whether the real path `real` lies in one of the roots (by path components).
    pub(crate) fn contains(&self, real: &Path) -> bool {
        self.0.iter().any(|root| real.starts_with(&root.real))
    }

    /// `real` as the user knows it: under the name of the first root it lies in, else `real` itself.
    pub(crate) fn show(&self, real: &Path) -> PathBuf {
        self.0
            .iter()
            .find_map(|root| {
                let rest = real.strip_prefix(&root.real).ok()?;
                Some(if rest.as_os_str().is_empty() {
                    root.named.clone()
                } else {
                    root.named.join(rest)
                })
            })
            .unwrap_or_else(|| real.to_path_buf())
    }
}

/// A path the model gave, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// What the model named, in the reference's lexical canonical form (for its messages).
    pub named: PathBuf,
    /// Where it really leads: no symlink on it. Opened with [`super::real_path::open_real`].
    pub real: PathBuf,
    /// How approvals and results name it: `real`, under the workspace root's own name when inside.
    pub shown: PathBuf,
    /// Whether `real` lies in the workspace.
    pub in_workspace: bool,
}

impl Target {
    /// Resolves `named` (lexical canonical form) against the workspace of `env`; a path inside one of
    /// `named_roots` (beyond the workspace) is also shown under that root's own name. Fails when a
    /// directory on the way does not exist or symlinks loop.
    pub(crate) fn resolve(named: PathBuf, env: &Environment, named_roots: &[PathBuf]) -> io::Result<Self> {
        let real = real_path(&named)?;
        let workspace = Roots::workspace(env);
        let in_workspace = workspace.contains(&real);
        Ok(Self {
            shown: workspace.and(named_roots).show(&real),
            in_workspace,
            named,
            real,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_workspace_named_through_a_symlink_keeps_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("proj")).unwrap();
        std::fs::create_dir(base.join("elsewhere")).unwrap();
        symlink(base.join("proj"), base.join("link")).unwrap();
        symlink(base.join("elsewhere"), base.join("proj/out")).unwrap();
        let env = Environment::new(base.join("link"), Vec::new(), base.join("session"));

        let inside = Target::resolve(base.join("link/a.txt"), &env, &[]).unwrap();
        assert_eq!(
            inside,
            Target {
                named: base.join("link/a.txt"),
                real: base.join("proj/a.txt"),
                shown: base.join("link/a.txt"),
                in_workspace: true,
            }
        );
        let escaped = Target::resolve(base.join("link/out/b.txt"), &env, &[]).unwrap();
        assert_eq!(escaped.real, base.join("elsewhere/b.txt"));
        assert_eq!(escaped.shown, base.join("elsewhere/b.txt"));
        assert!(!escaped.in_workspace);

        let roots = Roots::workspace(&env).and([&base.join("elsewhere")]);
        assert!(roots.contains(&base.join("elsewhere/b.txt")));
        assert!(!roots.contains(&base.join("elsewhere-2/b.txt")));
        assert_eq!(roots.show(&base.join("proj")), base.join("link"));
    }
}
