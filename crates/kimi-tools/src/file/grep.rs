//! `Grep`: regex search over file contents, in process with ripgrep's own crates.
//!
//! Reference: `kimi_cli/tools/file/grep_local.py`, which runs the `rg` binary with `--hidden`,
//! `--glob !.git` (and the other VCS directories), `--no-ignore` when `include_ignored`, and the
//! mode's flags, then post-processes rg's text. We walk with `ignore` (gitignore, `.ignore`,
//! `.rgignore`, overrides, file types, in parallel), search each file with `grep-searcher` and
//! `grep-regex`, and print what rg would print:
//!
//! - paths: relative to the searched directory when it was given as an absolute path (the
//!   reference strips that prefix), otherwise joined to the path as given (`./src/a.rs` for `.`);
//!   a single searched file shows no path in `content` and `count_matches` output;
//! - `content`: `path:12:line` for matches, `path-11-line` for context, `--` between separate groups
//!   and between files when context is on; without `-n` the numbers are left out;
//! - `files_with_matches`: one path per line, newest first; `count_matches`: `path:N`.
//!
//! Then, as the reference: sensitive files are dropped with a warning; `count_matches` gets a
//! summary; `offset`/`head_limit` page over the output lines; the output goes through the usual
//! 50 000-character budget. The search stops at [`TIMEOUT`] or once [`MAX_BUFFER`] bytes of output
//! are collected, like the reference's limits on rg.
//!
//! Beyond the reference, a search whose real root lies outside the workspace (and the other places
//! reads need no approval) asks first, like ReadFile; secrets are recognised by the wider list and by
//! real path too; symlinks below the root are not followed.
//!
//! Differences: `content` and `count_matches` output is sorted by path (rg's order depends on
//! thread timing); a sensitive file is never shown, even when searched on its own; files that cannot
//! be read are skipped instead of failing the whole search; the `count_matches` summary counts a
//! single searched file too (the reference reports 0 there).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::future::BoxFuture;
use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{WalkBuilder, WalkState};
use kimi_core::Environment;
use kimi_core::sync::lock;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::FileSettings;
use super::access::admit;
use super::paths::{expand_user, normalize};
use super::sensitive::{SecretFiles, sensitive_file_warning};
use super::{tool_error, tool_spec};
use crate::output::OutputBuilder;

/// How long a search may run before partial results are returned (reference `RG_TIMEOUT`).
pub const TIMEOUT: Duration = Duration::from_secs(20);
/// Output bytes collected before the search stops (reference `RG_MAX_BUFFER`).
pub const MAX_BUFFER: usize = 20_000_000;
/// Version-control directories never searched, as the reference excludes them with `--glob`.
const VCS_DIRS: [&str; 6] = [".git", ".svn", ".hg", ".bzr", ".jj", ".sl"];
/// Walker threads at most (rg's own cap).
const MAX_THREADS: usize = 12;

// Arguments of `Grep`, with the reference's names (`-B`, `-A`, `-C`, `-n`, `-i`, `type`). Field doc
// comments are the parameter descriptions.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
struct GrepParams {
    /// Regular expression to search for, in ripgrep (Rust regex) syntax: escape `{`, `(`, `.` and the like to match them literally.
    pattern: String,
    /// File or directory to search; defaults to the working directory. Give an absolute path.
    #[serde(default = "default_path")]
    path: String,
    /// Only search files whose name matches this glob, e.g. `*.rs` or `*.{ts,tsx}`. No filter by default.
    #[serde(default)]
    glob: Option<String>,
    /// `files_with_matches` (default): paths of matching files, newest first; `content`: matching lines (with `-A`, `-B`, `-C`, `-n`); `count_matches`: matches per file.
    #[serde(default = "default_output_mode")]
    output_mode: String,
    /// Lines of context to show before each match (`content` mode only).
    #[serde(rename = "-B", default)]
    #[schemars(schema_with = "super::optional_integer")]
    before_context: Option<usize>,
    /// Lines of context to show after each match (`content` mode only).
    #[serde(rename = "-A", default)]
    #[schemars(schema_with = "super::optional_integer")]
    after_context: Option<usize>,
    /// Lines of context to show before and after each match (`content` mode only).
    #[serde(rename = "-C", default)]
    #[schemars(schema_with = "super::optional_integer")]
    context: Option<usize>,
    /// Prefix each line with its line number (`content` mode only). On by default.
    #[serde(rename = "-n", default = "yes")]
    line_number: bool,
    /// Ignore case when matching.
    #[serde(rename = "-i", default)]
    ignore_case: bool,
    /// Only search files of this type, by ripgrep's type names (`rust`, `py`, `js`, `ts`, `go`, ...). Quicker than `glob` for common languages.
    #[serde(rename = "type", default)]
    file_type: Option<String>,
    /// Return at most this many output lines (paths, matching lines or counts). Defaults to 250; 0 means no limit, which can flood the context.
    #[serde(default = "default_head_limit")]
    #[schemars(schema_with = "super::optional_integer")]
    head_limit: Option<usize>,
    /// Skip this many output lines before applying `head_limit`, to page through results. Defaults to 0.
    #[serde(default)]
    #[schemars(schema_with = "crate::args::plain_integer", range(min = 0))]
    offset: usize,
    /// Let the pattern span lines, with `.` also matching newlines. Off by default.
    #[serde(default)]
    multiline: bool,
    /// Also search files excluded by `.gitignore`, `.ignore` and similar (build output, `node_modules`). Secret files such as `.env` stay excluded.
    #[serde(default)]
    include_ignored: bool,
}

fn default_path() -> String {
    ".".to_owned()
}

fn default_output_mode() -> String {
    "files_with_matches".to_owned()
}

fn default_head_limit() -> Option<usize> {
    Some(250)
}

fn yes() -> bool {
    true
}

/// Searches file contents.
#[derive(Debug)]
pub struct Grep {
    spec: ToolSpec,
    env: Arc<Environment>,
    settings: FileSettings,
}

impl Grep {
    /// The tool; relative paths are searched from `env.work_dir`.
    pub fn new(env: Arc<Environment>, settings: FileSettings) -> Self {
        Self {
            spec: tool_spec::<GrepParams>("Grep", include_str!("descriptions/grep.md")),
            env,
            settings,
        }
    }
}

impl Tool for Grep {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let params: GrepParams = parse_args(args)?;
            let work_dir = self.env.work_dir.clone();
            let named = normalize(&search_root(&params, &work_dir));
            let admitted = admit(&params.path, named, &self.env, &self.settings, |shown| {
                format!("Search `{shown}`")
            })
            .await?;
            let scope = Scope {
                work_dir,
                real_root: admitted.target.real.clone(),
                secrets: self.settings.secrets.clone(),
            };
            Ok(admitted.plan(Box::pin(run(params, scope, ctx.cancel))))
        })
    }
}

/// Sets the flag when dropped, so a search whose caller went away stops.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Where a search runs and what it must leave out.
struct Scope {
    work_dir: PathBuf,
    /// The searched path's real path (where the walk really goes).
    real_root: PathBuf,
    secrets: SecretFiles,
}

/// The path to search, as given (`~` expanded) and joined to the work dir when relative.
fn search_root(params: &GrepParams, work_dir: &Path) -> PathBuf {
    let given = expand_user(&params.path);
    if given.is_absolute() {
        given
    } else {
        work_dir.join(&given)
    }
}

async fn run(params: GrepParams, scope: Scope, cancel: CancellationToken) -> ToolReturnValue {
    let stop = Arc::new(AtomicBool::new(false));
    let _guard = StopOnDrop(Arc::clone(&stop));
    let search_stop = Arc::clone(&stop);
    let search_params = params.clone();
    let mut task = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + TIMEOUT;
        search(&search_params, &scope, &search_stop, deadline)
    });
    let joined = tokio::select! {
        joined = &mut task => joined,
        () = cancel.cancelled() => {
            // Stop the walk and return what was found so far.
            stop.store(true, Ordering::Relaxed);
            task.await
        }
    };
    match joined {
        Ok(Ok(found)) => render(&params, found),
        Ok(Err(message)) => failed(&params, &message),
        Err(e) => failed(&params, &e.to_string()),
    }
}

fn failed(params: &GrepParams, error: &str) -> ToolReturnValue {
    tracing::warn!(pattern = params.pattern, path = params.path, error, "Grep failed");
    tool_error(format!("Failed to grep. Error: {error}"), "Failed to grep")
}

/// The output mode, from the free-form string the reference accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Content,
    FilesWithMatches,
    CountMatches,
    /// Any other string: rg then prints matching lines without numbers or context.
    Lines,
}

impl Mode {
    fn parse(text: &str) -> Self {
        match text {
            "content" => Self::Content,
            "files_with_matches" => Self::FilesWithMatches,
            "count_matches" => Self::CountMatches,
            _ => Self::Lines,
        }
    }
}

/// One file that matched.
#[derive(Debug)]
struct Hit {
    /// The path as printed.
    display: String,
    /// Printed lines (`content`), already formatted.
    lines: Vec<u8>,
    /// Matches found (`count_matches`).
    count: u64,
    /// Modification time (`files_with_matches`).
    mtime: Option<SystemTime>,
}

/// What the search found.
#[derive(Debug, Default)]
struct Found {
    hits: Vec<Hit>,
    /// Printed paths of sensitive files that matched (left out of `hits`).
    sensitive: Vec<String>,
    /// Whether a single file was searched (rg then prints no path in lines and counts).
    single_file: bool,
    timed_out: bool,
    buffer_full: bool,
}

/// How printed paths are made from walked paths.
struct Namer<'a> {
    root: &'a Path,
    /// The path as the model gave it, when it was relative.
    relative_to: Option<&'a Path>,
    root_is_file: bool,
}

impl Namer<'_> {
    fn name(&self, path: &Path) -> String {
        if self.root_is_file {
            return match self.relative_to {
                Some(given) => given.to_string_lossy().into_owned(),
                None => path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            };
        }
        let rel = path.strip_prefix(self.root).unwrap_or(path);
        match self.relative_to {
            Some(given) => given.join(rel).to_string_lossy().into_owned(),
            None => rel.to_string_lossy().into_owned(),
        }
    }
}

/// Walks and searches; runs on a blocking thread. `Err` is a message for "Failed to grep".
fn search(params: &GrepParams, scope: &Scope, stop: &AtomicBool, deadline: Instant) -> Result<Found, String> {
    let work_dir = scope.work_dir.as_path();
    let mode = Mode::parse(&params.output_mode);
    let given = expand_user(&params.path);
    let root = search_root(params, work_dir);
    let root_meta = std::fs::metadata(&root).map_err(|e| format!("{}: {e}", given.to_string_lossy()))?;
    let namer = Namer {
        root: &root,
        relative_to: (!given.is_absolute()).then_some(given.as_path()),
        root_is_file: !root_meta.is_dir(),
    };

    let matcher = build_matcher(params)?;
    let context = matches!(mode, Mode::Content);
    let before = if context {
        params.before_context.or(params.context).unwrap_or(0)
    } else {
        0
    };
    let after = if context {
        params.after_context.or(params.context).unwrap_or(0)
    } else {
        0
    };
    let line_numbers = context && params.line_number;
    let mut searcher = SearcherBuilder::new();
    searcher
        .line_number(line_numbers)
        .before_context(before)
        .after_context(after)
        .multi_line(params.multiline)
        .binary_detection(BinaryDetection::quit(b'\x00'));
    if mode == Mode::FilesWithMatches {
        searcher.max_matches(Some(1));
    }

    let walker = build_walker(params, work_dir, &root)?;
    let hits = Mutex::new(Vec::new());
    let sensitive = Mutex::new(Vec::new());
    let collected = AtomicUsize::new(0);
    let timed_out = AtomicBool::new(false);
    let buffer_full = AtomicBool::new(false);
    let with_path = !namer.root_is_file;

    walker.run(|| {
        let mut searcher = searcher.build();
        let matcher = matcher.clone();
        let (namer, hits, sensitive, collected) = (&namer, &hits, &sensitive, &collected);
        let (timed_out, buffer_full) = (&timed_out, &buffer_full);
        let root = root.as_path();
        let mut lines = Vec::new();
        Box::new(move |entry| {
            if stop.load(Ordering::Relaxed) {
                return WalkState::Quit;
            }
            if Instant::now() >= deadline {
                timed_out.store(true, Ordering::Relaxed);
                stop.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    tracing::debug!(error = %e, "grep walk error");
                    return WalkState::Continue;
                }
            };
            if !entry
                .file_type()
                .is_some_and(|t| t.is_file() || (t.is_symlink() && entry.depth() == 0))
            {
                return WalkState::Continue;
            }
            let path = entry.path();
            // Below the root nothing is a symlink (they are not followed), so the real path of an
            // entry is the root's real path and the rest.
            let real = path
                .strip_prefix(root)
                .map_or_else(|_| scope.real_root.clone(), |rest| scope.real_root.join(rest));
            let is_secret = scope.secrets.is_secret(path) || scope.secrets.is_secret(&real);
            lines.clear();
            let mut sink = FileSink {
                mode: if is_secret { Mode::FilesWithMatches } else { mode },
                matcher: &matcher,
                lines: &mut lines,
                namer: with_path.then_some(namer),
                path,
                display: None,
                count: 0,
                matched: false,
                stop,
            };
            if let Err(e) = searcher.search_path(&matcher, path, &mut sink) {
                tracing::debug!(path = %path.display(), error = %e, "grep skipped a file");
                return WalkState::Continue;
            }
            let (matched, count) = (sink.matched, sink.count);
            if !matched {
                return WalkState::Continue;
            }
            let display = sink.display.take().unwrap_or_else(|| namer.name(path));
            if is_secret {
                lock(sensitive).push(display);
                return WalkState::Continue;
            }
            let size = match mode {
                Mode::Content | Mode::Lines => lines.len(),
                Mode::FilesWithMatches | Mode::CountMatches => display.len() + 24,
            };
            let mtime = match mode {
                Mode::FilesWithMatches => entry.metadata().ok().and_then(|m| m.modified().ok()),
                _ => None,
            };
            lock(hits).push(Hit {
                display,
                lines: std::mem::take(&mut lines),
                count,
                mtime,
            });
            if collected.fetch_add(size, Ordering::Relaxed) + size > MAX_BUFFER {
                buffer_full.store(true, Ordering::Relaxed);
                stop.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            WalkState::Continue
        })
    });

    let mut sensitive = kimi_core::sync::into_inner(sensitive);
    sensitive.sort();
    Ok(Found {
        hits: kimi_core::sync::into_inner(hits),
        sensitive,
        single_file: namer.root_is_file,
        timed_out: timed_out.into_inner(),
        buffer_full: buffer_full.into_inner(),
    })
}

/// The regex as rg builds it: `^`/`$` at line boundaries, no match across a line end unless
/// `multiline`, where `.` also matches a newline.
fn build_matcher(params: &GrepParams) -> Result<RegexMatcher, String> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .multi_line(true)
        .unicode(true)
        .octal(false)
        .case_insensitive(params.ignore_case);
    if params.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(&params.pattern).map_err(|e| e.to_string())
}

/// The walker with rg's settings for the reference's flags.
fn build_walker(params: &GrepParams, work_dir: &Path, root: &Path) -> Result<ignore::WalkParallel, String> {
    let mut overrides = OverrideBuilder::new(work_dir);
    for vcs in VCS_DIRS {
        overrides.add(&format!("!{vcs}")).map_err(|e| e.to_string())?;
    }
    if let Some(glob) = params.glob.as_deref().filter(|g| !g.is_empty()) {
        overrides.add(glob).map_err(|e| e.to_string())?;
    }
    let overrides = overrides.build().map_err(|e| e.to_string())?;
    let respect = !params.include_ignored;
    let mut walk = WalkBuilder::new(root);
    walk.hidden(false)
        .parents(respect)
        .ignore(respect)
        .git_ignore(respect)
        .git_global(respect)
        .git_exclude(respect)
        .require_git(true)
        .follow_links(false)
        .overrides(overrides)
        .threads(
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_THREADS),
        );
    if respect {
        walk.add_custom_ignore_filename(".rgignore");
    }
    if let Some(name) = params.file_type.as_deref().filter(|t| !t.is_empty()) {
        let types = TypesBuilder::new()
            .add_defaults()
            .select(name)
            .build()
            .map_err(|e| e.to_string())?;
        walk.types(types);
    }
    Ok(walk.build_parallel())
}

/// Receives one file's results and formats them the way rg prints them.
struct FileSink<'a> {
    mode: Mode,
    matcher: &'a RegexMatcher,
    lines: &'a mut Vec<u8>,
    /// Names the file when several files are searched (each printed line then starts with the path).
    namer: Option<&'a Namer<'a>>,
    path: &'a Path,
    /// The printed path, made on the first printed line (most files print nothing).
    display: Option<String>,
    count: u64,
    matched: bool,
    stop: &'a AtomicBool,
}

impl FileSink<'_> {
    fn write_line(&mut self, separator: u8, number: Option<u64>, line: &[u8]) {
        if let Some(namer) = self.namer {
            let display = self.display.get_or_insert_with(|| namer.name(self.path));
            self.lines.extend_from_slice(display.as_bytes());
            self.lines.push(separator);
        }
        if let Some(number) = number {
            // Writing to a Vec cannot fail.
            let _ = write!(self.lines, "{number}");
            self.lines.push(separator);
        }
        self.lines.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            self.lines.push(b'\n');
        }
    }
}

impl Sink for FileSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matched = true;
        match self.mode {
            Mode::FilesWithMatches => return Ok(false),
            Mode::CountMatches => {
                let mut n = 0u64;
                self.matcher
                    .find_iter(mat.bytes(), |_| {
                        n += 1;
                        true
                    })
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                self.count += n.max(1);
            }
            Mode::Content | Mode::Lines => {
                let mut number = mat.line_number();
                for line in mat.lines() {
                    self.write_line(b':', number, line);
                    number = number.map(|n| n + 1);
                }
            }
        }
        Ok(!self.stop.load(Ordering::Relaxed))
    }

    fn context(&mut self, _searcher: &Searcher, context: &SinkContext<'_>) -> Result<bool, Self::Error> {
        self.write_line(b'-', context.line_number(), context.bytes());
        Ok(!self.stop.load(Ordering::Relaxed))
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        self.lines.extend_from_slice(b"--\n");
        Ok(true)
    }
}

/// Joins `message` parts with a space, as the reference builds its messages.
fn append(message: &mut String, part: &str) {
    if !message.is_empty() {
        message.push(' ');
    }
    message.push_str(part);
}

/// Turns the search results into the reference's output and message.
fn render(params: &GrepParams, found: Found) -> ToolReturnValue {
    let mode = Mode::parse(&params.output_mode);
    let Found {
        mut hits,
        sensitive,
        single_file,
        timed_out,
        buffer_full,
    } = found;
    if timed_out && hits.is_empty() {
        return tool_error(
            format!(
                "Grep timed out after {}s. Try a more specific path or pattern.",
                TIMEOUT.as_secs()
            ),
            "Grep timed out",
        );
    }
    let mut output: Vec<u8> = Vec::new();
    match mode {
        Mode::FilesWithMatches => {
            hits.sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.display.cmp(&b.display)));
            for hit in &hits {
                output.extend_from_slice(hit.display.as_bytes());
                output.push(b'\n');
            }
        }
        Mode::CountMatches => {
            hits.sort_by(|a, b| a.display.cmp(&b.display));
            for hit in &hits {
                if !single_file {
                    output.extend_from_slice(hit.display.as_bytes());
                    output.push(b':');
                }
                let _ = writeln!(output, "{}", hit.count);
            }
        }
        Mode::Content | Mode::Lines => {
            hits.sort_by(|a, b| a.display.cmp(&b.display));
            let file_separator = mode == Mode::Content
                && params.before_context.or(params.context).unwrap_or(0)
                    + params.after_context.or(params.context).unwrap_or(0)
                    > 0;
            for (i, hit) in hits.iter().enumerate() {
                if file_separator && i > 0 {
                    output.extend_from_slice(b"--\n");
                }
                output.extend_from_slice(&hit.lines);
            }
        }
    }
    let mut message = String::new();
    if buffer_full || output.len() > MAX_BUFFER {
        output.truncate(MAX_BUFFER);
        let end = output.iter().rposition(|&b| b == b'\n').unwrap_or(0);
        output.truncate(end);
        append(
            &mut message,
            "Output exceeded buffer limit. Some results omitted.",
        );
    }
    if timed_out {
        append(
            &mut message,
            &format!(
                "Grep timed out after {}s. Partial results returned.",
                TIMEOUT.as_secs()
            ),
        );
    }
    if !sensitive.is_empty() {
        append(&mut message, &sensitive_file_warning(&sensitive));
    }
    let text = String::from_utf8_lossy(&output);
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    if mode == Mode::CountMatches {
        let total: u64 = hits.iter().map(|h| h.count).sum();
        append(
            &mut message,
            &format!("Found {total} total occurrences across {} files.", hits.len()),
        );
    }
    let offset = params.offset.min(lines.len());
    let mut page = &lines[offset..];
    match params.head_limit {
        Some(limit) if limit > 0 && page.len() > limit => {
            let total = page.len() + params.offset;
            page = &page[..limit];
            append(
                &mut message,
                &format!(
                    "Results truncated to {limit} lines (total: {total}). Use offset={} to see more.",
                    params.offset + limit
                ),
            );
        }
        _ => {}
    }
    let body = page.join("\n");
    let mut builder = OutputBuilder::new();
    if body.is_empty() && !buffer_full {
        let no_match = if message.is_empty() {
            "No matches found".to_owned()
        } else {
            format!("No matches found. {message}")
        };
        return builder.ok(&no_match, "");
    }
    builder.write(&body);
    builder.ok(&message, "")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::test_support::{TestDir, call, ok_text};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    async fn grep(dir: &TestDir, args: Value) -> ToolReturnValue {
        call(Arc::new(Grep::new(dir.env(), FileSettings::default())), args)
            .await
            .1
    }

    fn set_mtime(path: &Path, secs: u64) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }

    fn sample() -> TestDir {
        let dir = TestDir::new();
        dir.write("one.txt", "a\nfoo\nb\nc\nd\ne\nfoo\nx\n");
        dir.write("two.txt", "foo\nz\n");
        dir.write("src/lib.rs", "fn foo() {}\nfn bar() {}\n");
        set_mtime(&dir.path("one.txt"), 1_000);
        set_mtime(&dir.path("two.txt"), 3_000);
        set_mtime(&dir.path("src/lib.rs"), 2_000);
        dir
    }

    #[tokio::test]
    async fn files_with_matches_newest_first() {
        let dir = sample();
        assert_eq!(
            grep(&dir, json!({"pattern": "foo"})).await,
            ok_text("./two.txt\n./src/lib.rs\n./one.txt", "")
        );
        let root = dir.root.to_string_lossy().into_owned();
        assert_eq!(
            grep(&dir, json!({"pattern": "foo", "path": root})).await,
            ok_text("two.txt\nsrc/lib.rs\none.txt", "")
        );
        assert_eq!(
            grep(&dir, json!({"pattern": "foo", "path": "src"})).await,
            ok_text("src/lib.rs", "")
        );
        assert_eq!(
            grep(&dir, json!({"pattern": "nothing here"})).await,
            ok_text("", "No matches found.")
        );
    }

    #[tokio::test]
    async fn content_with_context_and_numbers() {
        let dir = sample();
        let value = grep(
            &dir,
            json!({"pattern": "foo", "output_mode": "content", "-C": 1, "glob": "*.txt"}),
        )
        .await;
        let expected = [
            "./one.txt-1-a",
            "./one.txt:2:foo",
            "./one.txt-3-b",
            "--",
            "./one.txt-6-e",
            "./one.txt:7:foo",
            "./one.txt-8-x",
            "--",
            "./two.txt:1:foo",
            "./two.txt-2-z",
        ]
        .join("\n");
        assert_eq!(value, ok_text(&expected, ""));
        let value = grep(
            &dir,
            json!({"pattern": "foo", "output_mode": "content", "-n": false, "type": "rust"}),
        )
        .await;
        assert_eq!(value, ok_text("./src/lib.rs:fn foo() {}", ""));
        let value = grep(
            &dir,
            json!({"pattern": "FOO", "output_mode": "content", "-i": true, "path": "two.txt", "-A": 1}),
        )
        .await;
        assert_eq!(value, ok_text("1:foo\n2-z", ""));
    }

    #[tokio::test]
    async fn count_matches_with_summary() {
        let dir = sample();
        let value = grep(&dir, json!({"pattern": "o", "output_mode": "count_matches"})).await;
        assert_eq!(
            value,
            ok_text(
                "./one.txt:4\n./src/lib.rs:2\n./two.txt:2",
                "Found 8 total occurrences across 3 files."
            )
        );
        let value = grep(
            &dir,
            json!({"pattern": "o", "output_mode": "count_matches", "path": "one.txt"}),
        )
        .await;
        assert_eq!(value, ok_text("4", "Found 4 total occurrences across 1 files."));
        let value = grep(&dir, json!({"pattern": "zzz", "output_mode": "count_matches"})).await;
        assert_eq!(
            value,
            ok_text("", "No matches found. Found 0 total occurrences across 0 files.")
        );
    }

    #[tokio::test]
    async fn pagination() {
        let dir = TestDir::new();
        let text: String = (1..=10).map(|i| format!("hit {i}\n")).collect();
        dir.write("f.txt", &text);
        let args = json!({"pattern": "hit", "output_mode": "content", "path": "f.txt", "head_limit": 3, "offset": 2});
        assert_eq!(
            grep(&dir, args).await,
            ok_text(
                "3:hit 3\n4:hit 4\n5:hit 5",
                "Results truncated to 3 lines (total: 10). Use offset=5 to see more."
            )
        );
        let args = json!({"pattern": "hit", "output_mode": "content", "path": "f.txt", "head_limit": 0, "offset": 8});
        assert_eq!(grep(&dir, args).await, ok_text("9:hit 9\n10:hit 10", ""));
        let args = json!({"pattern": "hit", "output_mode": "content", "path": "f.txt", "offset": 20});
        assert_eq!(grep(&dir, args).await, ok_text("", "No matches found."));
        let many: String = (1..=300).map(|i| format!("hit {i}\n")).collect();
        dir.write("g.txt", &many);
        let value = grep(
            &dir,
            json!({"pattern": "hit", "output_mode": "content", "path": "g.txt"}),
        )
        .await;
        assert_eq!(
            value.message,
            "Results truncated to 250 lines (total: 300). Use offset=250 to see more."
        );
    }

    #[tokio::test]
    async fn a_search_outside_the_workspace_asks_and_secrets_stay_out_by_real_path() {
        let dir = sample();
        let other = tempfile::tempdir().unwrap();
        let outside = other.path().canonicalize().unwrap();
        std::fs::write(outside.join("notes"), "foo outside\n").unwrap();
        let tool = Arc::new(Grep::new(dir.env(), FileSettings::default()));
        let (effect, _) = call(
            Arc::clone(&tool),
            json!({"pattern": "foo", "path": outside.to_string_lossy()}),
        )
        .await;
        let Some(kimi_core::Effect::SideEffect(ask)) = effect else {
            panic!("expected a question, got {effect:?}")
        };
        assert_eq!(ask.action, "read file outside of working directory");
        assert_eq!(ask.description, format!("Search `{}`", outside.display()));
        // The agent's own config, reached through a link whose name says nothing.
        std::fs::write(outside.join("config.toml"), "foo = 'key'\n").unwrap();
        std::os::unix::fs::symlink(outside.join("config.toml"), dir.path("settings.txt")).unwrap();
        let tool = Arc::new(Grep::new(
            dir.env(),
            FileSettings {
                read_roots: Vec::new(),
                secrets: SecretFiles::new(&outside, None),
            },
        ));
        let (effect, value) = call(tool, json!({"pattern": "foo", "path": "settings.txt"})).await;
        assert!(matches!(effect, Some(kimi_core::Effect::SideEffect(_))));
        assert!(value.message.contains("Skipped 1 sensitive file(s)"), "{value:?}");
        assert!(!format!("{:?}", value.output).contains("key"), "{value:?}");
    }

    #[tokio::test]
    async fn sensitive_files_are_left_out() {
        let dir = sample();
        dir.write(".env", "foo=1\n");
        dir.write("conf/.env.local", "foo=2\n");
        dir.write(".env.example", "foo=3\n");
        dir.write("nomatch/id_rsa", "nothing\n");
        let root = dir.root.to_string_lossy().into_owned();
        let value = grep(
            &dir,
            json!({"pattern": "foo", "path": root, "output_mode": "content"}),
        )
        .await;
        let expected = [
            ".env.example:1:foo=3",
            "one.txt:2:foo",
            "one.txt:7:foo",
            "src/lib.rs:1:fn foo() {}",
            "two.txt:1:foo",
        ];
        assert_eq!(
            value,
            ok_text(
                &expected.join("\n"),
                "Skipped 2 sensitive file(s) (.env, .env.local) to protect secrets. These files may contain credentials or private keys."
            )
        );
        // Searched directly, a secret file still shows nothing.
        let value = grep(
            &dir,
            json!({"pattern": "foo", "path": ".env", "output_mode": "content"}),
        )
        .await;
        assert_eq!(
            value,
            ok_text(
                "",
                "No matches found. Skipped 1 sensitive file(s) (.env) to protect secrets. These files may contain credentials or private keys."
            )
        );
    }

    #[tokio::test]
    async fn ignore_rules_hidden_files_and_vcs_dirs() {
        let dir = TestDir::new();
        dir.mkdir(".git");
        dir.write(".git/config", "needle\n");
        dir.write(".gitignore", "build/\n");
        dir.write("build/out.txt", "needle\n");
        dir.write(".hidden.yml", "needle\n");
        dir.write("main.txt", "needle\n");
        dir.write_bytes("blob.bin", b"needle\0\x01\x02");
        let root = dir.root.to_string_lossy().into_owned();
        let value = grep(
            &dir,
            json!({"pattern": "needle", "path": root, "output_mode": "count_matches"}),
        )
        .await;
        assert_eq!(
            value,
            ok_text(
                ".hidden.yml:1\nmain.txt:1",
                "Found 2 total occurrences across 2 files."
            )
        );
        let value = grep(&dir, json!({"pattern": "needle", "path": root, "output_mode": "count_matches", "include_ignored": true})).await;
        assert_eq!(
            value,
            ok_text(
                ".hidden.yml:1\nbuild/out.txt:1\nmain.txt:1",
                "Found 3 total occurrences across 3 files."
            )
        );
    }

    #[tokio::test]
    async fn multiline_and_errors() {
        let dir = sample();
        let value = grep(
            &dir,
            json!({"pattern": "foo.b", "output_mode": "content", "multiline": true, "path": "one.txt"}),
        )
        .await;
        assert_eq!(value, ok_text("2:foo\n3:b", ""));
        let value = grep(
            &dir,
            json!({"pattern": "foo.b", "output_mode": "content", "path": "one.txt"}),
        )
        .await;
        assert_eq!(value, ok_text("", "No matches found."));
        let value = grep(&dir, json!({"pattern": "(", "path": "one.txt"})).await;
        assert!(
            value.is_error
                && value
                    .message
                    .starts_with("Failed to grep. Error: regex parse error"),
            "{value:?}"
        );
        let value = grep(&dir, json!({"pattern": "x", "path": "missing"})).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to grep. Error: missing: No such file or directory (os error 2)",
                "Failed to grep"
            )
        );
        let value = grep(&dir, json!({"pattern": "x", "type": "nosuchtype"})).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Failed to grep. Error: unrecognized file type: nosuchtype",
                "Failed to grep"
            )
        );
    }

    #[tokio::test]
    async fn long_lines_go_through_the_output_budget() {
        let dir = TestDir::new();
        dir.write("wide.txt", &format!("{}\n", "q".repeat(5000)));
        let value = grep(
            &dir,
            json!({"pattern": "q", "output_mode": "content", "path": "wide.txt"}),
        )
        .await;
        assert_eq!(value.message, "Output is truncated to fit in the message.");
        let kimi_wire::message::ToolOutput::Text(text) = value.output else {
            panic!()
        };
        assert_eq!(text.chars().count(), 2000);
        assert!(text.ends_with("[...truncated]"));
    }

    #[test]
    fn timeouts_and_full_buffers() {
        let params: GrepParams =
            serde_json::from_value(json!({"pattern": "x", "output_mode": "content"})).unwrap();
        let hit = |name: &str| Hit {
            display: name.into(),
            lines: format!("{name}:1:x\n").into_bytes(),
            count: 1,
            mtime: None,
        };
        let value = render(
            &params,
            Found {
                timed_out: true,
                ..Found::default()
            },
        );
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Grep timed out after 20s. Try a more specific path or pattern.",
                "Grep timed out"
            )
        );
        let value = render(
            &params,
            Found {
                hits: vec![hit("b"), hit("a")],
                timed_out: true,
                ..Found::default()
            },
        );
        assert_eq!(
            value,
            ok_text(
                "a:1:x\nb:1:x",
                "Grep timed out after 20s. Partial results returned."
            )
        );
        let value = render(
            &params,
            Found {
                hits: vec![hit("a")],
                buffer_full: true,
                ..Found::default()
            },
        );
        assert_eq!(
            value,
            ok_text("a:1:x", "Output exceeded buffer limit. Some results omitted.")
        );
    }
}
