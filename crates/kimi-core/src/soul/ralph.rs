//! Ralph mode (`loop_control.max_ralph_iterations`, `--max-ralph-iterations`): a prompt is fed to the
//! model again and again until it says the task is done (reference `FlowRunner.ralph_loop`).

use kimi_wire::message::UserInput;
use tokio_util::sync::CancellationToken;

use super::{Soul, TurnError, TurnOutcome};
use crate::approval::ApprovalSource;
use crate::skills::flow::Flow;

/// How many times a prompt may be fed again after its first run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RalphLoop {
    /// A prompt runs once (the configuration's `0`).
    #[default]
    Off,
    /// At most this many more times (never 0).
    Iterations(u64),
    /// Until the model stops it (the configuration's `-1`).
    Unlimited,
}

impl RalphLoop {
    /// From `max_ralph_iterations`: `0` is off, a negative number (validated to be `-1`) unlimited.
    pub fn from_config(max_ralph_iterations: i64) -> Self {
        match u64::try_from(max_ralph_iterations) {
            Ok(0) => Self::Off,
            Ok(n) => Self::Iterations(n),
            Err(_) => Self::Unlimited,
        }
    }

    /// The node turns a walk may take: the first run plus the iterations (`None`: no bound).
    fn max_turns(self) -> Option<u64> {
        match self {
            Self::Off => Some(1),
            Self::Iterations(n) => Some(n.saturating_add(1)),
            Self::Unlimited => None,
        }
    }
}

impl Soul {
    /// Runs `input` as the Ralph flow, when Ralph mode is on for this soul. Subagents never loop: their
    /// prompt comes from the parent model, and their answer is its tool result.
    pub(super) async fn ralph_turn(
        &self,
        input: &UserInput,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Option<Result<TurnOutcome, TurnError>> {
        let ralph = self.settings.ralph;
        if ralph == RalphLoop::Off || self.subagent.is_some() {
            return None;
        }
        let flow = Flow::ralph_loop(input.to_parts());
        Some(self.walk(&flow, ralph.max_turns(), source, cancel).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn iterations_come_from_the_configuration() {
        assert_eq!(RalphLoop::from_config(0), RalphLoop::Off);
        assert_eq!(RalphLoop::from_config(2), RalphLoop::Iterations(2));
        assert_eq!(RalphLoop::from_config(-1), RalphLoop::Unlimited);
        assert_eq!(RalphLoop::from_config(2).max_turns(), Some(3));
        assert_eq!(RalphLoop::from_config(i64::MAX).max_turns(), Some(1 << 63));
        assert_eq!(RalphLoop::Unlimited.max_turns(), None);
    }
}
