//! Scheduled prompts: a session's cron jobs, which put a prompt back into the conversation at set times
//! (seeds/002 CronCreate / CronList / CronDelete). Beyond the reference 1.49, which has none.
//!
//! Layout:
//! - [`expr`]: five-field cron expressions and their next match in a time zone.
//! - [`human`]: the schedule in words (`every 5 minutes`).
//! - [`jitter`]: deterministic per-job offsets that spread fires away from round minutes.
//! - [`job`]: one job, when it is due, and how missed fires coalesce into one.
//! - [`store`]: the session's jobs ([`CronStore`]), their limits and `cron.json`.
//! - [`clock`]: where the time comes from ([`Clock`]); tests move a manual or file clock.
//! - [`scheduler`]: the task that fires due jobs as turns ([`CronScheduler`]).
//!
//! The expression parser is our own (about 150 lines with its tests) rather than a crate: the common
//! crates use a seconds field or Quartz syntax, or do not follow wall-clock time across daylight-saving
//! changes the way a user of a five-field crontab expects; the Vixie rules we need are small.

pub mod clock;
pub mod expr;
pub mod human;
pub mod jitter;
pub mod job;
pub mod scheduler;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use scheduler::CronScheduler;
pub use store::{CronStore, JobView, NotFound};

/// Setting this to `1` (or `true`, `yes`, `on`) turns scheduled prompts off: no cron tools, no firing.
pub const DISABLE_ENV: &str = "KIMI_DISABLE_CRON";

/// Whether the environment turns scheduled prompts off.
pub fn is_disabled(env: &crate::config::Env) -> bool {
    env.get(DISABLE_ENV).is_some_and(|value| {
        matches!(
            value.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabling() {
        let cases: &[(Option<&str>, bool)] = &[
            (None, false),
            (Some(""), false),
            (Some("0"), false),
            (Some("false"), false),
            (Some("1"), true),
            (Some("true"), true),
            (Some(" YES "), true),
            (Some("on"), true),
        ];
        for (value, disabled) in cases {
            let mut env = crate::config::Env::new();
            if let Some(value) = value {
                env.insert(DISABLE_ENV.into(), (*value).into());
            }
            assert_eq!(is_disabled(&env), *disabled, "{value:?}");
        }
    }
}
