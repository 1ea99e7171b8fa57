//! `kimi-agent info`: version and protocol information.
//!
//! Same lines and JSON keys as the reference's `kimi info`, except that the Python version line
//! (`python_version`) is left out: there is no Python runtime here. `kimi_cli_version` is the release of
//! the Kimi Code CLI whose behaviour we implement, because clients gate on it (the VS Code extension
//! refuses a CLI below 0.82); our own version has a key (and a line) of its own, `kimi_agent_version`.
//! Two more lines and keys are ours too: the provider types this build runs (`provider types`,
//! `provider_types`), and the sandbox (`sandbox`): the mode the flags and configuration ask for and
//! whether this kernel enforces it.

use std::io::Write;

use serde_json::json;

use kimi_core::Sandbox;
use kimi_wire::params::SandboxInfo;

use crate::cli::{Cli, InfoArgs};

/// Agent specification versions that `--agent-file` accepts.
pub const AGENT_SPEC_VERSIONS: &[&str] = &["1"];

/// What `info` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// The Kimi Code CLI release we implement.
    pub kimi_cli_version: &'static str,
    /// kimi-agent's version.
    pub version: &'static str,
    /// Supported agent specification versions.
    pub agent_spec_versions: &'static [&'static str],
    /// The Wire protocol version spoken.
    pub wire_protocol_version: &'static str,
    /// The provider types (`[providers.X] type`) this build runs, test providers included.
    pub provider_types: Vec<&'static str>,
    /// The sandbox in effect for the given flags and configuration, when it was looked at.
    pub sandbox: Option<SandboxReport>,
}

/// The sandbox as `info` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxReport {
    /// The text line's value ([`Sandbox::summary`]).
    pub summary: String,
    /// The JSON value (as `initialize` reports it).
    pub info: SandboxInfo,
}

impl SandboxReport {
    /// What `cli`'s `--sandbox` and configuration ask for, tried on this kernel, for the work dir and
    /// extra directories of `cli`. A configuration that does not load leaves its sandbox keys out (the
    /// server would refuse to start; the error is in the summary).
    pub fn of(cli: &Cli) -> Self {
        let share_dir = kimi_core::paths::share_dir();
        let source = cli.config_source();
        // `info` only reads: no default file is written where there is none.
        let loaded = match source {
            kimi_core::ConfigSource::Default if !kimi_core::paths::config_file(&share_dir).exists() => {
                Ok(kimi_core::Config::default())
            }
            _ => kimi_core::load_config_in(&source, &share_dir),
        };
        let (config, problem) = match loaded {
            Ok(config) => (config, None),
            Err(e) => (kimi_core::Config::default(), Some(e.to_string())),
        };
        let sandbox = Sandbox::start(kimi_core::sandbox_policy(&config, cli.sandbox));
        let work_dir = cli
            .work_dir
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        let work_dir = std::fs::canonicalize(&work_dir).unwrap_or(work_dir);
        let mut summary = sandbox.summary();
        if let Some(problem) = problem {
            summary.push_str(&format!(" [configuration not loaded: {problem}]"));
        }
        // `--add-dir` as the session takes it: a relative one from the current directory.
        let add_dirs: Vec<std::path::PathBuf> = cli
            .add_dirs
            .iter()
            .map(|dir| kimi_core::canonical_work_dir(dir))
            .collect();
        Self {
            summary,
            info: sandbox.info(&work_dir, &add_dirs),
        }
    }
}

impl Info {
    /// The information for this build.
    pub fn current() -> Self {
        Self {
            kimi_cli_version: kimi_core::KIMI_CLI_VERSION,
            version: env!("CARGO_PKG_VERSION"),
            agent_spec_versions: AGENT_SPEC_VERSIONS,
            wire_protocol_version: kimi_wire::PROTOCOL_VERSION,
            provider_types: kimi_core::PROVIDER_TYPES.map(|t| t.as_str()).to_vec(),
            sandbox: None,
        }
    }

    /// Human-readable form, one `label: value` line each: the reference's lines, then ours.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "kimi-cli version: {}\nagent spec versions: {}\nwire protocol: {}\nkimi-agent version: {}\nprovider types: {}\n",
            self.kimi_cli_version,
            self.agent_spec_versions.join(", "),
            self.wire_protocol_version,
            self.version,
            self.provider_types.join(", ")
        );
        if let Some(sandbox) = &self.sandbox {
            text.push_str(&format!("sandbox: {}\n", sandbox.summary));
        }
        text
    }

    /// One line of JSON with the reference's keys, then ours.
    pub fn to_json(&self) -> String {
        let mut value = json!({
            "kimi_cli_version": self.kimi_cli_version,
            "agent_spec_versions": self.agent_spec_versions,
            "wire_protocol_version": self.wire_protocol_version,
            "kimi_agent_version": self.version,
            "provider_types": self.provider_types,
        });
        if let (Some(sandbox), Some(object)) = (&self.sandbox, value.as_object_mut()) {
            object.insert("sandbox".to_owned(), json!(sandbox.info));
        }
        value.to_string()
    }
}

/// Runs `info`, writing to stdout (this command's output, not a protocol stream).
pub fn run(args: &InfoArgs, cli: &Cli) -> std::io::Result<()> {
    let info = Info {
        sandbox: Some(SandboxReport::of(cli)),
        ..Info::current()
    };
    let text = if args.json {
        info.to_json() + "\n"
    } else {
        info.to_text()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn text_has_the_reference_lines() {
        let info = Info {
            kimi_cli_version: "1.49.0",
            version: "9.9.9",
            agent_spec_versions: &["1"],
            wire_protocol_version: "1.10",
            provider_types: vec!["kimi", "_echo"],
            sandbox: None,
        };
        assert_eq!(
            info.to_text(),
            "kimi-cli version: 1.49.0\nagent spec versions: 1\nwire protocol: 1.10\nkimi-agent version: 9.9.9\nprovider types: kimi, _echo\n"
        );
    }

    #[test]
    fn json_has_the_reference_keys() {
        let value: serde_json::Value = serde_json::from_str(&Info::current().to_json()).unwrap();
        assert_eq!(
            value,
            json!({
                "kimi_cli_version": "1.49.0",
                "agent_spec_versions": ["1"],
                "wire_protocol_version": "1.10",
                "kimi_agent_version": env!("CARGO_PKG_VERSION"),
                "provider_types": ["kimi", "openai_legacy", "openai_responses", "anthropic", "google_genai",
                    "gemini", "vertexai", "_echo", "_scripted_echo", "_chaos", "_cassette"],
            })
        );
    }
}
