//! A short English description of a schedule (`every 5 minutes`, `weekdays at 09:00`) for the model and
//! the user; expressions no pattern here covers are shown as written.

use super::expr::{CronExpr, ExprParts};

const WEEKDAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The schedule in words.
pub fn describe(expr: &CronExpr) -> String {
    let parts = expr.parts();
    describe_parts(&parts).unwrap_or_else(|| format!("cron `{}`", expr.source()))
}

fn describe_parts(p: &ExprParts) -> Option<String> {
    let every_day = p.any_day_of_month && p.any_month && p.any_day_of_week;
    if every_day && p.any_hour {
        if p.any_minute {
            return Some("every minute".into());
        }
        if let Some(step) = even_step(&p.minutes, 60) {
            return Some(format!("every {step} minutes"));
        }
        if let [minute] = p.minutes[..] {
            return Some(format!("every hour at :{minute:02}"));
        }
        return None;
    }
    let [minute] = p.minutes[..] else {
        return None;
    };
    if every_day && let Some(step) = even_step(&p.hours, 24) {
        return Some(format!("every {step} hours at :{minute:02}"));
    }
    if p.hours.is_empty() || p.hours.len() > 4 {
        return None;
    }
    let times = p
        .hours
        .iter()
        .map(|hour| format!("{hour:02}:{minute:02}"))
        .collect::<Vec<_>>()
        .join(", ");
    let days = describe_days(p)?;
    Some(format!("{days} at {times}"))
}

fn describe_days(p: &ExprParts) -> Option<String> {
    match (p.any_day_of_month, p.any_month, p.any_day_of_week) {
        (true, true, true) => Some("daily".into()),
        (true, true, false) => Some(match p.days_of_week[..] {
            [1, 2, 3, 4, 5] => "weekdays".into(),
            [0, 6] => "weekends".into(),
            [day] => format!("every {}", WEEKDAYS[day as usize]),
            _ => format!(
                "every {}",
                p.days_of_week
                    .iter()
                    .map(|d| WEEKDAYS[*d as usize])
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
        (false, true, true) => match p.days_of_month[..] {
            [day] => Some(format!("monthly on day {day}")),
            _ => None,
        },
        (false, false, true) => match (&p.days_of_month[..], &p.months[..]) {
            ([day], [month]) => Some(format!("on {} {day}", MONTHS[*month as usize - 1])),
            _ => None,
        },
        _ => None,
    }
}

/// `Some(step)` when `values` are exactly `0, step, 2*step, ...` below `limit`, `step > 1` divides `limit`
/// (so the gap across the wrap is the same), and the values are evenly spaced.
fn even_step(values: &[u32], limit: u32) -> Option<u32> {
    let step = *values.get(1)?;
    (values[0] == 0
        && step > 1
        && limit.is_multiple_of(step)
        && values.iter().copied().eq((0..limit).step_by(step as usize)))
    .then_some(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn descriptions() {
        let cases: &[(&str, &str)] = &[
            ("* * * * *", "every minute"),
            ("*/5 * * * *", "every 5 minutes"),
            ("0,15,30,45 * * * *", "every 15 minutes"),
            ("*/7 * * * *", "cron `*/7 * * * *`"),
            ("0 */5 * * *", "cron `0 */5 * * *`"),
            ("0 */6 * * *", "every 6 hours at :00"),
            ("5 * * * *", "every hour at :05"),
            ("0 */2 * * *", "every 2 hours at :00"),
            ("30 9 * * *", "daily at 09:30"),
            ("0 9,17 * * *", "daily at 09:00, 17:00"),
            ("0 9 * * 1-5", "weekdays at 09:00"),
            ("0 10 * * sat,sun", "weekends at 10:00"),
            ("0 9 * * 1", "every Monday at 09:00"),
            ("0 9 * * 1,3", "every Monday, Wednesday at 09:00"),
            ("0 0 1 * *", "monthly on day 1 at 00:00"),
            ("45 14 3 2 *", "on February 3 at 14:45"),
            ("0 9 13 * 5", "cron `0 9 13 * 5`"),
            ("1-5 9 * * *", "cron `1-5 9 * * *`"),
            ("0 1-6 * * *", "cron `0 1-6 * * *`"),
        ];
        for (expr, expected) in cases {
            let expr: CronExpr = expr.parse().unwrap();
            assert_eq!(describe(&expr), *expected, "{expr}");
        }
    }
}
