//! How long the loop waits before retrying a failed model call.
//!
//! The reference waits with tenacity's `wait_exponential_jitter(initial=0.3, max=5, jitter=0.5)`:
//! 0.3 s doubling per attempt plus up to 0.5 s of jitter, capped at 5 s. We do the same, honour a
//! server's `Retry-After` when it asks for longer (up to [`MAX_RETRY_AFTER`]), and allow the whole curve
//! to be scaled down so black-box tests of every fault run in milliseconds instead of seconds.

use std::time::Duration;

/// The longest `Retry-After` we honour; a longer one would stall the turn for no user-visible reason.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// First wait, in seconds (reference `initial=0.3`).
const INITIAL_S: f64 = 0.3;
/// Longest wait, in seconds (reference `max=5`).
const MAX_S: f64 = 5.0;
/// Largest random addition, in seconds (reference `jitter=0.5`).
const JITTER_S: f64 = 0.5;

/// The backoff curve. `scale` multiplies the reference's curve (1 in production); a server's
/// `Retry-After` is never scaled, since it is the server's word, not ours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBackoff {
    scale: f64,
}

impl Default for RetryBackoff {
    fn default() -> Self {
        Self { scale: 1.0 }
    }
}

impl RetryBackoff {
    /// The reference's curve multiplied by `scale`; a negative or non-finite scale means 1.
    pub fn scaled(scale: f64) -> Self {
        let scale = if scale.is_finite() && scale >= 0.0 {
            scale
        } else {
            1.0
        };
        Self { scale }
    }

    /// The curve `KIMI_AGENT_RETRY_BACKOFF_SCALE` asks for (a float, e.g. `0.01`); unset or unparsable
    /// means the reference's curve.
    pub fn from_env_value(value: Option<&str>) -> Self {
        value
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or_else(Self::default, Self::scaled)
    }

    /// The wait before attempt `attempt + 1`, after attempt `attempt` (1-based) failed; `retry_after`
    /// is the server's hint, believed within reason when it asks for longer than our own curve.
    pub fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let ours = self.curve(attempt, jitter_fraction());
        retry_after.map_or(ours, |after| after.min(MAX_RETRY_AFTER).max(ours))
    }

    /// The curve at `attempt` with `jitter` in `[0, 1)` of the full jitter.
    fn curve(&self, attempt: u32, jitter: f64) -> Duration {
        let base = INITIAL_S * f64::from(2u32.saturating_pow(attempt.saturating_sub(1)));
        let seconds = (base + JITTER_S * jitter).min(MAX_S) * self.scale;
        Duration::from_secs_f64(seconds)
    }
}

/// A cheap, good-enough random fraction in `[0, 1)`: the sub-second clock. Retries are rare and only
/// need to be spread out, not unpredictable.
fn jitter_fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_curve_grows_and_is_capped() {
        let backoff = RetryBackoff::default();
        assert_eq!(backoff.curve(1, 0.0), Duration::from_millis(300));
        assert_eq!(backoff.curve(1, 0.5), Duration::from_millis(550));
        assert_eq!(backoff.curve(2, 0.0), Duration::from_millis(600));
        assert_eq!(backoff.curve(3, 0.0), Duration::from_millis(1200));
        assert_eq!(backoff.curve(10, 0.9), Duration::from_secs(5));
        let wait = backoff.wait(1, None);
        assert!(wait >= Duration::from_millis(300) && wait < Duration::from_millis(800));
    }

    #[test]
    fn retry_after_wins_when_longer_and_is_capped() {
        let backoff = RetryBackoff::default();
        assert_eq!(
            backoff.wait(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert!(backoff.wait(1, Some(Duration::ZERO)) >= Duration::from_millis(300));
        assert_eq!(backoff.wait(1, Some(Duration::from_secs(600))), MAX_RETRY_AFTER);
    }

    #[test]
    fn scale_shrinks_our_curve_but_not_the_servers_word() {
        let fast = RetryBackoff::from_env_value(Some(" 0.01 "));
        assert_eq!(fast.curve(1, 0.0), Duration::from_secs_f64(0.003));
        assert!(fast.wait(2, None) < Duration::from_millis(12));
        assert_eq!(
            fast.wait(1, Some(Duration::from_millis(50))),
            Duration::from_millis(50)
        );
        for value in [None, Some("fast"), Some("-1"), Some("NaN")] {
            assert_eq!(
                RetryBackoff::from_env_value(value),
                RetryBackoff::default(),
                "{value:?}"
            );
        }
        assert_eq!(
            RetryBackoff::from_env_value(Some("0")).wait(3, None),
            Duration::ZERO
        );
    }
}
