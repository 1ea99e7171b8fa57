//! Deterministic jitter, so that many sessions scheduled for the same round minute do not all call the
//! model at once, while one job always fires at the same offset (derived from its id).
//!
//! - Recurring jobs fire late by up to a tenth of their period, at most 15 minutes.
//! - One-shot jobs whose minute is `:00` or `:30` fire early by up to 90 seconds; others fire on time.

use chrono::{DateTime, Duration, TimeZone, Timelike};

use super::job::JobId;

/// Recurring jobs are never later than this.
pub const MAX_RECURRING_DELAY: Duration = Duration::minutes(15);
/// One-shot jobs on a round minute are never earlier than this.
pub const MAX_ONE_SHOT_ADVANCE: Duration = Duration::seconds(90);

/// Where in `[0, 1)` this job's offsets fall.
fn fraction(id: &JobId) -> f64 {
    f64::from(id.as_u32()) / 4_294_967_296.0
}

/// `max` scaled by the job's fraction, in whole seconds (rounded down).
fn scaled(id: &JobId, max: Duration) -> Duration {
    Duration::seconds((max.num_seconds() as f64 * fraction(id)) as i64)
}

/// How late a recurring job fires after an ideal time whose next ideal time is `period` later.
pub fn recurring_delay(id: &JobId, period: Duration) -> Duration {
    scaled(id, (period / 10).min(MAX_RECURRING_DELAY))
}

/// How early a one-shot job fires before its ideal time `at`.
pub fn one_shot_advance<Tz: TimeZone>(id: &JobId, at: &DateTime<Tz>) -> Duration {
    if matches!(at.minute(), 0 | 30) {
        scaled(id, MAX_ONE_SHOT_ADVANCE)
    } else {
        Duration::zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use pretty_assertions::assert_eq;

    fn id(text: &str) -> JobId {
        JobId::parse(text).unwrap()
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn recurring_delays() {
        let cases: &[(&str, Duration, i64)] = &[
            // fraction 0: on time.
            ("00000000", Duration::minutes(5), 0),
            // fraction 1/2 of a 5-minute period's tenth (30 s).
            ("80000000", Duration::minutes(5), 15),
            ("ffffffff", Duration::minutes(5), 29),
            // Hourly: a tenth is 6 minutes.
            ("80000000", Duration::hours(1), 180),
            // Daily: capped at 15 minutes.
            ("80000000", Duration::days(1), 450),
            ("ffffffff", Duration::days(1), 899),
            // Every minute: a tenth is 6 s.
            ("40000000", Duration::minutes(1), 1),
        ];
        for (text, period, seconds) in cases {
            assert_eq!(
                recurring_delay(&id(text), *period),
                Duration::seconds(*seconds),
                "{text} {period}"
            );
        }
    }

    #[test]
    fn one_shot_advances() {
        let cases: &[(&str, &str, i64)] = &[
            ("80000000", "2025-01-06T09:00:00Z", 45),
            ("80000000", "2025-01-06T09:30:00Z", 45),
            ("ffffffff", "2025-01-06T09:30:00Z", 89),
            ("00000000", "2025-01-06T09:00:00Z", 0),
            ("80000000", "2025-01-06T09:05:00Z", 0),
            ("ffffffff", "2025-01-06T09:59:00Z", 0),
        ];
        for (text, ideal, seconds) in cases {
            assert_eq!(
                one_shot_advance(&id(text), &at(ideal)),
                Duration::seconds(*seconds),
                "{text} {ideal}"
            );
        }
    }

    #[test]
    fn the_same_id_always_gets_the_same_offset() {
        let job = id("3fa2c1d9");
        let first = recurring_delay(&job, Duration::hours(1));
        for _ in 0..10 {
            assert_eq!(recurring_delay(&job, Duration::hours(1)), first);
        }
        assert!(first > Duration::zero() && first < Duration::minutes(6));
    }
}
