//! Agent files (`--agent-file`, YAML), as the reference reads them (`agentspec.py`).
//!
//! An agent file names a system prompt, its arguments, the tools (by the reference's `module:Class`
//! paths, resolved to our tools by `kimi-tools`) and subagents; `extend` inherits from another file or
//! from a built-in agent by name (`default`, `kimi-code`), overriding only what the file sets. The
//! built-in agents are our own files, embedded in the binary: `default` offers the reference's tools,
//! `kimi-code` the tool set of Kimi Code (shared/seeds/002).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Spec versions we read.
const SUPPORTED_VERSIONS: [&str; 1] = ["1"];
/// How deep `extend` may chain before we call it a cycle.
const MAX_EXTEND_DEPTH: usize = 16;

/// The embedded built-in agent files, by virtual path.
const BUILTIN_FILES: &[(&str, &str)] = &[
    (
        "builtin:default/agent.yaml",
        include_str!("agents/default/agent.yaml"),
    ),
    (
        "builtin:default/coder.yaml",
        include_str!("agents/default/coder.yaml"),
    ),
    (
        "builtin:default/explore.yaml",
        include_str!("agents/default/explore.yaml"),
    ),
    (
        "builtin:default/plan.yaml",
        include_str!("agents/default/plan.yaml"),
    ),
    (
        "builtin:default/system.md",
        include_str!("agents/default/system.md"),
    ),
    (
        "builtin:kimi-code/agent.yaml",
        include_str!("agents/kimi-code/agent.yaml"),
    ),
    (
        "builtin:kimi-code/coder.yaml",
        include_str!("agents/kimi-code/coder.yaml"),
    ),
    (
        "builtin:kimi-code/explore.yaml",
        include_str!("agents/kimi-code/explore.yaml"),
    ),
    (
        "builtin:kimi-code/plan.yaml",
        include_str!("agents/kimi-code/plan.yaml"),
    ),
];

/// The built-in default agent.
pub const DEFAULT_AGENT: &str = "builtin:default/agent.yaml";
/// The built-in `kimi-code` agent (seeds/002's tool set).
pub const KIMI_CODE_AGENT: &str = "builtin:kimi-code/agent.yaml";

/// The agent file of the built-in agent called `name` (`default`, `kimi-code`), for `--agent` and for
/// `extend` by name.
pub fn builtin_agent(name: &str) -> Option<&'static str> {
    match name {
        "default" => Some(DEFAULT_AGENT),
        "kimi-code" => Some(KIMI_CODE_AGENT),
        _ => None,
    }
}

/// Why an agent file could not be used (reference wording where it has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentSpecError {
    /// The file is missing.
    #[error("Agent spec file not found: {0}")]
    NotFound(String),
    /// The YAML does not parse or has the wrong shape.
    #[error("Invalid YAML in agent spec file {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// `version` is not one we read.
    #[error("Unsupported agent spec version: {0}")]
    Version(String),
    /// A required field is missing after inheritance.
    #[error("{0}")]
    Missing(&'static str),
    /// `extend` chains too deep (or loops).
    #[error("Agent spec extends itself or chains too deep: {0}")]
    Cycle(String),
    /// The system prompt file cannot be read.
    #[error("Cannot read system prompt {path}: {message}")]
    Prompt {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

#[derive(Debug, Deserialize)]
struct FileData {
    #[serde(default)]
    version: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    agent: RawSpec,
}

/// One file's `agent:` table; `None` means "inherit".
#[derive(Debug, Default, Deserialize)]
struct RawSpec {
    extend: Option<String>,
    name: Option<String>,
    system_prompt_path: Option<String>,
    #[serde(default)]
    system_prompt_args: BTreeMap<String, String>,
    model: Option<String>,
    when_to_use: Option<String>,
    #[serde(default, deserialize_with = "present")]
    tools: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    allowed_tools: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    exclude_tools: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    subagents: Option<Option<BTreeMap<String, RawSubagent>>>,
}

/// Distinguishes "key absent" (outer `None`, inherit) from "key: null" (`Some(None)`).
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Debug, Clone, Deserialize)]
struct RawSubagent {
    path: String,
    description: String,
}

/// A subagent type an agent offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentSpec {
    /// Its agent file (a real path or a `builtin:` one).
    pub path: String,
    /// What it is good at (shown to the model).
    pub description: String,
}

/// An agent file with `extend` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSpec {
    /// Agent name.
    pub name: String,
    /// The system prompt file (a real path or a `builtin:` one).
    pub system_prompt_path: String,
    /// Template arguments for the system prompt.
    pub system_prompt_args: BTreeMap<String, String>,
    /// Preferred model alias.
    pub model: Option<String>,
    /// When to use it (for subagents).
    pub when_to_use: String,
    /// Tool paths.
    pub tools: Vec<String>,
    /// If set, only these tools (instead of `tools`).
    pub allowed_tools: Option<Vec<String>>,
    /// Tools removed from the list.
    pub exclude_tools: Vec<String>,
    /// Subagent types by name.
    pub subagents: BTreeMap<String, SubagentSpec>,
}

impl AgentSpec {
    /// Loads `path` (a built-in agent's name or a `builtin:` path selects an embedded agent).
    pub fn load(path: &str) -> Result<Self, AgentSpecError> {
        let path = builtin_agent(path).map_or_else(|| path.to_owned(), str::to_owned);
        let text = read_file(&path).map_err(|_| AgentSpecError::NotFound(path.clone()))?;
        Self::from_text(&path, &text)
    }

    /// Parses agent-file `text` as if it had been read from `path` (which places relative paths in
    /// it). An `extend` still loads its base file, from disk or the built-ins.
    pub fn from_text(path: &str, text: &str) -> Result<Self, AgentSpecError> {
        let raw = parse_raw(path, text, 0)?;
        Ok(Self {
            name: raw
                .name
                .ok_or(AgentSpecError::Missing("Agent name is required"))?,
            system_prompt_path: raw
                .system_prompt_path
                .ok_or(AgentSpecError::Missing("System prompt path is required"))?,
            system_prompt_args: raw.system_prompt_args,
            model: raw.model,
            when_to_use: raw.when_to_use.unwrap_or_default(),
            tools: raw
                .tools
                .ok_or(AgentSpecError::Missing("Tools are required"))?
                .unwrap_or_default(),
            allowed_tools: raw.allowed_tools.flatten(),
            exclude_tools: raw.exclude_tools.flatten().unwrap_or_default(),
            subagents: raw
                .subagents
                .flatten()
                .unwrap_or_default()
                .into_iter()
                .map(|(name, s)| {
                    (
                        name,
                        SubagentSpec {
                            path: s.path,
                            description: s.description,
                        },
                    )
                })
                .collect(),
        })
    }

    /// The tool paths this agent loads: `allowed_tools` if set, else `tools`, minus `exclude_tools`.
    pub fn effective_tools(&self) -> Vec<String> {
        let base = self.allowed_tools.as_ref().unwrap_or(&self.tools);
        base.iter()
            .filter(|t| !self.exclude_tools.contains(t))
            .cloned()
            .collect()
    }

    /// The system prompt template text.
    pub fn system_prompt_template(&self) -> Result<String, AgentSpecError> {
        read_file(&self.system_prompt_path).map_err(|message| AgentSpecError::Prompt {
            path: self.system_prompt_path.clone(),
            message,
        })
    }
}

fn read_file(path: &str) -> Result<String, String> {
    if let Some((_, text)) = BUILTIN_FILES.iter().find(|(p, _)| *p == path) {
        return Ok((*text).to_owned());
    }
    // A `builtin:` path names an embedded file only; it must never fall through to a relative file
    // of that name in the current directory.
    if path.starts_with("builtin:") {
        return Err(format!("no built-in file {path}"));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// `relative` resolved against the directory of `base` (both may be `builtin:` paths).
fn sibling(base: &str, relative: &str) -> String {
    if Path::new(relative).is_absolute() || relative.starts_with("builtin:") {
        return relative.to_owned();
    }
    let relative = relative.strip_prefix("./").unwrap_or(relative);
    match base.rsplit_once('/') {
        Some((dir, _)) if base.starts_with("builtin:") => format!("{dir}/{relative}"),
        _ => {
            let dir = Path::new(base)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            dir.join(relative).to_string_lossy().into_owned()
        }
    }
}

fn load_raw(path: &str, depth: usize) -> Result<RawSpec, AgentSpecError> {
    if depth > MAX_EXTEND_DEPTH {
        return Err(AgentSpecError::Cycle(path.to_owned()));
    }
    let text = read_file(path).map_err(|_| AgentSpecError::NotFound(path.to_owned()))?;
    parse_raw(path, &text, depth)
}

/// One file's text, with its own paths placed next to `path` and its `extend` resolved.
fn parse_raw(path: &str, text: &str, depth: usize) -> Result<RawSpec, AgentSpecError> {
    let invalid = |message: String| AgentSpecError::Invalid {
        path: path.to_owned(),
        message,
    };
    let data: FileData = serde_yaml_ng::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let version = match &data.version {
        None => "1".to_owned(),
        Some(serde_yaml_ng::Value::String(s)) => s.clone(),
        Some(serde_yaml_ng::Value::Number(n)) => n.to_string(),
        Some(other) => format!("{other:?}"),
    };
    if !SUPPORTED_VERSIONS.contains(&version.as_str()) {
        return Err(AgentSpecError::Version(version));
    }
    let mut spec = data.agent;
    spec.system_prompt_path = spec.system_prompt_path.map(|p| sibling(path, &p));
    if let Some(Some(subagents)) = &mut spec.subagents {
        for sub in subagents.values_mut() {
            sub.path = sibling(path, &sub.path);
        }
    }
    let Some(extend) = spec.extend.take() else {
        return Ok(spec);
    };
    let base_path = builtin_agent(&extend).map_or_else(|| sibling(path, &extend), str::to_owned);
    let mut base = load_raw(&base_path, depth + 1)?;
    if spec.name.is_some() {
        base.name = spec.name;
    }
    if spec.system_prompt_path.is_some() {
        base.system_prompt_path = spec.system_prompt_path;
    }
    base.system_prompt_args.extend(spec.system_prompt_args);
    if spec.model.is_some() {
        base.model = spec.model;
    }
    if spec.when_to_use.is_some() {
        base.when_to_use = spec.when_to_use;
    }
    if spec.tools.is_some() {
        base.tools = spec.tools;
    }
    if spec.allowed_tools.is_some() {
        base.allowed_tools = spec.allowed_tools;
    }
    if spec.exclude_tools.is_some() {
        base.exclude_tools = spec.exclude_tools;
    }
    if spec.subagents.is_some() {
        base.subagents = spec.subagents;
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_agent_lists_the_reference_tools_in_order() {
        let spec = AgentSpec::load("default").unwrap();
        // The reference's 17, then ours.
        assert_eq!(spec.tools.len(), 21);
        assert_eq!(spec.tools[3], "kimi_cli.tools.shell:Shell");
        assert_eq!(spec.tools[16], "kimi_cli.tools.plan.enter:EnterPlanMode");
        assert_eq!(
            spec.tools[17..],
            ["CronCreate", "CronList", "CronDelete", "git_diff"]
        );
        assert_eq!(
            spec.subagents.keys().collect::<Vec<_>>(),
            ["coder", "explore", "plan"]
        );
        assert!(
            spec.system_prompt_template()
                .unwrap()
                .contains("${KIMI_WORK_DIR}")
        );
    }

    #[test]
    fn extend_default_with_exclusions() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.yaml");
        std::fs::write(
            &file,
            "version: 1\nagent:\n  extend: default\n  exclude_tools:\n    - \"kimi_cli.tools.shell:Shell\"\n",
        )
        .unwrap();
        let spec = AgentSpec::load(file.to_str().unwrap()).unwrap();
        let tools = spec.effective_tools();
        assert_eq!(tools.len(), 20);
        assert!(!tools.iter().any(|t| t.ends_with(":Shell")));
        assert_eq!(spec.system_prompt_path, "builtin:default/system.md");
    }

    #[test]
    fn subagent_files_inherit_and_restrict() {
        let coder = AgentSpec::load("builtin:default/coder.yaml").unwrap();
        assert!(
            coder
                .effective_tools()
                .contains(&"kimi_cli.tools.shell:Shell".to_owned())
        );
        assert!(!coder.effective_tools().iter().any(|t| t.ends_with(":Agent")));
        assert!(coder.system_prompt_args["ROLE_ADDITIONAL"].contains("subagent"));
        assert!(coder.subagents.is_empty());
    }

    #[test]
    fn kimi_code_is_built_in_and_extendable_by_name() {
        let spec = AgentSpec::load("kimi-code").unwrap();
        assert_eq!(spec, AgentSpec::load(KIMI_CODE_AGENT).unwrap());
        assert_eq!(spec.tools[3], "kimi_code:Bash");
        assert!(spec.tools.iter().all(|t| !t.starts_with("kimi_cli.")));
        assert_eq!(spec.system_prompt_path, "builtin:default/system.md");
        assert_eq!(
            spec.subagents.keys().collect::<Vec<_>>(),
            ["coder", "explore", "plan"]
        );
        assert_eq!(spec.subagents["coder"].path, "builtin:kimi-code/coder.yaml");
        let coder = AgentSpec::load(&spec.subagents["coder"].path).unwrap();
        assert!(coder.effective_tools().contains(&"kimi_code:Edit".to_owned()));

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.yaml");
        std::fs::write(
            &file,
            "version: 1\nagent:\n  extend: kimi-code\n  exclude_tools: [\"kimi_code:Bash\"]\n",
        )
        .unwrap();
        let mine = AgentSpec::load(file.to_str().unwrap()).unwrap();
        assert_eq!(mine.effective_tools().len(), spec.tools.len() - 1);
        assert!(mine.effective_tools().contains(&"kimi_code:Read".to_owned()));
        assert!(!mine.effective_tools().contains(&"kimi_code:Bash".to_owned()));
        assert_eq!(builtin_agent("okabe"), None);
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(
            AgentSpec::load("/nope/agent.yaml").unwrap_err(),
            AgentSpecError::NotFound("/nope/agent.yaml".into())
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.yaml");
        std::fs::write(&file, "version: 2\nagent: {}\n").unwrap();
        assert_eq!(
            AgentSpec::load(file.to_str().unwrap()).unwrap_err(),
            AgentSpecError::Version("2".into())
        );
        std::fs::write(&file, "version: 1\nagent:\n  name: x\n").unwrap();
        assert_eq!(
            AgentSpec::load(file.to_str().unwrap()).unwrap_err(),
            AgentSpecError::Missing("System prompt path is required")
        );
        std::fs::write(&file, "version: 1\nagent:\n  extend: ./a.yaml\n").unwrap();
        assert!(matches!(
            AgentSpec::load(file.to_str().unwrap()).unwrap_err(),
            AgentSpecError::Cycle(_)
        ));
    }
}
