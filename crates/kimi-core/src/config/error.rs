//! Errors from loading configuration and resolving the model.

use std::fmt;
use std::path::PathBuf;

use super::schema::ConfigIssue;

/// Where a configuration came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// A file: the default `config.toml`, a `--config-file`, or the legacy `config.json`.
    File(PathBuf),
    /// The text of `--config`.
    Inline,
}

impl fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "configuration file {}", path.display()),
            Self::Inline => f.write_str("configuration text"),
        }
    }
}

/// Why a configuration could not be used. Every variant is fatal at startup: the binary prints it
/// and exits (as a bad `--config` parameter when it came from the command line).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Writing the default (or migrated) configuration failed.
    #[error("cannot write configuration file {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A `.json` file is not valid JSON.
    #[error("Invalid JSON in configuration file {}: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where and why parsing failed.
        source: serde_json::Error,
    },
    /// A TOML file is not valid TOML.
    #[error("Invalid TOML in configuration file {}: {source}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// Where and why parsing failed.
        source: toml::de::Error,
    },
    /// `--config` text is blank.
    #[error("Configuration text cannot be empty")]
    EmptyText,
    /// `--config` text is neither JSON nor TOML.
    #[error("Invalid configuration text: {json}; {toml}")]
    TextSyntax {
        /// Why it is not JSON.
        json: serde_json::Error,
        /// Why it is not TOML.
        toml: toml::de::Error,
    },
    /// The content parsed but does not fit the schema.
    #[error("Invalid {origin}: {}", IssueList(issues))]
    Invalid {
        /// The file or text.
        origin: ConfigOrigin,
        /// Every problem, each with its dotted key.
        issues: Vec<ConfigIssue>,
    },
    /// An environment variable that overrides the model holds a value of the wrong kind.
    #[error("Invalid value {value:?} in environment variable {var}: expected {expected}")]
    Env {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should have been.
        expected: &'static str,
    },
}

struct IssueList<'a>(&'a [ConfigIssue]);

impl fmt::Display for IssueList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} problems", many.len())?;
                for issue in many {
                    write!(f, "\n  - {issue}")?;
                }
                Ok(())
            }
        }
    }
}
