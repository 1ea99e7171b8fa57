//! One scheduled prompt: its persisted record, when it fires next, and what a fire looks like.
//!
//! A job remembers the ideal (unjittered) time of its last fire. Its next ideal time is the expression's
//! next match after that (after its creation before the first fire), and it fires at that time moved by
//! its jitter. When the scheduler gets to a job late (the machine slept, a long turn held the slot), every
//! ideal time whose fire time has passed is counted, and the job fires once with that count.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use super::expr::CronExpr;
use super::jitter;

/// Recurring jobs fire for the last time (marked stale) once they are this old.
pub const STALE_AFTER: Duration = Duration::days(7);

/// At most this many missed ideal times are counted for one fire; the count saturates there.
const MAX_COALESCED: u32 = 100_000;

/// A job id: eight lower-case hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    /// `text` if it is eight hex digits (either case), lower-cased.
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 8 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Self(text.to_ascii_lowercase()))
    }

    /// A fresh random id.
    pub fn random() -> Self {
        let hex = uuid::Uuid::new_v4().simple().to_string();
        Self(hex[..8].to_owned())
    }

    /// The id as a number (its jitter seed).
    pub fn as_u32(&self) -> u32 {
        u32::from_str_radix(&self.0, 16).unwrap_or(0)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for JobId {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text).ok_or_else(|| format!("`{text}` is not an 8-digit hex job id"))
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> Self {
        id.0
    }
}

/// A job as `cron.json` stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CronRecord {
    /// The job's id.
    pub id: JobId,
    /// The five-field expression, as written.
    pub cron: String,
    /// The text injected when the job fires.
    pub prompt: String,
    /// Fires repeatedly (`true`) or once.
    pub recurring: bool,
    /// When the job was created.
    pub created_at: DateTime<Utc>,
    /// The ideal time of the last fire, `None` before the first.
    #[serde(default)]
    pub last_fired_at: Option<DateTime<Utc>>,
}

/// A record with its parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    record: CronRecord,
    expr: CronExpr,
}

/// One pending fire of a job: its ideal time and the time it actually fires at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The expression's match.
    pub ideal: DateTime<Utc>,
    /// `ideal` moved by the job's jitter.
    pub fire_at: DateTime<Utc>,
}

/// A job that is due: what to inject and how to update the job afterwards.
#[derive(Debug, Clone, PartialEq)]
pub struct Fire {
    /// The job.
    pub id: JobId,
    /// Its expression.
    pub cron: String,
    /// Its prompt.
    pub prompt: String,
    /// How many ideal times this one fire stands for (at least 1).
    pub coalesced: u32,
    /// The last ideal time counted.
    pub last_ideal: DateTime<Utc>,
    /// A recurring job past [`STALE_AFTER`]: this is its last fire.
    pub stale: bool,
    /// The job is deleted after this fire (one-shot, or stale).
    pub is_last: bool,
}

impl Fire {
    /// The user input of the turn this fire starts: the prompt in a `<cron-fire>` envelope that tells the
    /// model which job fired, how many scheduled times it stands for, and whether it was the last.
    pub fn envelope(&self) -> String {
        let stale = if self.stale { " stale=\"true\"" } else { "" };
        format!(
            "<cron-fire id=\"{}\" cron=\"{}\" coalescedCount=\"{}\"{stale}>\n{}\n</cron-fire>",
            self.id, self.cron, self.coalesced, self.prompt
        )
    }
}

impl Job {
    /// A job from its record; `Err` when the stored expression no longer parses.
    pub fn new(record: CronRecord) -> Result<Self, super::expr::CronParseError> {
        let expr = record.cron.parse()?;
        Ok(Self { record, expr })
    }

    /// The stored record.
    pub fn record(&self) -> &CronRecord {
        &self.record
    }

    /// The parsed expression.
    pub fn expr(&self) -> &CronExpr {
        &self.expr
    }

    /// The job's id.
    pub fn id(&self) -> &JobId {
        &self.record.id
    }

    /// How long the job has existed at `now`.
    pub fn age(&self, now: DateTime<Utc>) -> Duration {
        now - self.record.created_at
    }

    /// A recurring job old enough that its next fire is its last.
    pub fn is_stale(&self, now: DateTime<Utc>) -> bool {
        self.record.recurring && self.age(now) >= STALE_AFTER
    }

    /// The pending fire after the last one (or after creation), with wall-clock matching in `zone`.
    pub fn next_slot<Tz: TimeZone>(&self, zone: &Tz) -> Option<Slot> {
        let anchor = self.record.last_fired_at.unwrap_or(self.record.created_at);
        self.slot_after(&anchor.with_timezone(zone))
    }

    fn slot_after<Tz: TimeZone>(&self, after: &DateTime<Tz>) -> Option<Slot> {
        let ideal = self.expr.next_after(after)?;
        let fire_at = if self.record.recurring {
            let period = self
                .expr
                .next_after(&ideal)
                .map_or(Duration::zero(), |next| next - ideal.clone());
            ideal.clone() + jitter::recurring_delay(self.record.id.as_u32(), period)
        } else {
            // Early, but never before the job existed.
            (ideal.clone() - jitter::one_shot_advance(self.record.id.as_u32(), &ideal))
                .max(self.record.created_at.with_timezone(&ideal.timezone()))
        };
        Some(Slot {
            ideal: ideal.with_timezone(&Utc),
            fire_at: fire_at.with_timezone(&Utc),
        })
    }

    /// The fire due at `now`, counting every ideal time whose fire time has passed; `None` if nothing is.
    pub fn due<Tz: TimeZone>(&self, now: DateTime<Utc>, zone: &Tz) -> Option<Fire> {
        let first = self.next_slot(zone)?;
        if first.fire_at > now {
            return None;
        }
        let mut coalesced = 1u32;
        let mut last_ideal = first.ideal;
        if self.record.recurring {
            while coalesced < MAX_COALESCED {
                match self.slot_after(&last_ideal.with_timezone(zone)) {
                    Some(slot) if slot.fire_at <= now => {
                        coalesced += 1;
                        last_ideal = slot.ideal;
                    }
                    _ => break,
                }
            }
            if coalesced == MAX_COALESCED {
                // Do not fire the uncounted rest one by one: start afresh from now.
                last_ideal = last_ideal.max(now);
            }
        }
        let stale = self.is_stale(now);
        Some(Fire {
            id: self.record.id.clone(),
            cron: self.record.cron.clone(),
            prompt: self.record.prompt.clone(),
            coalesced,
            last_ideal,
            stale,
            is_last: stale || !self.record.recurring,
        })
    }

    /// Records that `fire` happened.
    pub fn fired(&mut self, fire: &Fire) {
        self.record.last_fired_at = Some(fire.last_ideal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;
    use pretty_assertions::assert_eq;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn job(id: &str, cron: &str, recurring: bool, created: &str) -> Job {
        Job::new(CronRecord {
            id: JobId::parse(id).unwrap(),
            cron: cron.into(),
            prompt: "check the build".into(),
            recurring,
            created_at: at(created),
            last_fired_at: None,
        })
        .unwrap()
    }

    #[test]
    fn job_ids() {
        assert_eq!(JobId::parse("DEADbeef").unwrap().as_str(), "deadbeef");
        assert_eq!(JobId::parse("deadbeef").unwrap().as_u32(), 0xdead_beef);
        for bad in ["", "deadbee", "deadbeef0", "deadbeeg", "dead-bee"] {
            assert_eq!(JobId::parse(bad), None, "{bad}");
        }
        let random = JobId::random();
        assert_eq!(JobId::parse(random.as_str()), Some(random));
        assert!(serde_json::from_str::<JobId>("\"xyz\"").is_err());
    }

    #[test]
    fn next_slots_with_jitter() {
        // (id, cron, recurring, created, ideal, fire_at)
        let cases: &[(&str, &str, bool, &str, &str, &str)] = &[
            // Recurring every 5 minutes, half of the 30 s maximum.
            (
                "80000000",
                "*/5 * * * *",
                true,
                "2025-01-06T09:01:00Z",
                "2025-01-06T09:05:00Z",
                "2025-01-06T09:05:15Z",
            ),
            // Daily at 09:00: half of the 15-minute cap.
            (
                "80000000",
                "0 9 * * *",
                true,
                "2025-01-06T08:00:00Z",
                "2025-01-06T09:00:00Z",
                "2025-01-06T09:07:30Z",
            ),
            // One-shot on :30 fires up to 90 s early.
            (
                "80000000",
                "30 9 6 1 *",
                false,
                "2025-01-06T08:00:00Z",
                "2025-01-06T09:30:00Z",
                "2025-01-06T09:29:15Z",
            ),
            // ... but never before it was created.
            (
                "ffffffff",
                "30 9 6 1 *",
                false,
                "2025-01-06T09:29:50Z",
                "2025-01-06T09:30:00Z",
                "2025-01-06T09:29:50Z",
            ),
            // One-shot off the round minutes: on time.
            (
                "ffffffff",
                "7 9 6 1 *",
                false,
                "2025-01-06T08:00:00Z",
                "2025-01-06T09:07:00Z",
                "2025-01-06T09:07:00Z",
            ),
        ];
        for (id, cron, recurring, created, ideal, fire_at) in cases {
            let slot = job(id, cron, *recurring, created).next_slot(&Utc).unwrap();
            assert_eq!(
                slot,
                Slot {
                    ideal: at(ideal),
                    fire_at: at(fire_at)
                },
                "{id} {cron}"
            );
        }
    }

    #[test]
    fn the_round_minute_rule_uses_local_time() {
        // 09:30 in UTC+05:30 is 04:00 UTC: it is :00 there too. 09:15 local is 03:45 UTC: not round.
        let zone = FixedOffset::east_opt(5 * 3600 + 1800).unwrap();
        let job = job("80000000", "15 9 6 1 *", false, "2025-01-05T00:00:00Z");
        let slot = job.next_slot(&zone).unwrap();
        assert_eq!(slot.ideal, at("2025-01-06T03:45:00Z"));
        assert_eq!(slot.fire_at, slot.ideal);
    }

    #[test]
    fn due_coalesces_missed_fires() {
        let every_5 = job("00000000", "*/5 * * * *", true, "2025-01-06T09:01:00Z");
        // (now, expected coalesced count and last ideal time, or not due)
        let cases: &[(&str, Option<(u32, &str)>)] = &[
            ("2025-01-06T09:04:59Z", None),
            ("2025-01-06T09:05:00Z", Some((1, "2025-01-06T09:05:00Z"))),
            ("2025-01-06T09:09:59Z", Some((1, "2025-01-06T09:05:00Z"))),
            ("2025-01-06T09:20:00Z", Some((4, "2025-01-06T09:20:00Z"))),
            // A night's sleep: 12 per hour.
            ("2025-01-06T19:03:00Z", Some((120, "2025-01-06T19:00:00Z"))),
        ];
        for (now, expected) in cases {
            let fire = every_5.due(at(now), &Utc);
            let got = fire.as_ref().map(|f| (f.coalesced, f.last_ideal));
            let want = expected.map(|(count, last)| (count, at(last)));
            assert_eq!(got, want, "at {now}");
            if let Some(fire) = fire {
                assert!(!fire.stale && !fire.is_last);
            }
        }
    }

    #[test]
    fn jitter_is_respected_when_counting() {
        // Half of a 30 s window: each 5-minute fire happens at :15 past its ideal time.
        let job = job("80000000", "*/5 * * * *", true, "2025-01-06T09:01:00Z");
        let fire = job.due(at("2025-01-06T09:10:14Z"), &Utc).unwrap();
        assert_eq!((fire.coalesced, fire.last_ideal), (1, at("2025-01-06T09:05:00Z")));
        let fire = job.due(at("2025-01-06T09:10:15Z"), &Utc).unwrap();
        assert_eq!((fire.coalesced, fire.last_ideal), (2, at("2025-01-06T09:10:00Z")));
    }

    #[test]
    fn firing_moves_the_job_on() {
        let mut job = job("00000000", "*/5 * * * *", true, "2025-01-06T09:01:00Z");
        let fire = job.due(at("2025-01-06T09:12:00Z"), &Utc).unwrap();
        job.fired(&fire);
        assert_eq!(job.record().last_fired_at, Some(at("2025-01-06T09:10:00Z")));
        assert_eq!(job.due(at("2025-01-06T09:14:59Z"), &Utc), None);
        assert_eq!(job.next_slot(&Utc).unwrap().ideal, at("2025-01-06T09:15:00Z"));
    }

    #[test]
    fn one_shots_fire_once_and_are_never_stale() {
        let once = job("00000000", "0 9 6 1 *", false, "2025-01-01T00:00:00Z");
        let fire = once.due(at("2025-02-01T00:00:00Z"), &Utc).unwrap();
        assert_eq!(fire.coalesced, 1);
        assert!(fire.is_last);
        assert!(!fire.stale);
    }

    #[test]
    fn recurring_jobs_go_stale_after_seven_days() {
        let daily = job("00000000", "0 9 * * *", true, "2025-01-06T08:00:00Z");
        assert!(!daily.is_stale(at("2025-01-13T07:59:59Z")));
        assert!(daily.is_stale(at("2025-01-13T08:00:00Z")));
        let mut before = daily.clone();
        let fire = before.due(at("2025-01-12T09:00:00Z"), &Utc).unwrap();
        assert_eq!((fire.coalesced, fire.stale, fire.is_last), (7, false, false));
        before.fired(&fire);
        let fire = before.due(at("2025-01-13T09:00:00Z"), &Utc).unwrap();
        assert_eq!((fire.coalesced, fire.stale, fire.is_last), (1, true, true));
        // Resumed a month later: one stale fire standing for every missed day.
        let fire = daily.due(at("2025-02-05T10:00:00Z"), &Utc).unwrap();
        assert_eq!((fire.coalesced, fire.stale, fire.is_last), (31, true, true));
    }

    #[test]
    fn the_envelope() {
        let every_5 = job("1a2b3c4d", "*/5 * * * *", true, "2025-01-06T09:01:00Z");
        let fire = every_5.due(at("2025-01-06T09:20:30Z"), &Utc).unwrap();
        assert_eq!(
            fire.envelope(),
            "<cron-fire id=\"1a2b3c4d\" cron=\"*/5 * * * *\" coalescedCount=\"4\">\ncheck the build\n</cron-fire>"
        );
        let stale = every_5.due(at("2025-01-13T09:01:00Z"), &Utc).unwrap();
        assert!(
            stale.envelope().starts_with(
                "<cron-fire id=\"1a2b3c4d\" cron=\"*/5 * * * *\" coalescedCount=\"2016\" stale=\"true\">\n"
            ),
            "{}",
            stale.envelope()
        );
    }

    #[test]
    fn records_round_trip_through_json() {
        let record = job("1a2b3c4d", "*/5 * * * *", true, "2025-01-06T09:01:00Z")
            .record()
            .clone();
        let json = serde_json::to_value(&record).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "1a2b3c4d", "cron": "*/5 * * * *", "prompt": "check the build", "recurring": true,
                "created_at": "2025-01-06T09:01:00Z", "last_fired_at": null
            })
        );
        assert_eq!(serde_json::from_value::<CronRecord>(json).unwrap(), record);
    }
}
