//! The session's scheduled prompts: created and deleted by the cron tools, fired by the scheduler, kept in
//! `cron.json` in the session directory.
//!
//! Jobs live in their own file rather than in `state.json`: the reference rewrites `state.json` with only
//! the fields it knows, so jobs kept there would vanish the first time the reference resumed the session.
//! Wall-clock matching uses the machine's local time zone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Local, Utc};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::sync::lock;

use super::clock::Clock;
use super::expr::{CronExpr, CronParseError};
use super::human;
use super::job::{CronRecord, Fire, Job, JobId};

/// The file, in the session directory.
pub const CRON_FILE: &str = "cron.json";
/// Active jobs per session.
pub const MAX_JOBS: usize = 50;
/// The longest prompt, in UTF-8 bytes.
pub const MAX_PROMPT_BYTES: usize = 8 * 1024;
/// A schedule must fire within this long.
const FIRST_FIRE_WITHIN: Duration = Duration::days(5 * 365 + 1);
/// A one-shot job further away than this was most likely meant for a date that already passed this year.
const ONE_SHOT_WITHIN: Duration = Duration::days(350);

/// Why a job was not created; the text is what the model reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CreateError {
    /// The expression does not parse.
    #[error("Invalid cron expression `{cron}`: {error}")]
    Invalid {
        /// As given.
        cron: String,
        /// Why.
        error: CronParseError,
    },
    /// It parses but never fires in the next five years.
    #[error("Cron expression `{0}` does not fire within the next 5 years.")]
    NeverFires(String),
    /// A one-shot job would first fire more than 350 days from now.
    #[error(
        "A one-shot job for `{cron}` would first fire at {at}, more than 350 days from now; the day or month has probably passed already this year."
    )]
    TooFar {
        /// As given.
        cron: String,
        /// The first fire, local time.
        at: String,
    },
    /// Nothing to inject.
    #[error("The prompt is empty.")]
    EmptyPrompt,
    /// The prompt is over the limit.
    #[error("The prompt is {0} bytes long; the limit is 8192 bytes (UTF-8).")]
    PromptTooLong(usize),
    /// The session holds the maximum already.
    #[error(
        "This session already has 50 scheduled jobs, the maximum. Delete one with CronDelete before creating another."
    )]
    TooMany,
}

/// A job was not found (never existed, deleted, or a one-shot that already fired).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("No cron job with id {0}")]
pub struct NotFound(pub String);

/// What [`CronStore::create`] reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// The new job's id.
    pub id: JobId,
    /// The schedule in words.
    pub human_schedule: String,
    /// Recurring or one-shot.
    pub recurring: bool,
    /// When it fires first (jitter applied), local time.
    pub next_fire_at: DateTime<Local>,
}

/// One job as [`CronStore::list`] shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    /// The job's id.
    pub id: JobId,
    /// The expression.
    pub cron: String,
    /// The schedule in words.
    pub human_schedule: String,
    /// The prompt, whole.
    pub prompt: String,
    /// When it fires next (jitter applied), local time; may be in the past while it waits for a turn.
    pub next_fire_at: Option<DateTime<Local>>,
    /// Recurring or one-shot.
    pub recurring: bool,
    /// Whole days since it was created.
    pub age_days: i64,
    /// Its next fire is its last (a recurring job older than 7 days).
    pub stale: bool,
}

/// `cron.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CronFile {
    #[serde(default = "one")]
    version: u32,
    #[serde(default)]
    jobs: Vec<CronRecord>,
}

fn one() -> u32 {
    1
}

/// The jobs of one session.
#[derive(Debug)]
pub struct CronStore {
    /// In creation order. A std mutex: never held across an await.
    jobs: Mutex<Vec<Job>>,
    /// `None`: not persisted (tests).
    file: Option<PathBuf>,
    clock: Arc<dyn Clock>,
    /// Wakes the scheduler when jobs change.
    changed: Notify,
    /// Orders file writes, so the last write always holds the latest jobs.
    writes: tokio::sync::Mutex<()>,
}

impl CronStore {
    /// An empty store that is not persisted.
    pub fn in_memory(clock: Arc<dyn Clock>) -> Self {
        Self::with_jobs(Vec::new(), None, clock)
    }

    /// The jobs saved in `session_dir` (none when the file is missing; unreadable entries are dropped
    /// with a warning).
    pub fn load(session_dir: &Path, clock: Arc<dyn Clock>) -> Self {
        let path = session_dir.join(CRON_FILE);
        let file: CronFile = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "cron.json unreadable; no jobs restored");
                CronFile::default()
            }),
            Err(_) => CronFile::default(),
        };
        let jobs = file
            .jobs
            .into_iter()
            .filter_map(|record| {
                let id = record.id.clone();
                Job::new(record)
                    .inspect_err(|e| tracing::warn!(job = %id, error = %e, "stored cron job dropped"))
                    .ok()
            })
            .take(MAX_JOBS)
            .collect();
        Self::with_jobs(jobs, Some(path), clock)
    }

    fn with_jobs(jobs: Vec<Job>, file: Option<PathBuf>, clock: Arc<dyn Clock>) -> Self {
        Self {
            jobs: Mutex::new(jobs),
            file,
            clock,
            changed: Notify::new(),
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// The file jobs are saved in (`None` for an in-memory store).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The clock jobs are timed by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Validates and adds a job, and saves.
    pub async fn create(&self, cron: &str, prompt: &str, recurring: bool) -> Result<Created, CreateError> {
        let expr: CronExpr = cron.parse().map_err(|error| CreateError::Invalid {
            cron: cron.to_owned(),
            error,
        })?;
        if prompt.trim().is_empty() {
            return Err(CreateError::EmptyPrompt);
        }
        if prompt.len() > MAX_PROMPT_BYTES {
            return Err(CreateError::PromptTooLong(prompt.len()));
        }
        let now = self.clock.now();
        let created = {
            let mut jobs = lock(&self.jobs);
            if jobs.len() >= MAX_JOBS {
                return Err(CreateError::TooMany);
            }
            let mut id = JobId::random();
            while jobs.iter().any(|job| *job.id() == id) {
                id = JobId::random();
            }
            let job = Job::new(CronRecord {
                id: id.clone(),
                cron: expr.source().to_owned(),
                prompt: prompt.to_owned(),
                recurring,
                created_at: now,
                last_fired_at: None,
            })
            .map_err(|error| CreateError::Invalid {
                cron: cron.to_owned(),
                error,
            })?;
            let slot = job
                .next_slot(&Local)
                .filter(|slot| slot.ideal - now <= FIRST_FIRE_WITHIN)
                .ok_or_else(|| CreateError::NeverFires(expr.source().to_owned()))?;
            let next_fire_at = slot.fire_at.with_timezone(&Local);
            if !recurring && slot.ideal - now > ONE_SHOT_WITHIN {
                return Err(CreateError::TooFar {
                    cron: expr.source().to_owned(),
                    at: iso(&next_fire_at),
                });
            }
            jobs.push(job);
            Created {
                id,
                human_schedule: human::describe(&expr),
                recurring,
                next_fire_at,
            }
        };
        self.changed.notify_one();
        self.save().await;
        Ok(created)
    }

    /// Deletes a job, and saves.
    pub async fn delete(&self, id: &str) -> Result<(), NotFound> {
        let not_found = || NotFound(id.to_owned());
        let key = JobId::parse(id).ok_or_else(not_found)?;
        {
            let mut jobs = lock(&self.jobs);
            let index = jobs
                .iter()
                .position(|job| *job.id() == key)
                .ok_or_else(not_found)?;
            jobs.remove(index);
        }
        self.changed.notify_one();
        self.save().await;
        Ok(())
    }

    /// Every job, soonest fire first.
    pub fn list(&self) -> Vec<JobView> {
        let now = self.clock.now();
        let mut views: Vec<JobView> = lock(&self.jobs)
            .iter()
            .map(|job| {
                let record = job.record();
                JobView {
                    id: record.id.clone(),
                    cron: record.cron.clone(),
                    human_schedule: human::describe(job.expr()),
                    prompt: record.prompt.clone(),
                    next_fire_at: job
                        .next_slot(&Local)
                        .map(|slot| slot.fire_at.with_timezone(&Local)),
                    recurring: record.recurring,
                    age_days: job.age(now).num_days().max(0),
                    stale: job.is_stale(now),
                }
            })
            .collect();
        // Jobs that will never fire again go last.
        views.sort_by_key(|view| (view.next_fire_at.is_none(), view.next_fire_at));
        views
    }

    /// How many jobs there are.
    pub fn len(&self) -> usize {
        lock(&self.jobs).len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The earliest time any job fires.
    pub(crate) fn next_fire_at(&self) -> Option<DateTime<Utc>> {
        lock(&self.jobs)
            .iter()
            .filter_map(|job| job.next_slot(&Local))
            .map(|slot| slot.fire_at)
            .min()
    }

    /// Takes the earliest fire that is due at `now` and records it (a one-shot or stale job is removed).
    /// The caller saves.
    pub(crate) fn take_due(&self, now: DateTime<Utc>) -> Option<Fire> {
        let mut jobs = lock(&self.jobs);
        let (index, fire) = jobs
            .iter()
            .enumerate()
            .filter_map(|(i, job)| Some((i, job.next_slot(&Local)?.fire_at, job.due(now, &Local)?)))
            .min_by_key(|(_, fire_at, _)| *fire_at)
            .map(|(i, _, fire)| (i, fire))?;
        if fire.is_last {
            jobs.remove(index);
        } else {
            jobs[index].fired(&fire);
        }
        Some(fire)
    }

    /// Resolves when jobs were created or deleted since the last call (a change before the first call
    /// counts).
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Writes `cron.json` (nothing for an in-memory store). Failures are logged: the jobs stay scheduled
    /// for this run.
    pub(crate) async fn save(&self) {
        let Some(path) = self.file.clone() else {
            return;
        };
        let _ordered = self.writes.lock().await;
        let file = CronFile {
            version: 1,
            jobs: lock(&self.jobs).iter().map(|job| job.record().clone()).collect(),
        };
        let result = tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec_pretty(&file).unwrap_or_default();
            crate::session::write_atomic(&path, &bytes)
        })
        .await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "cron.json not written"),
            Err(e) => tracing::error!(error = %e, "cron.json writer failed"),
        }
    }
}

/// A time as the tools show it: ISO 8601 with the local offset, to the second.
pub fn iso(at: &DateTime<Local>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::clock::ManualClock;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn store_at(now: &str) -> (Arc<ManualClock>, CronStore) {
        let clock = Arc::new(ManualClock::new(at(now)));
        let store = CronStore::in_memory(Arc::clone(&clock) as Arc<dyn Clock>);
        (clock, store)
    }

    // The expressions below only restrict minutes, so the results do not depend on the local zone as long
    // as its offset is whole minutes.

    #[tokio::test]
    async fn create_validates() {
        let (_clock, store) = store_at("2025-01-06T09:00:30Z");
        let long = "x".repeat(MAX_PROMPT_BYTES + 1);
        let cases: Vec<(&str, &str, bool, String)> = vec![
            (
                "* * *",
                "p",
                true,
                "Invalid cron expression `* * *`: expected 5 fields (minute hour day-of-month month day-of-week), found 3".into(),
            ),
            (
                "0 0 30 2 *",
                "p",
                true,
                "Cron expression `0 0 30 2 *` does not fire within the next 5 years.".into(),
            ),
            ("* * * * *", "  ", true, "The prompt is empty.".into()),
            (
                "* * * * *",
                &long,
                true,
                "The prompt is 8193 bytes long; the limit is 8192 bytes (UTF-8).".into(),
            ),
        ];
        for (cron, prompt, recurring, message) in cases {
            let error = store.create(cron, prompt, recurring).await.unwrap_err();
            assert_eq!(error.to_string(), message, "{cron}");
        }
        // Exactly 8 KB of multi-byte text is fine.
        let wide = "é".repeat(MAX_PROMPT_BYTES / 2);
        assert!(store.create("* * * * *", &wide, true).await.is_ok());
        assert!(store.create("* * * * *", &(wide + "x"), true).await.is_err());
    }

    #[tokio::test]
    async fn one_shots_far_away_are_refused() {
        // The local date 360 days ahead, whatever the zone.
        let (clock, store) = store_at("2025-01-06T12:00:00Z");
        let far = (clock.now() + Duration::days(360)).with_timezone(&Local);
        let cron = format!(
            "0 12 {} {} *",
            chrono::Datelike::day(&far),
            chrono::Datelike::month(&far)
        );
        let error = store.create(&cron, "p", false).await.unwrap_err();
        assert!(matches!(error, CreateError::TooFar { .. }), "{error}");
        assert!(error.to_string().contains("more than 350 days from now"));
        // Recurring jobs with the same expression are fine.
        assert!(store.create(&cron, "p", true).await.is_ok());
    }

    #[tokio::test]
    async fn at_most_fifty_jobs() {
        let (_clock, store) = store_at("2025-01-06T09:00:30Z");
        for i in 0..MAX_JOBS {
            store
                .create("*/5 * * * *", &format!("job {i}"), true)
                .await
                .unwrap();
        }
        let error = store.create("*/5 * * * *", "one more", true).await.unwrap_err();
        assert_eq!(error, CreateError::TooMany);
        let first = store.list()[0].id.clone();
        store.delete(first.as_str()).await.unwrap();
        assert!(store.create("*/5 * * * *", "one more", true).await.is_ok());
        assert_eq!(store.len(), MAX_JOBS);
    }

    #[tokio::test]
    async fn create_list_delete() {
        let (clock, store) = store_at("2025-01-06T09:00:30Z");
        let every_5 = store.create("*/5  * * * *", "poll", true).await.unwrap();
        assert_eq!(every_5.human_schedule, "every 5 minutes");
        assert!(every_5.recurring);
        let ideal = at("2025-01-06T09:05:00Z");
        let delay = every_5.next_fire_at.with_timezone(&Utc) - ideal;
        assert!(
            delay >= Duration::zero() && delay < Duration::seconds(30),
            "{delay}"
        );
        let once = store.create("2 * * * *", "once", false).await.unwrap();
        assert_eq!(once.next_fire_at.with_timezone(&Utc), at("2025-01-06T09:02:00Z"));

        clock.advance(Duration::days(2));
        let list = store.list();
        assert_eq!(
            list.iter().map(|v| v.id.clone()).collect::<Vec<_>>(),
            [once.id.clone(), every_5.id.clone()],
            "soonest first (both overdue; the one-shot is earlier)"
        );
        assert_eq!(list[1].cron, "*/5 * * * *", "whitespace collapsed");
        assert_eq!((list[1].age_days, list[1].stale), (2, false));

        assert_eq!(store.delete("nothere").await, Err(NotFound("nothere".into())));
        assert_eq!(
            store.delete("00000000").await.unwrap_err().to_string(),
            "No cron job with id 00000000"
        );
        store.delete(&once.id.as_str().to_uppercase()).await.unwrap();
        assert_eq!(store.len(), 1);
        clock.advance(Duration::days(5));
        assert!(store.list()[0].stale);
    }

    #[tokio::test]
    async fn take_due_fires_earliest_first_and_removes_finished_jobs() {
        let (clock, store) = store_at("2025-01-06T09:00:30Z");
        let every_5 = store.create("*/5 * * * *", "poll", true).await.unwrap();
        let once = store.create("2 * * * *", "once", false).await.unwrap();
        assert_eq!(store.take_due(clock.now()), None);
        assert_eq!(store.next_fire_at(), Some(at("2025-01-06T09:02:00Z")));

        clock.set(at("2025-01-06T09:11:00Z"));
        let first = store.take_due(clock.now()).unwrap();
        assert_eq!((first.id, first.coalesced, first.is_last), (once.id, 1, true));
        let second = store.take_due(clock.now()).unwrap();
        assert_eq!((second.id.clone(), second.coalesced), (every_5.id.clone(), 2));
        assert_eq!(store.take_due(clock.now()), None);
        assert_eq!(store.len(), 1, "the one-shot is gone");

        // Past seven days: one last, stale fire, then the job is gone.
        clock.set(at("2025-01-14T00:00:00Z"));
        let last = store.take_due(clock.now()).unwrap();
        assert!(last.stale && last.is_last);
        assert!(store.is_empty());
        assert_eq!(store.next_fire_at(), None);
    }

    #[tokio::test]
    async fn jobs_survive_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(at("2025-01-06T09:00:30Z")));
        let store = CronStore::load(dir.path(), Arc::clone(&clock));
        let created = store.create("*/5 * * * *", "poll", true).await.unwrap();
        store.create("2 * * * *", "once", false).await.unwrap();
        let fire = store.take_due(at("2025-01-06T09:03:00Z")).unwrap();
        assert!(fire.is_last);
        store.save().await;

        let again = CronStore::load(dir.path(), Arc::clone(&clock));
        assert_eq!(again.list(), store.list());
        assert_eq!(again.list()[0].id, created.id);

        // A damaged entry is dropped, the others kept.
        let path = dir.path().join(CRON_FILE);
        let mut file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut broken = file["jobs"][0].clone();
        broken["cron"] = "nonsense".into();
        broken["id"] = "00000000".into();
        file["jobs"].as_array_mut().unwrap().push(broken);
        std::fs::write(&path, file.to_string()).unwrap();
        assert_eq!(CronStore::load(dir.path(), Arc::clone(&clock)).len(), 1);
        std::fs::write(&path, "{").unwrap();
        assert!(CronStore::load(dir.path(), clock).is_empty());
    }
}
