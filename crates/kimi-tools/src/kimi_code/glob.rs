//! `Glob` (seeds/002): `pattern` under `path` (relative paths start at the working directory), the
//! shared Glob under [`GlobRules::KimiCode`]: newest first, at most 1000, patterns made only of
//! wildcards and brace patterns refused.

use std::path::PathBuf;
use std::sync::Arc;

use kimi_core::parse_args;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::adapter::Adapted;
use crate::ToolDeps;
use crate::file::{Glob, GlobRules};

// Parameters of `Glob` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct GlobArgs {
    /// The glob pattern, relative to `path` (for example `src/**/*.rs` or `*.toml`).
    pattern: String,
    /// The directory to search; the working directory when left out. Relative paths start at the working directory.
    #[serde(default)]
    path: Option<String>,
    /// Whether directories are listed along with files.
    #[serde(default = "yes")]
    include_dirs: bool,
}

fn yes() -> bool {
    true
}

/// seeds/002's `Glob` for the session in `deps`.
pub(crate) fn glob(deps: &ToolDeps) -> Adapted {
    let inner = Glob::with_rules(
        Arc::clone(&deps.session.env),
        deps.session.skills_dirs.clone(),
        GlobRules::KimiCode,
    );
    let work_dir = deps.session.env.work_dir.clone();
    let spec = crate::tool_spec::<GlobArgs>("Glob", include_str!("descriptions/glob.md"));
    Adapted::new(Arc::new(inner), spec).args(move |args: Value| {
        let args: GlobArgs = parse_args(args)?;
        // The shared Glob takes an absolute `directory` (the reference's rule); seeds/002 takes any.
        let directory = args.path.filter(|p| !p.is_empty()).map(|path| {
            let given = PathBuf::from(&path);
            if given.is_absolute() || path.starts_with('~') {
                path
            } else {
                work_dir.join(given).to_string_lossy().into_owned()
            }
        });
        Ok(json!({
            "pattern": args.pattern,
            "directory": directory,
            "include_dirs": args.include_dirs,
        }))
    })
}
