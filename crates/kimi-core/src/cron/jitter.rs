//! Deterministic jitter, so that many sessions scheduled for the same round minute do not all call the
//! model at once, while one job always fires at the same offset (derived from its seed, the job id's
//! number).
//!
//! - Recurring jobs fire late by up to a tenth of their period, at most 15 minutes.
//! - One-shot jobs whose minute is `:00` or `:30` fire early by up to 90 seconds; others fire on time.

use chrono::{DateTime, Duration, TimeZone, Timelike};

/// Recurring jobs are never later than this.
pub const MAX_RECURRING_DELAY: Duration = Duration::minutes(15);
/// One-shot jobs on a round minute are never earlier than this.
pub const MAX_ONE_SHOT_ADVANCE: Duration = Duration::seconds(90);

/// Where in `[0, 1)` the offsets of the job seeded `seed` fall.
fn fraction(seed: u32) -> f64 {
    f64::from(seed) / 4_294_967_296.0
}

/// `max` scaled by the job's fraction, in whole seconds (rounded down).
fn scaled(seed: u32, max: Duration) -> Duration {
    Duration::seconds((max.num_seconds() as f64 * fraction(seed)) as i64)
}

/// How late a recurring job fires after an ideal time whose next ideal time is `period` later.
pub fn recurring_delay(seed: u32, period: Duration) -> Duration {
    scaled(seed, (period / 10).min(MAX_RECURRING_DELAY))
}

/// How early a one-shot job fires before its ideal time `at`.
pub fn one_shot_advance<Tz: TimeZone>(seed: u32, at: &DateTime<Tz>) -> Duration {
    if matches!(at.minute(), 0 | 30) {
        scaled(seed, MAX_ONE_SHOT_ADVANCE)
    } else {
        Duration::zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use pretty_assertions::assert_eq;

    /// The seed of the job id `text`.
    fn id(text: &str) -> u32 {
        u32::from_str_radix(text, 16).unwrap()
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
                recurring_delay(id(text), *period),
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
                one_shot_advance(id(text), &at(ideal)),
                Duration::seconds(*seconds),
                "{text} {ideal}"
            );
        }
    }

    #[test]
    fn the_same_id_always_gets_the_same_offset() {
        let job = id("3fa2c1d9");
        let first = recurring_delay(job, Duration::hours(1));
        for _ in 0..10 {
            assert_eq!(recurring_delay(job, Duration::hours(1)), first);
        }
        assert!(first > Duration::zero() && first < Duration::minutes(6));
    }
}
