//! Where the scheduler gets the time from, so tests can move it instead of waiting for it.
//!
//! - [`SystemClock`]: the wall clock.
//! - [`ManualClock`]: set by the test that owns it (unit tests).
//! - [`FileClock`]: read from a file that a black-box test rewrites; selected by the test-only
//!   environment variable [`TEST_CLOCK_ENV`]. It is not meant for users and may change at any time.

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use tokio::sync::watch;

/// Test-only: a file holding an RFC 3339 time that replaces the wall clock for scheduled prompts.
pub const TEST_CLOCK_ENV: &str = "KIMI_CRON_TEST_CLOCK";

/// The longest the system clock sleeps before looking at the time again. Tokio's timers follow the
/// monotonic clock, which stands still while a laptop sleeps; waking now and then notices the wall
/// clock having moved on (and fires what was missed) within this bound.
const SYSTEM_RECHECK: Duration = Duration::from_secs(30);

/// How often a [`FileClock`] reads its file while something waits on it.
const FILE_POLL: Duration = Duration::from_millis(20);

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    /// Now.
    fn now(&self) -> DateTime<Utc>;

    /// Resolves no later than (about) when `now() >= deadline`; it may resolve earlier, so callers look at
    /// the time again.
    fn sleep_until(&self, deadline: DateTime<Utc>) -> BoxFuture<'static, ()>;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let wait = (deadline - Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO)
            .min(SYSTEM_RECHECK);
        Box::pin(tokio::time::sleep(wait))
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock(watch::Sender<DateTime<Utc>>);

impl ManualClock {
    /// A clock showing `now`.
    pub fn new(now: DateTime<Utc>) -> Self {
        Self(watch::Sender::new(now))
    }

    /// Sets the time (backwards too).
    pub fn set(&self, now: DateTime<Utc>) {
        self.0.send_replace(now);
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: chrono::Duration) {
        self.0.send_modify(|now| *now += by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.borrow()
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let mut rx = self.0.subscribe();
        Box::pin(async move {
            // The sender lives in the clock; if it is gone nobody can move the time, so wait forever.
            if rx.wait_for(|now| *now >= deadline).await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}

/// Test-only: the time written in a file (RFC 3339), read on every look. Until the file holds a valid
/// time the wall clock is used; after that, an unreadable file keeps the last time read.
#[derive(Debug)]
pub struct FileClock {
    path: PathBuf,
    last: Mutex<Option<DateTime<Utc>>>,
}

impl FileClock {
    /// A clock reading `path`.
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            last: Mutex::new(None),
        }
    }

    fn read(path: &std::path::Path) -> Option<DateTime<Utc>> {
        let text = std::fs::read_to_string(path).ok()?;
        DateTime::parse_from_rfc3339(text.trim())
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}

impl Clock for FileClock {
    fn now(&self) -> DateTime<Utc> {
        let mut last = crate::sync::lock(&self.last);
        if let Some(now) = Self::read(&self.path) {
            *last = Some(now);
        }
        last.unwrap_or_else(Utc::now)
    }

    fn sleep_until(&self, deadline: DateTime<Utc>) -> BoxFuture<'static, ()> {
        let path = self.path.clone();
        Box::pin(async move {
            loop {
                if Self::read(&path).is_some_and(|now| now >= deadline) {
                    return;
                }
                tokio::time::sleep(FILE_POLL).await;
            }
        })
    }
}

/// The clock for this process: a [`FileClock`] when [`TEST_CLOCK_ENV`] names a file, else the wall clock.
pub fn from_env(env: &crate::config::Env) -> std::sync::Arc<dyn Clock> {
    match env.get(TEST_CLOCK_ENV).filter(|path| !path.is_empty()) {
        Some(path) => {
            tracing::warn!(path, "scheduled prompts use a test clock ({TEST_CLOCK_ENV})");
            std::sync::Arc::new(FileClock::new(PathBuf::from(path)))
        }
        None => std::sync::Arc::new(SystemClock),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[tokio::test]
    async fn manual_sleep_ends_when_the_time_is_reached() {
        let clock = ManualClock::new(at("2025-01-06T09:00:00Z"));
        let sleeping = tokio::spawn(clock.sleep_until(at("2025-01-06T09:05:00Z")));
        clock.advance(chrono::Duration::minutes(4));
        tokio::task::yield_now().await;
        assert!(!sleeping.is_finished());
        clock.advance(chrono::Duration::minutes(1));
        tokio::time::timeout(Duration::from_secs(5), sleeping)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(clock.now(), at("2025-01-06T09:05:00Z"));
    }

    #[tokio::test]
    async fn file_clock_follows_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("now");
        let clock = FileClock::new(path.clone());
        std::fs::write(&path, "2025-01-06T09:00:00Z\n").unwrap();
        assert_eq!(clock.now(), at("2025-01-06T09:00:00Z"));
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(
            clock.now(),
            at("2025-01-06T09:00:00Z"),
            "keeps the last good time"
        );
        let sleeping = tokio::spawn(clock.sleep_until(at("2025-01-06T10:00:00+01:00")));
        std::fs::write(&path, "2025-01-06T09:00:00Z").unwrap();
        tokio::time::timeout(Duration::from_secs(5), sleeping)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn the_environment_picks_the_clock() {
        let mut env = crate::config::Env::new();
        assert!(format!("{:?}", from_env(&env)).contains("SystemClock"));
        env.insert(TEST_CLOCK_ENV.into(), "/nowhere".into());
        assert!(format!("{:?}", from_env(&env)).contains("FileClock"));
    }
}
