//! Five-field cron expressions (`minute hour day-of-month month day-of-week`) and their next match.
//!
//! The grammar is the classic Vixie cron one: each field is a comma list of `*`, `N`, `N-M`, each
//! optionally followed by `/STEP`; months and weekdays also take three-letter English names (`jan`,
//! `mon`), and weekday 7 is Sunday like 0. When both day fields are restricted (neither starts with
//! `*`) a day matches if either does, as in Vixie cron; otherwise only the restricted one counts.
//!
//! Times are wall-clock times in a time zone. A local time that does not exist (the hour skipped when
//! clocks go forward) fires at the first instant after the gap; a local time that happens twice (clocks
//! go back) fires on its first occurrence only.

use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Timelike};

/// How far ahead [`CronExpr::next_after`] looks. A valid expression always matches within eight years
/// (29 February comes back every four, every eight at most across a skipped leap year).
const SEARCH_YEARS: i32 = 9;

/// Why an expression was refused; the text is what the model reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronParseError {
    /// Not exactly five fields.
    #[error("expected 5 fields (minute hour day-of-month month day-of-week), found {0}")]
    FieldCount(usize),
    /// One field is malformed.
    #[error("{field} field `{text}`: {reason}")]
    Field {
        /// Which field (`minute`, `hour`, ...).
        field: &'static str,
        /// The field as written.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// One field's allowed values as a bit set (bit `n` = value `n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    bits: u64,
    /// Written without a leading `*`: takes part in the day-of-month / day-of-week rule.
    restricted: bool,
}

impl Field {
    fn contains(self, value: u32) -> bool {
        value < 64 && self.bits & (1 << value) != 0
    }

    /// The smallest allowed value `>= from`.
    fn next_from(self, from: u32) -> Option<u32> {
        if from >= 64 {
            return None;
        }
        let rest = self.bits >> from;
        (rest != 0).then(|| from + rest.trailing_zeros())
    }

    fn is_full(self, spec: &FieldSpec) -> bool {
        (spec.min..=spec.max).all(|v| self.contains(v))
    }

    /// The allowed values in order.
    fn values(self) -> impl Iterator<Item = u32> {
        (0..64).filter(move |v| self.contains(*v))
    }
}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    /// Three-letter names for the values from `name_base` on.
    names: &'static [&'static str],
    name_base: u32,
}

const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    name_base: 0,
};
const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    name_base: 0,
};
const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    name_base: 0,
};
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
    name_base: 1,
};
// 7 is accepted as Sunday and folded onto 0 after parsing.
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
    name_base: 0,
};

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    source: String,
    minute: Field,
    hour: Field,
    day_of_month: Field,
    month: Field,
    day_of_week: Field,
}

impl std::str::FromStr for CronExpr {
    type Err = CronParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, day_of_month, month, day_of_week] = fields[..] else {
            return Err(CronParseError::FieldCount(fields.len()));
        };
        let mut day_of_week = parse_field(day_of_week, &DAY_OF_WEEK)?;
        if day_of_week.contains(7) {
            day_of_week.bits = (day_of_week.bits & !(1 << 7)) | 1;
        }
        Ok(Self {
            source: fields.join(" "),
            minute: parse_field(minute, &MINUTE)?,
            hour: parse_field(hour, &HOUR)?,
            day_of_month: parse_field(day_of_month, &DAY_OF_MONTH)?,
            month: parse_field(month, &MONTH)?,
            day_of_week,
        })
    }
}

fn parse_field(text: &str, spec: &FieldSpec) -> Result<Field, CronParseError> {
    let error = |reason: String| CronParseError::Field {
        field: spec.name,
        text: text.to_owned(),
        reason,
    };
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| error(format!("step `{step}` is not a number")))?;
                if step == 0 {
                    return Err(error("step must be at least 1".into()));
                }
                (range, step)
            }
            None => (item, 1),
        };
        let (low, high) = if range == "*" {
            (spec.min, spec.max)
        } else if let Some((low, high)) = range.split_once('-') {
            (value(low, spec, &error)?, value(high, spec, &error)?)
        } else {
            let single = value(range, spec, &error)?;
            // `N/STEP` means N, N+STEP, ... up to the field's maximum (Vixie cron).
            let high = if step > 1 { spec.max } else { single };
            (single, high)
        };
        if low > high {
            return Err(error(format!("range {low}-{high} runs backwards")));
        }
        for v in (low..=high).step_by(step as usize) {
            bits |= 1 << v;
        }
    }
    Ok(Field {
        bits,
        restricted: !text.starts_with('*'),
    })
}

fn value(
    text: &str,
    spec: &FieldSpec,
    error: &dyn Fn(String) -> CronParseError,
) -> Result<u32, CronParseError> {
    let lower = text.to_ascii_lowercase();
    let number = match spec.names.iter().position(|name| *name == lower) {
        Some(index) => spec.name_base + index as u32,
        None => text.parse().map_err(|_| {
            if text.is_empty() {
                error("empty value".into())
            } else {
                error(format!("`{text}` is not a number"))
            }
        })?,
    };
    if number < spec.min || number > spec.max {
        return Err(error(format!("{number} is outside {}-{}", spec.min, spec.max)));
    }
    Ok(number)
}

impl std::fmt::Display for CronExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

impl CronExpr {
    /// The expression as written, with runs of whitespace collapsed.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Does the calendar day `date` match the day fields?
    fn day_matches(&self, date: NaiveDate) -> bool {
        if !self.month.contains(date.month()) {
            return false;
        }
        let by_month_day = self.day_of_month.contains(date.day());
        let by_weekday = self.day_of_week.contains(date.weekday().num_days_from_sunday());
        match (self.day_of_month.restricted, self.day_of_week.restricted) {
            (true, true) => by_month_day || by_weekday,
            (true, false) => by_month_day,
            (false, true) => by_weekday,
            (false, false) => true,
        }
    }

    /// The first wall-clock minute strictly after `after` (in `after`'s zone) that matches, or `None` if
    /// none comes within the search horizon (e.g. `0 0 30 2 *`).
    pub fn next_after<Tz: TimeZone>(&self, after: &DateTime<Tz>) -> Option<DateTime<Tz>> {
        let zone = after.timezone();
        let local = after.naive_local();
        let mut candidate = local.with_second(0)?.with_nanosecond(0)? + Duration::minutes(1);
        let last_year = local.year() + SEARCH_YEARS;
        loop {
            let naive = self.next_naive_from(candidate, last_year)?;
            // Clocks went back (ambiguous): only the first occurrence counts.
            match zone.from_local_datetime(&naive) {
                LocalResult::Single(at) | LocalResult::Ambiguous(at, _) if at > *after => return Some(at),
                LocalResult::None => {
                    if let Some(at) = first_instant_after_gap(&zone, naive)
                        && at > *after
                    {
                        return Some(at);
                    }
                }
                LocalResult::Single(_) | LocalResult::Ambiguous(..) => {}
            }
            candidate = naive + Duration::minutes(1);
        }
    }

    /// The first naive minute `>= from` matching every field, before `last_year` ends.
    fn next_naive_from(&self, from: NaiveDateTime, last_year: i32) -> Option<NaiveDateTime> {
        let mut at = from;
        while at.year() <= last_year {
            let date = at.date();
            if !self.day_matches(date) {
                at = date.succ_opt()?.and_hms_opt(0, 0, 0)?;
                continue;
            }
            let Some(hour) = self.hour.next_from(at.hour()) else {
                at = date.succ_opt()?.and_hms_opt(0, 0, 0)?;
                continue;
            };
            if hour != at.hour() {
                at = date.and_hms_opt(hour, 0, 0)?;
            }
            match self.minute.next_from(at.minute()) {
                Some(minute) => return date.and_hms_opt(hour, minute, 0),
                None => at = date.and_hms_opt(hour, 0, 0)? + Duration::hours(1),
            }
        }
        None
    }

    /// Minute, hour, day-of-month, month and day-of-week values, for describing the schedule.
    pub(crate) fn parts(&self) -> ExprParts {
        ExprParts {
            minutes: self.minute.values().collect(),
            hours: self.hour.values().collect(),
            days_of_month: self.day_of_month.values().collect(),
            months: self.month.values().collect(),
            days_of_week: self.day_of_week.values().collect(),
            any_minute: self.minute.is_full(&MINUTE),
            any_hour: self.hour.is_full(&HOUR),
            any_day_of_month: !self.day_of_month.restricted,
            any_month: self.month.is_full(&MONTH),
            any_day_of_week: !self.day_of_week.restricted,
        }
    }
}

/// The values an expression allows, field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExprParts {
    pub minutes: Vec<u32>,
    pub hours: Vec<u32>,
    pub days_of_month: Vec<u32>,
    pub months: Vec<u32>,
    pub days_of_week: Vec<u32>,
    pub any_minute: bool,
    pub any_hour: bool,
    pub any_day_of_month: bool,
    pub any_month: bool,
    pub any_day_of_week: bool,
}

/// A naive time inside a gap (clocks went forward) maps to the first real minute after it.
fn first_instant_after_gap<Tz: TimeZone>(zone: &Tz, naive: NaiveDateTime) -> Option<DateTime<Tz>> {
    // Gaps are at most a few hours (24 h for a skipped day in a few historical cases).
    (1..=24 * 60).find_map(|m| {
        zone.from_local_datetime(&(naive + Duration::minutes(m)))
            .earliest()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, Utc};
    use pretty_assertions::assert_eq;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn next(expr: &str, after: &str) -> Option<String> {
        let expr: CronExpr = expr.parse().unwrap();
        expr.next_after(&DateTime::parse_from_rfc3339(after).unwrap())
            .map(|at| at.to_rfc3339())
    }

    #[test]
    fn parse_errors_say_what_is_wrong() {
        let cases: &[(&str, &str)] = &[
            (
                "* * * *",
                "expected 5 fields (minute hour day-of-month month day-of-week), found 4",
            ),
            (
                "* * * * * *",
                "expected 5 fields (minute hour day-of-month month day-of-week), found 6",
            ),
            (
                "",
                "expected 5 fields (minute hour day-of-month month day-of-week), found 0",
            ),
            ("60 * * * *", "minute field `60`: 60 is outside 0-59"),
            ("* 24 * * *", "hour field `24`: 24 is outside 0-23"),
            ("* * 0 * *", "day-of-month field `0`: 0 is outside 1-31"),
            ("* * * 13 *", "month field `13`: 13 is outside 1-12"),
            ("* * * * 8", "day-of-week field `8`: 8 is outside 0-7"),
            ("*/0 * * * *", "minute field `*/0`: step must be at least 1"),
            ("*/x * * * *", "minute field `*/x`: step `x` is not a number"),
            ("5-1 * * * *", "minute field `5-1`: range 5-1 runs backwards"),
            ("a * * * *", "minute field `a`: `a` is not a number"),
            ("1,,2 * * * *", "minute field `1,,2`: empty value"),
            ("* * * foo *", "month field `foo`: `foo` is not a number"),
            ("? * * * *", "minute field `?`: `?` is not a number"),
        ];
        for (text, message) in cases {
            let error = text.parse::<CronExpr>().unwrap_err();
            assert_eq!(error.to_string(), *message, "{text:?}");
        }
    }

    #[test]
    fn parses_lists_ranges_steps_and_names() {
        let expr: CronExpr = "0,15-20/5,*/30  9-17/4 1 jan-MAR,dec mon-fri".parse().unwrap();
        let parts = expr.parts();
        assert_eq!(parts.minutes, [0, 15, 20, 30]);
        assert_eq!(parts.hours, [9, 13, 17]);
        assert_eq!(parts.days_of_month, [1]);
        assert_eq!(parts.months, [1, 2, 3, 12]);
        assert_eq!(parts.days_of_week, [1, 2, 3, 4, 5]);
        assert_eq!(expr.source(), "0,15-20/5,*/30 9-17/4 1 jan-MAR,dec mon-fri");
        let sunday: CronExpr = "0 0 * * 7".parse().unwrap();
        assert_eq!(sunday.parts().days_of_week, [0]);
        let from_five: CronExpr = "5/20 * * * sun".parse().unwrap();
        assert_eq!(from_five.parts().minutes, [5, 25, 45]);
        assert_eq!(from_five.parts().days_of_week, [0]);
    }

    #[test]
    fn next_fire_times() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            // Strictly after, at minute resolution.
            (
                "* * * * *",
                "2025-01-06T09:00:00+00:00",
                Some("2025-01-06T09:01:00+00:00"),
            ),
            (
                "* * * * *",
                "2025-01-06T09:00:59+00:00",
                Some("2025-01-06T09:01:00+00:00"),
            ),
            (
                "*/5 * * * *",
                "2025-01-06T09:03:10+00:00",
                Some("2025-01-06T09:05:00+00:00"),
            ),
            (
                "*/5 * * * *",
                "2025-01-06T09:55:00+00:00",
                Some("2025-01-06T10:00:00+00:00"),
            ),
            (
                "30 9 * * *",
                "2025-01-06T09:30:00+00:00",
                Some("2025-01-07T09:30:00+00:00"),
            ),
            (
                "30 9 * * *",
                "2025-01-06T09:29:00+00:00",
                Some("2025-01-06T09:30:00+00:00"),
            ),
            (
                "0 0 1 * *",
                "2025-01-31T12:00:00+00:00",
                Some("2025-02-01T00:00:00+00:00"),
            ),
            (
                "0 0 31 * *",
                "2025-01-31T12:00:00+00:00",
                Some("2025-03-31T00:00:00+00:00"),
            ),
            (
                "59 23 31 12 *",
                "2025-06-01T00:00:00+00:00",
                Some("2025-12-31T23:59:00+00:00"),
            ),
            (
                "0 0 1 1 *",
                "2025-12-31T23:59:00+00:00",
                Some("2026-01-01T00:00:00+00:00"),
            ),
            // 2025-01-06 is a Monday.
            (
                "0 9 * * 1-5",
                "2025-01-10T10:00:00+00:00",
                Some("2025-01-13T09:00:00+00:00"),
            ),
            (
                "0 9 * * sat,sun",
                "2025-01-06T10:00:00+00:00",
                Some("2025-01-11T09:00:00+00:00"),
            ),
            // Both day fields restricted: either matches (the 13th, or a Friday).
            (
                "0 0 13 * 5",
                "2025-01-06T00:00:00+00:00",
                Some("2025-01-10T00:00:00+00:00"),
            ),
            (
                "0 0 13 * 5",
                "2025-01-10T00:00:00+00:00",
                Some("2025-01-13T00:00:00+00:00"),
            ),
            // A starred day-of-week with a step still leaves day-of-month alone in charge.
            (
                "0 0 13 * */1",
                "2025-01-06T00:00:00+00:00",
                Some("2025-01-13T00:00:00+00:00"),
            ),
            (
                "0 0 29 2 *",
                "2025-03-01T00:00:00+00:00",
                Some("2028-02-29T00:00:00+00:00"),
            ),
            ("0 0 30 2 *", "2025-01-01T00:00:00+00:00", None),
            // Offsets are respected: the wall clock, not UTC, is matched.
            (
                "0 9 * * *",
                "2025-01-06T10:00:00+08:00",
                Some("2025-01-07T09:00:00+08:00"),
            ),
            (
                "0 9 * * *",
                "2025-01-06T08:59:00-05:00",
                Some("2025-01-06T09:00:00-05:00"),
            ),
        ];
        for (expr, after, expected) in cases {
            assert_eq!(next(expr, after).as_deref(), *expected, "{expr} after {after}");
        }
    }

    /// A zone with daylight saving: UTC+1, UTC+2 from 2025-03-30 01:00 UTC to 2025-10-26 01:00 UTC.
    #[derive(Debug, Clone, Copy)]
    struct Summer;

    impl Summer {
        fn offset_at_utc(utc: &NaiveDateTime) -> FixedOffset {
            let start = NaiveDate::from_ymd_opt(2025, 3, 30)
                .unwrap()
                .and_hms_opt(1, 0, 0)
                .unwrap();
            let end = NaiveDate::from_ymd_opt(2025, 10, 26)
                .unwrap()
                .and_hms_opt(1, 0, 0)
                .unwrap();
            let hours = if *utc >= start && *utc < end { 2 } else { 1 };
            FixedOffset::east_opt(hours * 3600).unwrap()
        }
    }

    impl TimeZone for Summer {
        type Offset = FixedOffset;
        fn from_offset(_: &FixedOffset) -> Self {
            Summer
        }
        fn offset_from_local_date(&self, _: &NaiveDate) -> LocalResult<FixedOffset> {
            unimplemented!("not used")
        }
        fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> LocalResult<FixedOffset> {
            // The larger offset first: it is the earlier instant, and chrono lists the earliest first.
            let candidates: Vec<FixedOffset> = [2, 1]
                .into_iter()
                .map(|h| FixedOffset::east_opt(h * 3600).unwrap())
                .filter(|o| Self::offset_at_utc(&(*local - *o)) == *o)
                .collect();
            match candidates[..] {
                [] => LocalResult::None,
                [one] => LocalResult::Single(one),
                [a, b] => LocalResult::Ambiguous(a, b),
                _ => unreachable!(),
            }
        }
        fn offset_from_utc_date(&self, _: &NaiveDate) -> FixedOffset {
            unimplemented!("not used")
        }
        fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> FixedOffset {
            Self::offset_at_utc(utc)
        }
    }

    fn summer(text: &str) -> DateTime<Summer> {
        utc(text).with_timezone(&Summer)
    }

    #[test]
    fn a_skipped_local_time_fires_after_the_gap() {
        // 02:00-02:59 local does not exist on 2025-03-30.
        let expr: CronExpr = "30 2 * * *".parse().unwrap();
        let at = expr.next_after(&summer("2025-03-29T12:00:00Z")).unwrap();
        assert_eq!(at.to_rfc3339(), "2025-03-30T03:00:00+02:00");
        let after = expr.next_after(&at).unwrap();
        assert_eq!(after.to_rfc3339(), "2025-03-31T02:30:00+02:00");
        // Every minute in the gap collapses onto one fire, not thirty.
        let every: CronExpr = "* * * * *".parse().unwrap();
        let before_gap = summer("2025-03-30T00:59:00Z");
        assert_eq!(before_gap.to_rfc3339(), "2025-03-30T01:59:00+01:00");
        let first = every.next_after(&before_gap).unwrap();
        assert_eq!(first.to_rfc3339(), "2025-03-30T03:00:00+02:00");
        assert_eq!(
            every.next_after(&first).unwrap().to_rfc3339(),
            "2025-03-30T03:01:00+02:00"
        );
    }

    #[test]
    fn a_repeated_local_time_fires_once() {
        // 02:00-02:59 local happens twice on 2025-10-26.
        let expr: CronExpr = "30 2 * * *".parse().unwrap();
        let first = expr.next_after(&summer("2025-10-25T12:00:00Z")).unwrap();
        assert_eq!(first.to_rfc3339(), "2025-10-26T02:30:00+02:00");
        let second = expr.next_after(&first).unwrap();
        assert_eq!(second.to_rfc3339(), "2025-10-27T02:30:00+01:00");
        // Every-minute jobs do not run the repeated hour a second time.
        let every: CronExpr = "* * * * *".parse().unwrap();
        let last_summer_minute = summer("2025-10-26T00:59:00Z");
        assert_eq!(last_summer_minute.to_rfc3339(), "2025-10-26T02:59:00+02:00");
        let next = every.next_after(&last_summer_minute).unwrap();
        assert!(next > last_summer_minute);
        assert_eq!(next.to_rfc3339(), "2025-10-26T03:00:00+01:00");
    }

    #[test]
    fn the_search_for_a_date_that_never_comes_ends_at_its_year_bound() {
        // Bounded by SEARCH_YEARS, not by wall time (how fast it gives up is not a test's business).
        let never: CronExpr = "0 0 31 2 *".parse().unwrap();
        assert_eq!(never.next_after(&utc("2025-01-01T00:00:00Z")), None);
        // A date as sparse as a leap day is still found years ahead, inside the bound.
        let leap_day: CronExpr = "0 0 29 2 *".parse().unwrap();
        let next = leap_day.next_after(&utc("2025-01-01T00:00:00Z")).unwrap();
        assert_eq!(next.to_rfc3339(), "2028-02-29T00:00:00+00:00");
    }
}
