//! Reading a configuration from a file or from `--config` text.
//!
//! Reference behaviour kept here:
//! - a file is JSON when its name ends in `.json` (any case), TOML otherwise;
//! - `--config` text is tried as JSON first, then as TOML;
//! - a missing file is created with the defaults (in its own format) and the defaults are used;
//! - at the default location, a legacy `config.json` is first migrated to `config.toml` and kept
//!   as `config.json.bak`;
//! - unknown keys are ignored (we also list them in [`Config::warnings`]).

use std::path::{Path, PathBuf};

use serde::Deserializer;

use super::error::{ConfigError, ConfigOrigin};
use super::schema::{Config, ConfigIssue};
use crate::paths;

/// Where to read the configuration from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `<share>/config.toml` (no `--config` and no `--config-file`).
    Default,
    /// `--config-file PATH`.
    File(PathBuf),
    /// `--config TEXT`, JSON or TOML.
    Inline(String),
}

/// Loads the configuration with an explicit share directory (used for `ConfigSource::Default`
/// and to tell whether a `--config-file` is the default file).
pub fn load_in(source: &ConfigSource, share_dir: &Path) -> Result<Config, ConfigError> {
    match source {
        ConfigSource::Inline(text) => from_text(text),
        ConfigSource::Default => {
            let path = paths::config_file(share_dir);
            if !path.exists() {
                migrate_legacy_json(share_dir)?;
            }
            load_file(&path, true)
        }
        ConfigSource::File(path) => {
            let is_default = resolve(path) == resolve(&paths::config_file(share_dir));
            load_file(path, is_default)
        }
    }
}

/// Parses `--config` text: JSON if it parses as JSON, else TOML.
pub fn from_text(text: &str) -> Result<Config, ConfigError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ConfigError::EmptyText);
    }
    let mut config = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => from_json(value, &ConfigOrigin::Inline)?,
        Err(json) => match toml::from_str::<toml::Table>(text) {
            Ok(table) => from_deserializer(toml::Value::Table(table), &ConfigOrigin::Inline)?,
            Err(toml) => return Err(ConfigError::TextSyntax { json, toml }),
        },
    };
    config.source_file = None;
    config.is_from_default_location = false;
    Ok(config)
}

/// The text written to a new configuration file: the defaults, in TOML or JSON.
pub fn default_file_text(json: bool) -> Result<String, std::io::Error> {
    let config = Config::default();
    if json {
        serde_json::to_string_pretty(&config).map_err(std::io::Error::other)
    } else {
        let body = toml::to_string(&config).map_err(std::io::Error::other)?;
        Ok(format!(
            "# kimi-agent configuration (also read by the Python Kimi Code CLI).\n\
             # Add [providers.<name>] and [models.<alias>] tables, then set default_model.\n\n{body}"
        ))
    }
}

/// Writes `config` to `path` in the file's format, whole, as the reference's `save_config` does (`login`
/// and `logout` change the configuration this way). Unset optional keys are left out.
pub fn save(path: &Path, config: &Config) -> Result<(), ConfigError> {
    let text = if is_json(path) {
        serde_json::to_string_pretty(config).map_err(std::io::Error::other)
    } else {
        toml::to_string(config).map_err(std::io::Error::other)
    }
    .map_err(|source| ConfigError::Write {
        path: path.to_owned(),
        source,
    })?;
    write_file(path, &text)
}

fn load_file(path: &Path, is_default: bool) -> Result<Config, ConfigError> {
    tracing::debug!(path = %path.display(), "loading config");
    let mut config = if path.exists() {
        if is_default {
            // The share dir's config holds API keys: one an older version (or an editor) left readable
            // by others is tightened now that the agent opens it.
            crate::private_files::tighten(path);
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        parse_file_text(path, &text)?
    } else {
        tracing::info!(path = %path.display(), "no config file, writing the defaults");
        let text = default_file_text(is_json(path)).map_err(|source| ConfigError::Write {
            path: path.to_owned(),
            source,
        })?;
        write_file(path, &text)?;
        Config::default()
    };
    for warning in &config.warnings {
        tracing::warn!(path = %path.display(), "{warning}");
    }
    config.source_file = Some(path.to_owned());
    config.is_from_default_location = is_default;
    Ok(config)
}

/// Parses the content of a configuration file named `path` (the name picks the format).
pub fn parse_file_text(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let origin = ConfigOrigin::File(path.to_owned());
    if is_json(path) {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|source| ConfigError::Json {
            path: path.to_owned(),
            source,
        })?;
        from_json(value, &origin)
    } else {
        let table: toml::Table = toml::from_str(text).map_err(|source| ConfigError::Toml {
            path: path.to_owned(),
            source,
        })?;
        from_deserializer(toml::Value::Table(table), &origin)
    }
}

/// Like [`from_deserializer`], but rejects JSON that is not an object up front (serde would
/// otherwise read an array as the struct's fields in order).
fn from_json(value: serde_json::Value, origin: &ConfigOrigin) -> Result<Config, ConfigError> {
    if !value.is_object() {
        return Err(ConfigError::Invalid {
            origin: origin.clone(),
            issues: vec![ConfigIssue {
                key: "(top level)".to_owned(),
                message: "expected an object of settings".to_owned(),
            }],
        });
    }
    from_deserializer(value, origin)
}

/// Turns parsed JSON or TOML into a validated [`Config`], naming the key of every problem.
fn from_deserializer<'de, D>(de: D, origin: &ConfigOrigin) -> Result<Config, ConfigError>
where
    D: Deserializer<'de>,
{
    let mut unknown = Vec::new();
    let mut record = |path: serde_ignored::Path<'_>| unknown.push(path.to_string());
    let de = serde_ignored::Deserializer::new(de, &mut record);
    let mut config: Config = serde_path_to_error::deserialize(de).map_err(|err| {
        let key = match err.path().to_string() {
            p if p == "." => "(top level)".to_owned(),
            p => p,
        };
        ConfigError::Invalid {
            origin: origin.clone(),
            issues: vec![ConfigIssue {
                key,
                message: bare_message(&err.inner().to_string()),
            }],
        }
    })?;
    let issues = config.validate();
    if !issues.is_empty() {
        return Err(ConfigError::Invalid {
            origin: origin.clone(),
            issues,
        });
    }
    config.warnings = unknown
        .into_iter()
        .map(|key| format!("unknown key ignored: {key}"))
        .collect();
    Ok(config)
}

/// toml's value errors repeat the key as a trailing "in `a.b`" line; we print the key already.
fn bare_message(message: &str) -> String {
    let message = message.trim_end();
    match message.rfind("\nin `") {
        Some(at) => message[..at].trim_end().to_owned(),
        None => message.to_owned(),
    }
}

/// Converts `<share>/config.json` to `<share>/config.toml` once, keeping the old file as
/// `config.json.bak`. Does nothing when there is no legacy file or the TOML file exists.
fn migrate_legacy_json(share_dir: &Path) -> Result<(), ConfigError> {
    let old = paths::legacy_config_file(share_dir);
    let new = paths::config_file(share_dir);
    if !old.exists() || new.exists() {
        return Ok(());
    }
    tracing::info!(from = %old.display(), to = %new.display(), "migrating legacy config");
    let text = std::fs::read_to_string(&old).map_err(|source| ConfigError::Read {
        path: old.clone(),
        source,
    })?;
    let config = parse_file_text(&old, &text)?;
    let body = toml::to_string(&config).map_err(|e| ConfigError::Write {
        path: new.clone(),
        source: std::io::Error::other(e),
    })?;
    write_file(&new, &body)?;
    let backup = old.with_file_name("config.json.bak");
    std::fs::rename(&old, &backup).map_err(|source| ConfigError::Write { path: backup, source })
}

fn write_file(path: &Path, text: &str) -> Result<(), ConfigError> {
    let err = |source: std::io::Error| ConfigError::Write {
        path: path.to_owned(),
        source,
    };
    // Written beside and renamed, so a crash never leaves a half-written config behind; private, as
    // it holds API keys.
    crate::private_files::write_atomic(path, text.as_bytes()).map_err(err)
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"))
}

/// The reference compares resolved paths (absolute, symlinks followed) to spot the default file.
fn resolve(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::schema::{Capability, HookEvent, ProviderType};
    use pretty_assertions::assert_eq;
    use std::collections::BTreeSet;

    const TOML_CONFIG: &str = r#"
default_model = "k2"
default_thinking = true

[providers.moonshot]
type = "kimi"
base_url = "https://api.example/v1"
api_key = "sk-test"
custom_headers = { "X-Test" = "1" }

[models.k2]
provider = "moonshot"
model = "kimi-k2"
max_context_size = 262144
capabilities = ["image_in", "thinking"]

[loop_control]
max_steps_per_run = 50
compaction_trigger_ratio = 0.9

[[hooks]]
event = "PreToolUse"
command = "echo hi"
matcher = "Shell"

[mcp.client]
tool_call_timeout_ms = 1000
"#;

    fn issues(err: ConfigError) -> Vec<(String, String)> {
        match err {
            ConfigError::Invalid { issues, .. } => issues.into_iter().map(|i| (i.key, i.message)).collect(),
            other => panic!("expected a validation error, got {other}"),
        }
    }

    #[test]
    fn toml_file_loads_every_section() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, TOML_CONFIG).unwrap();
        let c = load_in(&ConfigSource::File(path.clone()), dir.path()).unwrap();
        assert_eq!(c.default_model, "k2");
        assert!(c.default_thinking);
        let p = &c.providers["moonshot"];
        assert_eq!(p.kind, ProviderType::Kimi);
        assert_eq!(p.api_key.expose(), "sk-test");
        assert_eq!(p.custom_headers.as_ref().unwrap()["X-Test"], "1");
        let m = &c.models["k2"];
        assert_eq!(m.max_context_size, 262_144);
        assert_eq!(
            m.capabilities,
            Some(BTreeSet::from([Capability::ImageIn, Capability::Thinking]))
        );
        // The old name of the field is still read.
        assert_eq!(c.loop_control.max_steps_per_turn, 50);
        assert_eq!(c.loop_control.max_retries_per_step, 3);
        assert_eq!(c.hooks.len(), 1);
        assert_eq!(c.hooks[0].event, HookEvent::PreToolUse);
        assert_eq!(c.hooks[0].timeout, 30);
        assert_eq!(c.mcp.client.tool_call_timeout_ms, 1000);
        assert_eq!(c.source_file.as_deref(), Some(path.as_path()));
        assert!(!c.is_from_default_location);
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn json_file_is_parsed_as_json_whatever_the_case_of_its_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.JSON");
        std::fs::write(
            &path,
            r#"{"providers":{"e":{"type":"_scripted_echo","base_url":"","api_key":""}},
                "models":{"s":{"provider":"e","model":"scripted","max_context_size":100000}},
                "default_model":"s","default_yolo":true}"#,
        )
        .unwrap();
        let c = load_in(&ConfigSource::File(path), dir.path()).unwrap();
        assert_eq!(c.providers["e"].kind, ProviderType::ScriptedEcho);
        assert!(c.default_yolo);
    }

    #[test]
    fn toml_text_in_a_json_named_file_is_a_json_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, "default_model = \"\"\n").unwrap();
        let err = load_in(&ConfigSource::File(path.clone()), dir.path()).unwrap_err();
        assert!(matches!(err, ConfigError::Json { .. }));
        let msg = err.to_string();
        assert!(msg.starts_with("Invalid JSON in configuration file "), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
    }

    #[test]
    fn broken_toml_is_an_error_naming_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "a = [\n").unwrap();
        let err = load_in(&ConfigSource::Default, dir.path()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("Invalid TOML in configuration file "), "{msg}");
        assert!(msg.contains("config.toml") && msg.contains("line 1"), "{msg}");
    }

    #[test]
    fn inline_text_is_json_first_then_toml() {
        let c = from_text(r#" {"default_thinking": true} "#).unwrap();
        assert!(c.default_thinking);
        assert_eq!(c.source_file, None);
        let c = from_text("default_plan_mode = true\n[loop_control]\nmax_retries_per_step = 9").unwrap();
        assert!(c.default_plan_mode);
        assert_eq!(c.loop_control.max_retries_per_step, 9);
        let c = load_in(
            &ConfigSource::Inline("theme = \"light\"".into()),
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(c.theme, crate::config::schema::Theme::Light);
    }

    #[test]
    fn inline_text_that_is_neither_reports_both_errors() {
        assert!(matches!(from_text("   "), Err(ConfigError::EmptyText)));
        assert_eq!(
            from_text("").unwrap_err().to_string(),
            "Configuration text cannot be empty"
        );
        let err = from_text("x=").unwrap_err();
        assert!(matches!(err, ConfigError::TextSyntax { .. }));
        assert!(
            err.to_string().starts_with("Invalid configuration text: "),
            "{err}"
        );
    }

    #[test]
    fn missing_default_file_is_created_with_the_defaults_and_reads_back_equal() {
        let dir = tempfile::tempdir().unwrap();
        let share = dir.path().join("share");
        let c = load_in(&ConfigSource::Default, &share).unwrap();
        assert!(c.is_from_default_location);
        let path = share.join("config.toml");
        assert_eq!(c.source_file.as_deref(), Some(path.as_path()));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("[loop_control]\nmax_steps_per_turn = 1000"),
            "{text}"
        );
        assert!(
            text.contains("[mcp.client]\ntool_call_timeout_ms = 60000"),
            "{text}"
        );
        let again = load_in(&ConfigSource::Default, &share).unwrap();
        assert_eq!(again, c);
        let mut bare = again;
        bare.source_file = None;
        bare.is_from_default_location = false;
        assert_eq!(bare, Config::default());
    }

    #[test]
    fn the_share_dirs_config_readable_by_others_is_tightened_when_loaded() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        let (default, elsewhere) = (dir.path().join("config.toml"), dir.path().join("mine.toml"));
        for path in [&default, &elsewhere] {
            std::fs::write(path, "default_thinking = true").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        load_in(&ConfigSource::Default, dir.path()).unwrap();
        load_in(&ConfigSource::File(elsewhere.clone()), dir.path()).unwrap();
        // A `--config-file` of the user's own elsewhere keeps its mode.
        assert_eq!((mode(&default), mode(&elsewhere)), (0o600, 0o644));
    }

    #[test]
    fn missing_explicit_file_is_created_in_its_own_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new.json");
        let c = load_in(&ConfigSource::File(path.clone()), dir.path()).unwrap();
        assert!(!c.is_from_default_location);
        let text = std::fs::read_to_string(&path).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["loop_control"]["max_steps_per_turn"], 1000);
        assert_eq!(load_in(&ConfigSource::File(path), dir.path()).unwrap(), c);
    }

    #[test]
    fn explicit_file_at_the_default_path_counts_as_default() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "").unwrap();
        let c = load_in(&ConfigSource::File(dir.path().join("config.toml")), dir.path()).unwrap();
        assert!(c.is_from_default_location);
    }

    #[test]
    fn legacy_json_is_migrated_once_and_backed_up() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), r#"{"default_editor":"vim"}"#).unwrap();
        let c = load_in(&ConfigSource::Default, dir.path()).unwrap();
        assert_eq!(c.default_editor, "vim");
        assert!(!dir.path().join("config.json").exists());
        assert!(dir.path().join("config.json.bak").exists());
        let toml_text = std::fs::read_to_string(dir.path().join("config.toml")).unwrap();
        assert!(toml_text.contains("default_editor = \"vim\""), "{toml_text}");
    }

    #[test]
    fn unknown_keys_are_ignored_with_a_warning() {
        let c = from_text(r#"{"foo": 1, "loop_control": {"max_step_per_turn": 5}}"#).unwrap();
        assert_eq!(c.loop_control.max_steps_per_turn, 1000);
        assert_eq!(
            c.warnings,
            [
                "unknown key ignored: foo",
                "unknown key ignored: loop_control.max_step_per_turn"
            ]
        );
    }

    #[test]
    fn type_errors_name_the_key() {
        let err = from_text(r#"{"loop_control": {"max_retries_per_step": "many"}}"#).unwrap_err();
        let found = issues(err);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "loop_control.max_retries_per_step");

        let err = from_text(r#"{"providers": {"p": {"type": "bogus", "base_url": "", "api_key": ""}}}"#)
            .unwrap_err();
        let found = issues(err);
        assert_eq!(found[0].0, "providers.p.type");
        assert!(found[0].1.contains("unknown variant `bogus`"), "{found:?}");

        let err = from_text(
            "[providers.p]\ntype = \"kimi\"\nbase_url = \"\"\napi_key = \"\"\n\
             [models.m]\nprovider = \"p\"\nmodel = \"x\"\n",
        )
        .unwrap_err();
        let found = issues(err);
        assert_eq!(found[0].0, "models.m");
        assert!(
            found[0].1.contains("missing field `max_context_size`"),
            "{found:?}"
        );

        let err = from_text("[models.m]\nprovider = 1");
        assert_eq!(
            issues(err.unwrap_err()),
            [(
                "models.m.provider".to_owned(),
                "invalid type: integer `1`, expected a string".to_owned()
            )]
        );

        let err = from_text(r#"{"hooks": [{"event": "Stop", "command": "x", "timeout": "1"}]}"#).unwrap_err();
        assert!(issues(err)[0].0.starts_with("hooks"));

        let err = from_text(
            r#"{"models": {"m": {"provider": "p", "model": "x",
            "max_context_size": 1, "capabilities": ["telepathy"]}}}"#,
        )
        .unwrap_err();
        assert!(issues(err)[0].1.contains("unknown variant `telepathy`"));

        let err = from_text("[1, 2]").unwrap_err();
        assert_eq!(issues(err)[0].0, "(top level)");
    }

    #[test]
    fn range_and_reference_errors_name_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            "default_model = \"x\"\n[loop_control]\nmax_steps_per_turn = 0\n\
             [[hooks]]\nevent = \"Stop\"\ncommand = \"true\"\ntimeout = 0\n",
        )
        .unwrap();
        let err = load_in(&ConfigSource::File(path.clone()), dir.path()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "Invalid configuration file {}: 3 problems",
                path.display()
            )),
            "{msg}"
        );
        assert_eq!(
            issues(err),
            [
                (
                    "loop_control.max_steps_per_turn".to_owned(),
                    "must be greater than or equal to 1 (got 0)".to_owned()
                ),
                (
                    "hooks[0].timeout".to_owned(),
                    "must be greater than or equal to 1 (got 0)".to_owned()
                ),
                (
                    "default_model".to_owned(),
                    "Default model x not found in models".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn a_model_naming_a_missing_provider_is_an_error() {
        let err =
            from_text(r#"{"models":{"m":{"provider":"q","model":"x","max_context_size":1}}}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid configuration text: models.m.provider: Provider q not found in providers"
        );
    }

    #[test]
    fn unreadable_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, [0xff, 0xfe, 0x00]).unwrap();
        let err = load_in(&ConfigSource::File(path), dir.path()).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    }

    #[test]
    fn a_full_config_survives_a_toml_round_trip() {
        let c = from_text(TOML_CONFIG).unwrap();
        let text = toml::to_string(&c).unwrap();
        assert_eq!(from_text(&text).unwrap(), c);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(from_text(&json).unwrap(), c);
    }

    #[test]
    fn default_file_text_round_trips_in_both_formats() {
        for json in [false, true] {
            let path = if json {
                Path::new("c.json")
            } else {
                Path::new("c.toml")
            };
            let c = parse_file_text(path, &default_file_text(json).unwrap()).unwrap();
            assert_eq!(c, Config::default());
        }
    }
}
