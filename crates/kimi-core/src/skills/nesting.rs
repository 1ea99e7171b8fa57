//! How deep skills loaded by the model nest (seeds/002: at most 3 levels).
//!
//! An inline skill stays in the context once loaded, so a skill the model loads in a later step of the
//! same turn runs "inside" the earlier one: its depth is one more than the number of earlier steps of
//! the turn that loaded a skill. Skills loaded side by side in one step share a depth. A new turn starts
//! again at depth 1. This stops a skill that (directly or through others) keeps loading skills.

/// The deepest a skill loaded by the model may nest.
pub const MAX_SKILL_DEPTH: u32 = 3;

/// A load refused because it would nest deeper than [`MAX_SKILL_DEPTH`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("skill nesting depth {depth} exceeds the limit of {MAX_SKILL_DEPTH}")]
pub struct TooDeep {
    /// The depth the load would have had.
    pub depth: u32,
}

/// The per-turn depth state (no I/O; driven by the loop and the `Skill` tool).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Nesting {
    /// Earlier steps of this turn that loaded a skill.
    levels: u32,
    /// Whether the current step loaded one.
    loaded_this_step: bool,
}

impl Nesting {
    /// A new turn: nothing is loaded.
    pub fn begin_turn(&mut self) {
        *self = Self::default();
    }

    /// A new step: a load in the step before makes this step one level deeper.
    pub fn begin_step(&mut self) {
        if std::mem::take(&mut self.loaded_this_step) {
            self.levels += 1;
        }
    }

    /// A load in the current step: its depth, or [`TooDeep`].
    pub fn enter(&mut self) -> Result<u32, TooDeep> {
        let depth = self.levels + 1;
        if depth > MAX_SKILL_DEPTH {
            return Err(TooDeep { depth });
        }
        self.loaded_this_step = true;
        Ok(depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn depth_grows_per_step_that_loaded_a_skill() {
        let mut n = Nesting::default();
        n.begin_step();
        assert_eq!(n.enter(), Ok(1));
        assert_eq!(n.enter(), Ok(1), "side by side in one step");
        n.begin_step();
        n.begin_step(); // a step that loaded nothing adds no level
        assert_eq!(n.enter(), Ok(2));
        n.begin_step();
        assert_eq!(n.enter(), Ok(3));
        n.begin_step();
        assert_eq!(n.enter(), Err(TooDeep { depth: 4 }));
        // A refused load does not deepen the next step.
        n.begin_step();
        assert_eq!(n.enter(), Err(TooDeep { depth: 4 }));
        n.begin_turn();
        n.begin_step();
        assert_eq!(n.enter(), Ok(1));
    }
}
