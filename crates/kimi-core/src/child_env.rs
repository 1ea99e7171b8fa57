//! The environment of the commands the agent starts: Shell commands, background tasks and hooks.
//!
//! The model decides what those commands are, so by default they do not see the agent's keys and
//! tokens: the agent's environment less every variable whose name contains `KEY`, `SECRET` or `TOKEN`
//! (any letter case) and less the model providers' own variables (`KIMI_API_KEY`, `KIMI_BASE_URL`,
//! `KIMI_MODEL_*`, `OPENAI_*`, `GOOGLE_APPLICATION_CREDENTIALS`, and what a provider's `env` table names), as codex's
//! `shell_environment_policy` does. `[shell_env]` changes it ([`ShellEnvConfig`]). MCP servers are
//! not started through here: they get the `env` their configuration gives them.
//!
//! The environment is computed once, when the session starts ([`install`]), and every child is built
//! from it ([`apply`]), so there is one place that decides.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::sync::OnceLock;

use crate::config::{Config, ShellEnvConfig, ShellEnvInherit};

/// Parts of names that mark a secret under the default policy.
const SECRET_PARTS: [&str; 3] = ["KEY", "SECRET", "TOKEN"];

/// The providers' variables that hold no "KEY"/"TOKEN" yet configure the model (`config/model.rs`).
const PROVIDER_VARS: [&str; 5] = [
    "KIMI_BASE_URL",
    "KIMI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    // Names the Vertex AI service-account key file (`kimi-llm`'s google provider): a command that
    // knows where the key is can read it.
    "GOOGLE_APPLICATION_CREDENTIALS",
];
/// Prefix of the model overrides read from the environment.
const PROVIDER_PREFIX: &str = "KIMI_MODEL_";

/// The environment children get, computed once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChildEnv {
    vars: BTreeMap<OsString, OsString>,
}

impl ChildEnv {
    /// The environment `policy` gives, starting from `process` (the agent's own variables). `provider_vars`
    /// are further names the filtered policy leaves out (a provider's `env` table).
    pub fn new(
        policy: &ShellEnvConfig,
        process: impl IntoIterator<Item = (OsString, OsString)>,
        provider_vars: &[String],
    ) -> Self {
        let mut vars: BTreeMap<OsString, OsString> = match policy.inherit {
            ShellEnvInherit::None => BTreeMap::new(),
            ShellEnvInherit::All => process.into_iter().collect(),
            ShellEnvInherit::Filtered => process
                .into_iter()
                .filter(|(name, _)| !is_secret_name(name) && !is_provider_var(name, provider_vars))
                .collect(),
        };
        vars.retain(|name, _| !policy.exclude.iter().any(|p| name_matches(p, name)));
        if !policy.include_only.is_empty() {
            vars.retain(|name, _| policy.include_only.iter().any(|p| name_matches(p, name)));
        }
        for (name, value) in &policy.set {
            vars.insert(name.into(), value.into());
        }
        Self { vars }
    }

    /// The policy of `config` over this process's environment.
    pub fn from_config(config: &Config) -> Self {
        let provider_vars: Vec<String> = config
            .providers
            .values()
            .filter_map(|p| p.env.as_ref())
            .flat_map(|env| env.keys().cloned())
            .collect();
        Self::new(&config.shell_env, std::env::vars_os(), &provider_vars)
    }

    /// The value of `name`, if children get it.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars.get(OsStr::new(name)).map(OsString::as_os_str)
    }

    /// The variables, in name order.
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// Replaces `command`'s environment with this one.
    pub fn apply_to(&self, command: &mut tokio::process::Command) {
        command.env_clear().envs(&self.vars);
    }
}

/// The environment installed for this process.
static INSTALLED: OnceLock<ChildEnv> = OnceLock::new();

/// Sets the environment every child gets from now on; once per process (a second call is ignored,
/// with a warning). Before it, children get the default policy over the process environment.
pub fn install(env: ChildEnv) {
    if INSTALLED.set(env).is_err() {
        tracing::warn!("children's environment installed twice; the first is kept");
    }
}

/// The environment children get.
pub fn current() -> &'static ChildEnv {
    INSTALLED.get_or_init(|| ChildEnv::new(&ShellEnvConfig::default(), std::env::vars_os(), &[]))
}

/// Gives `command` the environment children get. Call it before setting the command's own
/// variables: it clears whatever was set before.
pub fn apply(command: &mut tokio::process::Command) {
    current().apply_to(command);
}

fn is_secret_name(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_ascii_uppercase();
    SECRET_PARTS.iter().any(|part| upper.contains(part))
}

fn is_provider_var(name: &OsStr, extra: &[String]) -> bool {
    let name = name.to_string_lossy();
    PROVIDER_VARS.contains(&name.as_ref())
        || name.starts_with(PROVIDER_PREFIX)
        || name.starts_with("OPENAI_")
        || extra.iter().any(|e| *e == name)
}

/// Shell-style match of `pattern` (`*` any run, `?` one character) against `name`, ignoring case.
fn name_matches(pattern: &str, name: &OsStr) -> bool {
    let pattern: Vec<char> = pattern.to_ascii_uppercase().chars().collect();
    let name: Vec<char> = name.to_string_lossy().to_ascii_uppercase().chars().collect();
    // Iterative wildcard matching with one backtrack point (the last `*`).
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(c) if *c == '?' || *c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn process() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/bin"),
            ("HOME", "/home/u"),
            ("GITHUB_TOKEN", "ghp"),
            ("aws_secret_access_key", "s"),
            ("MY_API_KEY", "k"),
            ("KIMI_API_KEY", "k"),
            ("KIMI_BASE_URL", "https://x"),
            ("KIMI_MODEL_NAME", "m"),
            ("OPENAI_BASE_URL", "https://y"),
            ("VERTEX_PROJECT", "p"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn names(env: &ChildEnv) -> Vec<String> {
        env.vars
            .keys()
            .map(|k| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn by_default_keys_tokens_and_provider_variables_stay_out() {
        let env = ChildEnv::new(&ShellEnvConfig::default(), process(), &["VERTEX_PROJECT".into()]);
        assert_eq!(names(&env), ["HOME", "LANG", "PATH"]);
    }

    #[test]
    fn inherit_all_none_exclude_include_only_and_set() {
        let all = ShellEnvConfig {
            inherit: ShellEnvInherit::All,
            ..ShellEnvConfig::default()
        };
        assert_eq!(ChildEnv::new(&all, process(), &[]).vars.len(), process().len());

        let policy = ShellEnvConfig {
            inherit: ShellEnvInherit::Filtered,
            exclude: vec!["la*".into()],
            include_only: vec!["p?TH".into(), "HOME".into(), "LANG".into()],
            set: [
                ("CI".to_owned(), "1".to_owned()),
                ("HOME".to_owned(), "/tmp".to_owned()),
            ]
            .into(),
        };
        let env = ChildEnv::new(&policy, process(), &[]);
        assert_eq!(names(&env), ["CI", "HOME", "PATH"]);
        assert_eq!(env.get("HOME"), Some(OsStr::new("/tmp")));

        let none = ShellEnvConfig {
            inherit: ShellEnvInherit::None,
            set: [("PATH".to_owned(), "/usr/bin".to_owned())].into(),
            ..ShellEnvConfig::default()
        };
        assert_eq!(names(&ChildEnv::new(&none, process(), &[])), ["PATH"]);
    }

    #[test]
    fn patterns_are_shell_style_and_ignore_case() {
        for (pattern, name, expected) in [
            ("*", "ANY", true),
            ("AWS_*", "aws_region", true),
            ("*_TOKEN", "GH_TOKEN", true),
            ("*_TOKEN", "GH_TOKENS", false),
            ("?", "AB", false),
            ("A*B*C", "AXXBYYC", true),
            ("A*B*C", "AXXBYY", false),
            ("", "", true),
        ] {
            assert_eq!(
                name_matches(pattern, OsStr::new(name)),
                expected,
                "{pattern} vs {name}"
            );
        }
    }
}
