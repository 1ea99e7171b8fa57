//! `kimi-agent info`: version and protocol information.
//!
//! Same lines and JSON keys as the reference's `kimi info`, except that the Python version line
//! (`python_version`) is left out: there is no Python runtime here. `kimi_cli_version` is the release of
//! the Kimi Code CLI whose behaviour we implement, because clients gate on it (the VS Code extension
//! refuses a CLI below 0.82); our own version has a key (and a line) of its own, `kimi_agent_version`.
//! One more line and key are ours too: the provider types this build runs (`provider types`,
//! `provider_types`).

use std::io::Write;

use serde_json::json;

use crate::cli::InfoArgs;

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
}

impl Info {
    /// The information for this build.
    pub fn current() -> Self {
        Self {
            kimi_cli_version: kimi_core::KIMI_CLI_VERSION,
            version: env!("CARGO_PKG_VERSION"),
            agent_spec_versions: AGENT_SPEC_VERSIONS,
            wire_protocol_version: kimi_wire::PROTOCOL_VERSION,
            provider_types: kimi_core::llm::PROVIDER_TYPES.map(|t| t.as_str()).to_vec(),
        }
    }

    /// Human-readable form, one `label: value` line each: the reference's lines, then ours.
    pub fn to_text(&self) -> String {
        format!(
            "kimi-cli version: {}\nagent spec versions: {}\nwire protocol: {}\nkimi-agent version: {}\nprovider types: {}\n",
            self.kimi_cli_version,
            self.agent_spec_versions.join(", "),
            self.wire_protocol_version,
            self.version,
            self.provider_types.join(", ")
        )
    }

    /// One line of JSON with the reference's keys, then ours.
    pub fn to_json(&self) -> String {
        json!({
            "kimi_cli_version": self.kimi_cli_version,
            "agent_spec_versions": self.agent_spec_versions,
            "wire_protocol_version": self.wire_protocol_version,
            "kimi_agent_version": self.version,
            "provider_types": self.provider_types,
        })
        .to_string()
    }
}

/// Runs `info`, writing to stdout (this command's output, not a protocol stream).
pub fn run(args: &InfoArgs) -> std::io::Result<()> {
    let info = Info::current();
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
