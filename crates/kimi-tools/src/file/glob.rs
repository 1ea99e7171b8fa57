//! `Glob`: file and directory names matching a pattern, relative to a directory in the workspace.
//!
//! Reference: `kimi_cli/tools/file/glob.py`, which uses Python 3.13's `Path.glob`. We reproduce its
//! matching: components split on `/`; `*`, `?` and `[...]` match within one name, hidden names
//! included; `**` as a whole component matches any depth (the directory itself too) without entering
//! symlinked directories, and as the last component it also matches files; a trailing `/` keeps only
//! directories; literal components are joined as they are (`..` included). Results are sorted by
//! path components and capped at [`MAX_MATCHES`].
//!
//! Patterns starting with `**` are refused (with a listing of the work dir), as in the reference.
//! Beyond the reference, a pattern cannot climb out of its directory: a `..` component is refused, the
//! directory is judged by its real path, and matches reached through a symlinked directory that leads
//! out of the workspace (and the skills directories) are left out.
//! Unlike the reference, whose engine treats `{a,b}` literally and so silently matches nothing, brace
//! alternatives work here (`globset` supports them).
//!
//! The kimi-code agent's `Glob` is this tool under [`GlobRules::KimiCode`] (seeds/002): newest first,
//! patterns made only of wildcards refused instead of those starting with `**`, and brace patterns
//! refused (as seeds/002 specifies, so a model trained on it gets the error it expects).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use globset::{GlobBuilder, GlobMatcher};
use kimi_core::Environment;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::paths::{canonical, expand_user, is_within_workspace, list_directory, pure_display};
use super::real_path::real_path;
use super::scope::Roots;
use super::{blocking, tool_error, tool_spec};

/// Most paths returned by one call.
pub const MAX_MATCHES: usize = 1000;

// Arguments of `Glob` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct GlobParams {
    /// The glob pattern, relative to `directory` (for example `src/**/*.rs` or `*.toml`).
    pattern: String,
    /// Absolute path of the directory to search; the working directory when omitted.
    #[serde(default)]
    directory: Option<String>,
    /// Whether directories are listed along with files.
    #[serde(default = "yes")]
    include_dirs: bool,
}

fn yes() -> bool {
    true
}

/// Which patterns a [`Glob`] refuses and how it orders what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobRules {
    /// The reference's: patterns starting with `**` refused with a listing of the work dir, brace
    /// alternatives expanded, results sorted by path.
    Reference,
    /// seeds/002's (the kimi-code agent): patterns made only of wildcards (`**`, `**/*`) refused, brace
    /// patterns refused, results newest first.
    KimiCode,
}

/// Finds files by name pattern.
#[derive(Debug)]
pub struct Glob {
    spec: ToolSpec,
    env: Arc<Environment>,
    skills_dirs: Vec<PathBuf>,
    rules: GlobRules,
}

impl Glob {
    /// The tool, searching inside the workspace of `env` and the given skills directories.
    pub fn new(env: Arc<Environment>, skills_dirs: Vec<PathBuf>) -> Self {
        Self::with_rules(env, skills_dirs, GlobRules::Reference)
    }

    /// The tool under `rules` (its spec stays the reference's; the kimi-code profile gives its own).
    pub fn with_rules(env: Arc<Environment>, skills_dirs: Vec<PathBuf>, rules: GlobRules) -> Self {
        Self {
            spec: tool_spec::<GlobParams>("Glob", include_str!("descriptions/glob.md")),
            env,
            skills_dirs,
            rules,
        }
    }
}

impl Tool for Glob {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let params: GlobParams = parse_args(args)?;
            Ok(Plan::read_only(Box::pin(async move {
                let pattern = params.pattern.clone();
                blocking(move || self.search(&params))
                    .await
                    .unwrap_or_else(|e| failed(&pattern, &e))
            })))
        })
    }
}

fn failed(pattern: &str, error: &str) -> ToolReturnValue {
    tracing::warn!(pattern, error, "Glob failed");
    tool_error(
        format!("Failed to search for pattern {pattern}. Error: {error}"),
        "Glob failed",
    )
}

impl Glob {
    fn search(&self, params: &GlobParams) -> ToolReturnValue {
        let pattern = params.pattern.as_str();
        if self.rules == GlobRules::KimiCode {
            if let Some(refused) = refuse_kimi_code(pattern) {
                return refused;
            }
        } else if pattern.starts_with("**") {
            return ToolReturnValue::error(
                list_directory(&self.env.work_dir),
                format!(
                    "Pattern `{pattern}` starts with '**' which is not allowed. This would recursively search all directories and may include large directories like `node_modules`. Use more specific patterns instead. For your convenience, a list of all files and directories in the top level of the working directory is provided below."
                ),
                "Unsafe pattern",
            );
        }
        if pattern.split('/').any(|component| component == "..") {
            return tool_error(
                format!(
                    "Pattern `{pattern}` contains '..', which is not allowed: a pattern cannot climb out of the directory it searches. Give the directory to search as `directory` instead."
                ),
                "Unsafe pattern",
            );
        }
        let given = params.directory.as_deref().filter(|d| !d.is_empty());
        let dir = given
            .map(expand_user)
            .unwrap_or_else(|| self.env.work_dir.clone());
        let quoted = given.unwrap_or("None");
        if !dir.is_absolute() {
            return tool_error(
                format!("`{quoted}` is not an absolute path. You must provide an absolute path to search."),
                "Invalid directory",
            );
        }
        let resolved = canonical(&dir, &self.env.work_dir);
        let allowed = Roots::workspace(&self.env).and(&self.skills_dirs);
        let lexically_inside = is_within_workspace(&resolved, &self.env)
            || self.skills_dirs.iter().any(|d| resolved.starts_with(d));
        // Judged where it really leads too: a workspace symlink to `~` is not the workspace.
        let really_inside = real_path(&resolved).map_or(true, |real| allowed.contains(&real));
        if !lexically_inside || !really_inside {
            return tool_error(
                format!(
                    "`{}` is outside the workspace. You can only search within the working directory, additional directories, and skills directories.",
                    pure_display(&dir)
                ),
                "Directory outside workspace",
            );
        }
        match std::fs::metadata(&dir) {
            Err(_) => return tool_error(format!("`{quoted}` does not exist."), "Directory not found"),
            Ok(meta) if !meta.is_dir() => {
                return tool_error(format!("`{quoted}` is not a directory."), "Invalid directory");
            }
            Ok(_) => {}
        }
        let mut matches = match glob(&dir, pattern) {
            Ok(matches) => matches,
            Err(e) => return failed(pattern, &e),
        };
        if !params.include_dirs {
            matches.retain(|p| p.is_file());
        }
        keep_inside(&mut matches, &allowed);
        matches.sort();
        matches.dedup();
        if self.rules == GlobRules::KimiCode {
            newest_first(&mut matches);
        }
        let mut message = if matches.is_empty() {
            format!("No matches found for pattern `{pattern}`.")
        } else {
            format!("Found {} matches for pattern `{pattern}`.", matches.len())
        };
        if matches.len() > MAX_MATCHES {
            matches.truncate(MAX_MATCHES);
            message.push_str(&format!(
                " Only the first {MAX_MATCHES} matches are returned. You may want to use a more specific pattern."
            ));
        }
        let output: Vec<String> = matches
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap_or(p).to_string_lossy().into_owned())
            .collect();
        ToolReturnValue::ok(output.join("\n"), message)
    }
}

/// Drops matches whose directory really lies outside `allowed` (reached through a symlinked
/// directory). A symlink itself may be listed: its name is in an allowed directory.
fn keep_inside(matches: &mut Vec<PathBuf>, allowed: &Roots) {
    let mut verdicts: std::collections::HashMap<PathBuf, bool> = std::collections::HashMap::new();
    matches.retain(|path| {
        let Some(parent) = path.parent() else {
            return true;
        };
        *verdicts
            .entry(parent.to_path_buf())
            .or_insert_with(|| std::fs::canonicalize(parent).is_ok_and(|real| allowed.contains(&real)))
    });
}

/// seeds/002's refusals: a pattern without a literal anchor that would walk the whole tree, and brace
/// alternatives (which seeds/002's engine would match literally). Our words.
fn refuse_kimi_code(pattern: &str) -> Option<ToolReturnValue> {
    let components: Vec<&str> = pattern
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    let only_wildcards = components
        .iter()
        .all(|c| c.chars().all(|ch| matches!(ch, '*' | '?')));
    if only_wildcards && components.contains(&"**") {
        return Some(tool_error(
            format!(
                "Pattern `{pattern}` is made only of wildcards, so it would list everything below the \
                 directory, `node_modules` and build output included. Add a literal anchor: a directory \
                 (`src/**/*.rs`), a file name or an extension (`**/*.toml`)."
            ),
            "Unsafe pattern",
        ));
    }
    if pattern.contains(['{', '}']) {
        return Some(tool_error(
            format!(
                "Pattern `{pattern}` uses brace expansion, which Glob does not support: `{{` and `}}` are \
                 matched literally, so the pattern would silently match no file. Call Glob once per \
                 alternative instead (for example `*.ts`, then `*.tsx`)."
            ),
            "Unsupported pattern",
        ));
    }
    None
}

/// Most recently modified first; equal times (and unreadable ones, taken as the oldest) by path.
fn newest_first(paths: &mut [PathBuf]) {
    let mut keyed: Vec<(std::time::SystemTime, PathBuf)> = paths
        .iter()
        .map(|p| {
            let modified = std::fs::metadata(p)
                .and_then(|m| m.modified())
                .unwrap_or(std::time::SystemTime::UNIX_EPOCH);
            (modified, p.clone())
        })
        .collect();
    keyed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    for (slot, (_, path)) in paths.iter_mut().zip(keyed) {
        *slot = path;
    }
}

/// One component of a pattern.
enum Part {
    /// Matched by joining (no wildcard).
    Literal(String),
    /// Matched against each name in a directory.
    Wild(GlobMatcher),
    /// `**`: any number of directories.
    Recursive,
}

fn has_magic(component: &str) -> bool {
    component.contains(['*', '?', '[', '{'])
}

fn parse(pattern: &str) -> Result<(Vec<Part>, bool), String> {
    if pattern.starts_with('/') {
        return Err("Non-relative patterns are unsupported".to_owned());
    }
    let dir_only = pattern.ends_with('/');
    let mut parts = Vec::new();
    for component in pattern.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if component == "**" {
            if !matches!(parts.last(), Some(Part::Recursive)) {
                parts.push(Part::Recursive);
            }
            continue;
        }
        if !has_magic(component) {
            parts.push(Part::Literal(component.to_owned()));
            continue;
        }
        // Inside a name `**` is just `*`, as in Python.
        let mut glob = component.to_owned();
        while glob.contains("**") {
            glob = glob.replace("**", "*");
        }
        let built = GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(false)
            .build();
        parts.push(match built {
            Ok(glob) => Part::Wild(glob.compile_matcher()),
            // An unclosed `[` and the like match themselves literally, as in Python.
            Err(_) => Part::Literal(component.to_owned()),
        });
    }
    if parts.is_empty() {
        return Err(format!(
            "Unacceptable pattern: PosixPath('{}')",
            pure_display(Path::new(pattern))
        ));
    }
    Ok((parts, dir_only))
}

/// Every path under `base` matching `pattern` (unsorted), each as `base` joined with the match.
fn glob(base: &Path, pattern: &str) -> Result<Vec<PathBuf>, String> {
    let (parts, dir_only) = parse(pattern)?;
    let mut current = vec![base.to_path_buf()];
    for (index, part) in parts.iter().enumerate() {
        let last = index + 1 == parts.len();
        let mut next = Vec::new();
        for dir in &current {
            match part {
                Part::Literal(name) => {
                    let path = dir.join(name);
                    let keep = if last {
                        std::fs::symlink_metadata(&path).is_ok() && (!dir_only || path.is_dir())
                    } else {
                        path.is_dir()
                    };
                    if keep {
                        next.push(path);
                    }
                }
                Part::Wild(matcher) => {
                    let Ok(entries) = std::fs::read_dir(dir) else {
                        continue;
                    };
                    for entry in entries.flatten() {
                        if !matcher.is_match(entry.file_name()) {
                            continue;
                        }
                        let path = entry.path();
                        if (last && !dir_only) || path.is_dir() {
                            next.push(path);
                        }
                    }
                }
                Part::Recursive => descend(dir, last && !dir_only, &mut next),
            }
        }
        current = next;
    }
    Ok(current)
}

/// `dir` and every directory below it, not entering symlinked directories; with `files`, every other
/// entry below it too.
fn descend(dir: &Path, files: bool, out: &mut Vec<PathBuf>) {
    if !dir.is_dir() {
        return;
    }
    out.push(dir.to_path_buf());
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let is_real_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
            let path = entry.path();
            if is_real_dir {
                out.push(path.clone());
                stack.push(path);
            } else if files {
                out.push(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::test_support::{TestDir, call, ok_text};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn tree() -> TestDir {
        let dir = TestDir::new();
        for file in [
            "a.py",
            ".b.py",
            "src/c.py",
            "src/sub/d.py",
            "src/sub/.e.py",
            ".hid/f.py",
            "src/sub/g.txt",
        ] {
            dir.write(file, "");
        }
        dir.mkdir("node");
        std::os::unix::fs::symlink("../src", dir.path("node/link")).unwrap();
        std::os::unix::fs::symlink("nowhere", dir.path("broken")).unwrap();
        dir
    }

    async fn run(dir: &TestDir, args: Value) -> ToolReturnValue {
        call(Arc::new(Glob::new(dir.env(), Vec::new())), args).await.1
    }

    async fn names(dir: &TestDir, pattern: &str) -> String {
        let value = run(dir, json!({ "pattern": pattern })).await;
        assert!(!value.is_error, "{value:?}");
        match value.output {
            kimi_wire::message::ToolOutput::Text(text) => text,
            other => panic!("unexpected output {other:?}"),
        }
    }

    // Expected lists below were produced by the reference's Python 3.13 `Path.glob` on the same tree.
    #[tokio::test]
    async fn matches_python_pathlib() {
        let dir = tree();
        assert_eq!(names(&dir, "*.py").await, ".b.py\na.py");
        assert_eq!(
            names(&dir, "src/**").await,
            "src\nsrc/c.py\nsrc/sub\nsrc/sub/.e.py\nsrc/sub/d.py\nsrc/sub/g.txt"
        );
        assert_eq!(
            names(&dir, "src/**/*.py").await,
            "src/c.py\nsrc/sub/.e.py\nsrc/sub/d.py"
        );
        assert_eq!(names(&dir, "src/*").await, "src/c.py\nsrc/sub");
        assert_eq!(names(&dir, "*").await, ".b.py\n.hid\na.py\nbroken\nnode\nsrc");
        assert_eq!(names(&dir, "src/**/").await, "src\nsrc/sub");
        assert_eq!(names(&dir, "node/**/*.py").await, "");
        assert_eq!(names(&dir, "node/*/*.py").await, "node/link/c.py");
        assert_eq!(names(&dir, "node/**").await, "node\nnode/link");
        assert_eq!(names(&dir, "SRC/*.py").await, "");
        assert_eq!(names(&dir, "*/").await, ".hid\nnode\nsrc");
        assert_eq!(names(&dir, "src//c.py").await, "src/c.py");
        assert_eq!(names(&dir, "./a.py").await, "a.py");
        assert_eq!(names(&dir, "b*").await, "broken");
        assert_eq!(
            names(&dir, "src/**/**/*.py").await,
            "src/c.py\nsrc/sub/.e.py\nsrc/sub/d.py"
        );
        // Beyond the reference: braces expand.
        assert_eq!(
            names(&dir, "src/sub/*.{py,txt}").await,
            "src/sub/.e.py\nsrc/sub/d.py\nsrc/sub/g.txt"
        );
    }

    #[tokio::test]
    async fn messages_and_include_dirs() {
        let dir = tree();
        assert_eq!(
            run(&dir, json!({"pattern": "src/*"})).await,
            ok_text("src/c.py\nsrc/sub", "Found 2 matches for pattern `src/*`.")
        );
        assert_eq!(
            run(&dir, json!({"pattern": "src/*", "include_dirs": false})).await,
            ok_text("src/c.py", "Found 1 matches for pattern `src/*`.")
        );
        assert_eq!(
            run(&dir, json!({"pattern": "*.nope"})).await,
            ok_text("", "No matches found for pattern `*.nope`.")
        );
        let sub = dir.path("src").to_string_lossy().into_owned();
        assert_eq!(
            run(&dir, json!({"pattern": "*.py", "directory": sub})).await,
            ok_text("c.py", "Found 1 matches for pattern `*.py`.")
        );
    }

    #[tokio::test]
    async fn patterns_cannot_climb_out() {
        let dir = tree();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(outside.path().join(".ssh")).unwrap();
        std::fs::write(outside.path().join(".ssh/id_rsa"), "k").unwrap();
        for pattern in ["../*", "src/../../*", "../home/.ssh/*"] {
            let value = run(&dir, json!({ "pattern": pattern })).await;
            assert_eq!(value.brief(), "Unsafe pattern", "{pattern}");
        }
        // Through a symlinked directory: the directory itself is refused, matches under it dropped.
        std::os::unix::fs::symlink(outside.path(), dir.path("home")).unwrap();
        assert_eq!(names(&dir, "home/.ssh/*").await, "");
        assert_eq!(names(&dir, "h*").await, "home");
        let linked = dir.path("home").to_string_lossy().into_owned();
        let value = run(&dir, json!({"pattern": "*", "directory": linked})).await;
        assert_eq!(value.brief(), "Directory outside workspace");
    }

    #[tokio::test]
    async fn caps_at_max_matches() {
        let dir = TestDir::new();
        for i in 0..1005 {
            dir.write(&format!("many/f{i:04}.txt"), "");
        }
        let value = run(&dir, json!({"pattern": "many/*.txt"})).await;
        assert_eq!(
            value.message,
            "Found 1005 matches for pattern `many/*.txt`. Only the first 1000 matches are returned. You may want to use a more specific pattern."
        );
        let kimi_wire::message::ToolOutput::Text(text) = value.output else {
            panic!()
        };
        assert_eq!(text.lines().count(), 1000);
        assert!(text.ends_with("many/f0999.txt"));
    }

    #[tokio::test]
    async fn refusals() {
        let dir = tree();
        let value = run(&dir, json!({"pattern": "**/*.py"})).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                list_directory(&dir.root),
                "Pattern `**/*.py` starts with '**' which is not allowed. This would recursively search all directories and may include large directories like `node_modules`. Use more specific patterns instead. For your convenience, a list of all files and directories in the top level of the working directory is provided below.",
                "Unsafe pattern"
            )
        );
        assert!(matches!(&value.output, kimi_wire::message::ToolOutput::Text(t) if t.contains("├── src/")));
        let outside = tempfile::tempdir().unwrap();
        let outside = outside.path().canonicalize().unwrap();
        let outside_text = outside.to_string_lossy().into_owned();
        let missing = dir.path("missing").to_string_lossy().into_owned();
        let file = dir.path("a.py").to_string_lossy().into_owned();
        for (args, message, brief) in [
            (
                json!({"pattern": "*", "directory": "src"}),
                "`src` is not an absolute path. You must provide an absolute path to search.".to_owned(),
                "Invalid directory",
            ),
            (
                json!({"pattern": "*", "directory": outside_text}),
                format!(
                    "`{outside_text}` is outside the workspace. You can only search within the working directory, additional directories, and skills directories."
                ),
                "Directory outside workspace",
            ),
            (
                json!({"pattern": "*", "directory": missing}),
                format!("`{missing}` does not exist."),
                "Directory not found",
            ),
            (
                json!({"pattern": "*", "directory": file}),
                format!("`{file}` is not a directory."),
                "Invalid directory",
            ),
            (
                json!({"pattern": "/etc/*"}),
                "Failed to search for pattern /etc/*. Error: Non-relative patterns are unsupported"
                    .to_owned(),
                "Glob failed",
            ),
            (
                json!({"pattern": ""}),
                "Failed to search for pattern . Error: Unacceptable pattern: PosixPath('.')".to_owned(),
                "Glob failed",
            ),
        ] {
            assert_eq!(run(&dir, args).await, ToolReturnValue::error("", message, brief));
        }
        // Skills directories are searchable even outside the workspace.
        let glob = Glob::new(dir.env(), vec![outside.clone()]);
        std::fs::write(outside.join("SKILL.md"), "").unwrap();
        let (_, value) = call(
            Arc::new(glob),
            json!({"pattern": "*.md", "directory": outside_text}),
        )
        .await;
        assert_eq!(value, ok_text("SKILL.md", "Found 1 matches for pattern `*.md`."));
    }
    #[tokio::test]
    async fn kimi_code_rules_sort_newest_first_and_refuse_wildcards_and_braces() {
        let dir = tree();
        for (file, secs) in [("a.py", 3_000), ("src/c.py", 1_000), ("src/sub/d.py", 2_000)] {
            let handle = std::fs::File::options().write(true).open(dir.path(file)).unwrap();
            handle
                .set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
                .unwrap();
        }
        let tool = Arc::new(Glob::with_rules(dir.env(), Vec::new(), GlobRules::KimiCode));
        let run = |pattern: &str| call(Arc::clone(&tool), json!({ "pattern": pattern }));
        // `.e.py` was just written, so it is the newest.
        let value = run("src/**/*.py").await.1;
        assert_eq!(value.output, "src/sub/.e.py\nsrc/sub/d.py\nsrc/c.py".into());
        // `**` leading a pattern with a literal part is fine here (the reference refuses it).
        let value = run("**/d.py").await.1;
        assert_eq!(value.output, "src/sub/d.py".into());
        for pattern in ["**", "**/*", "*/**", "./**/?"] {
            let value = run(pattern).await.1;
            assert_eq!(
                value.display,
                vec![kimi_wire::message::DisplayBlock::Brief {
                    text: "Unsafe pattern".into()
                }],
                "{pattern}"
            );
        }
        let value = run("*.{py,txt}").await.1;
        assert!(value.is_error);
        assert!(value.message.contains("brace expansion"), "{}", value.message);
        // One level of wildcards is bounded, so it is allowed.
        assert!(!run("*").await.1.is_error);
    }
}
