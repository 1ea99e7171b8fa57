//! The order the calls of one step run in (seeds/003, "工具调用执行:并发 vs 串行").
//!
//! Calls are numbered in the model's order as they stream in. Each is planned (validated, its
//! [`Access`] declared) once every earlier call is planned, so every call's lane is known before the
//! next one's. Then:
//!
//! * a read ([`Lane::Shared`]) starts once no earlier call that may change something is unfinished, so
//!   consecutive reads run together and a read after a write sees the write; a plain read (nothing to
//!   approve, no PreToolUse hook) may start while the model is still answering, anything else only
//!   once the answer is complete;
//! * a call that may change something ([`Lane::Alone`]) starts once the answer is complete and every
//!   earlier call has finished, and every later call waits for it. Two writes therefore run in the
//!   model's order, whatever order their approvals come back in.
//!
//! [`StepSchedule`] is the pure state machine (unit-tested below); [`Schedule`] shares one between the
//! calls of an attempt and lets each wait for its turn.

use std::sync::Arc;

use tokio::sync::watch;

use super::tool::Access;

/// Where a planned call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Beside the other calls, after any earlier call that may change something.
    Shared {
        /// May start before the model's answer is complete (a plain read: no approval, no hook).
        early: bool,
    },
    /// Alone: after every earlier call, before every later one, once the answer is complete.
    Alone,
}

impl Lane {
    /// The lane of a call with `access`; a call that asks someone first (an approval, a PreToolUse
    /// hook) never starts early: nothing is put to the user, a hook command or the client before the
    /// answer is complete.
    pub fn of(access: Access, asks: bool) -> Self {
        match access {
            Access::Read => Self::Shared { early: !asks },
            Access::Interact => Self::Shared { early: false },
            Access::Change => Self::Alone,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Not planned yet.
    Unplanned,
    /// Planned; waiting or running.
    Open(Lane),
    /// Its result is in.
    Done(Lane),
}

/// Which calls of one attempt may run now. No I/O, no clocks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StepSchedule {
    slots: Vec<Slot>,
    answer_complete: bool,
}

impl StepSchedule {
    /// An attempt with no calls yet, the model still answering.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next call in the model's order and returns its index.
    pub fn add(&mut self) -> usize {
        self.slots.push(Slot::Unplanned);
        self.slots.len() - 1
    }

    /// The model's answer is complete: no more calls will be added.
    pub fn complete_answer(&mut self) {
        self.answer_complete = true;
    }

    /// Is the model's answer complete?
    pub fn is_answer_complete(&self) -> bool {
        self.answer_complete
    }

    /// Records the lane of call `index` (once planned).
    pub fn classify(&mut self, index: usize, lane: Lane) {
        if let Some(slot) = self.slots.get_mut(index)
            && *slot == Slot::Unplanned
        {
            *slot = Slot::Open(lane);
        }
    }

    /// Records that call `index` has its result. A call never classified counts as a shared one.
    pub fn finish(&mut self, index: usize) {
        if let Some(slot) = self.slots.get_mut(index) {
            let lane = match *slot {
                Slot::Unplanned => Lane::Shared { early: true },
                Slot::Open(lane) | Slot::Done(lane) => lane,
            };
            *slot = Slot::Done(lane);
        }
    }

    /// May call `index` be planned now? Only once every earlier call is, so lanes are decided in order.
    pub fn may_plan(&self, index: usize) -> bool {
        self.slots[..index.min(self.slots.len())]
            .iter()
            .all(|s| *s != Slot::Unplanned)
    }

    /// May call `index` (planned) start now?
    pub fn may_start(&self, index: usize) -> bool {
        let Some(Slot::Open(lane)) = self.slots.get(index) else {
            return false;
        };
        let earlier = &self.slots[..index];
        match lane {
            Lane::Shared { early } => {
                (*early || self.answer_complete)
                    && earlier
                        .iter()
                        .all(|s| !matches!(s, Slot::Unplanned | Slot::Open(Lane::Alone)))
            }
            Lane::Alone => self.answer_complete && earlier.iter().all(|s| matches!(s, Slot::Done(_))),
        }
    }

    /// Does an earlier call of the step (finished or not) run alone, i.e. may it change what call
    /// `index` finds? A plan that failed may then succeed once that call has run.
    pub fn changes_before(&self, index: usize) -> bool {
        self.slots[..index.min(self.slots.len())]
            .iter()
            .any(|s| matches!(s, Slot::Open(Lane::Alone) | Slot::Done(Lane::Alone)))
    }
}

/// One attempt's [`StepSchedule`], shared by its calls.
#[derive(Debug, Clone)]
pub struct Schedule(Arc<watch::Sender<StepSchedule>>);

impl Default for Schedule {
    fn default() -> Self {
        Self::new()
    }
}

impl Schedule {
    /// An empty schedule.
    pub fn new() -> Self {
        Self(Arc::new(watch::Sender::new(StepSchedule::new())))
    }

    /// Adds the next call; the guard marks it finished when dropped.
    pub fn add(&self) -> SlotGuard {
        let mut index = 0;
        self.0.send_modify(|s| index = s.add());
        SlotGuard {
            schedule: self.clone(),
            index,
        }
    }

    /// The model's answer is complete.
    pub fn complete_answer(&self) {
        self.0.send_modify(StepSchedule::complete_answer);
    }

    async fn wait(&self, ready: impl Fn(&StepSchedule) -> bool) {
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = self.0.subscribe().wait_for(ready).await;
    }
}

/// A call's place in the schedule.
#[derive(Debug)]
pub struct SlotGuard {
    schedule: Schedule,
    index: usize,
}

impl SlotGuard {
    /// Waits until every earlier call is planned.
    pub async fn planning_turn(&self) {
        let index = self.index;
        self.schedule.wait(|s| s.may_plan(index)).await;
    }

    /// Records this call's lane.
    pub fn classify(&self, lane: Lane) {
        let index = self.index;
        self.schedule.0.send_modify(|s| s.classify(index, lane));
    }

    /// Whether an earlier call of the step may change what this one finds.
    pub fn changes_before(&self) -> bool {
        self.schedule.0.borrow().changes_before(self.index)
    }

    /// Waits until the model's answer is complete.
    pub async fn answer_complete(&self) {
        self.schedule.wait(StepSchedule::is_answer_complete).await;
    }

    /// Waits until this call may start.
    pub async fn start_turn(&self) {
        let index = self.index;
        self.schedule.wait(|s| s.may_start(index)).await;
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let index = self.index;
        self.schedule.0.send_modify(|s| s.finish(index));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: Lane = Lane::Shared { early: true };
    const LATE_READ: Lane = Lane::Shared { early: false };
    const WRITE: Lane = Lane::Alone;

    /// A schedule with one call per lane, all planned.
    fn planned(lanes: &[Lane]) -> StepSchedule {
        let mut s = StepSchedule::new();
        for lane in lanes {
            let i = s.add();
            s.classify(i, *lane);
        }
        s
    }

    /// The indices of the calls that may start now.
    fn startable(s: &StepSchedule) -> Vec<usize> {
        (0..s.slots.len()).filter(|&i| s.may_start(i)).collect()
    }

    #[test]
    fn lanes_follow_access_and_approval() {
        assert_eq!(Lane::of(Access::Read, false), READ);
        assert_eq!(Lane::of(Access::Read, true), LATE_READ);
        assert_eq!(Lane::of(Access::Interact, false), LATE_READ);
        assert_eq!(Lane::of(Access::Change, true), WRITE);
        assert_eq!(Lane::of(Access::Change, false), WRITE);
    }

    #[test]
    fn plain_reads_start_while_the_model_still_answers_and_run_together() {
        let s = planned(&[READ, READ, READ]);
        assert_eq!(startable(&s), [0, 1, 2]);
    }

    #[test]
    fn nothing_but_plain_reads_starts_before_the_answer_is_complete() {
        let mut s = planned(&[READ, LATE_READ, WRITE]);
        assert_eq!(startable(&s), [0]);
        s.complete_answer();
        assert_eq!(startable(&s), [0, 1]);
    }

    #[test]
    fn a_read_after_a_write_waits_for_it() {
        let mut s = planned(&[WRITE, READ]);
        assert_eq!(startable(&s), Vec::<usize>::new());
        s.complete_answer();
        assert_eq!(startable(&s), [0]);
        s.finish(0);
        assert_eq!(startable(&s), [1]);
    }

    #[test]
    fn a_write_waits_for_every_earlier_call_and_every_later_call_waits_for_it() {
        let mut s = planned(&[READ, READ, WRITE, READ, LATE_READ]);
        s.complete_answer();
        assert_eq!(startable(&s), [0, 1]);
        s.finish(1);
        assert_eq!(startable(&s), [0], "the write waits for the slower read too");
        s.finish(0);
        assert_eq!(startable(&s), [2]);
        s.finish(2);
        assert_eq!(startable(&s), [3, 4]);
    }

    #[test]
    fn two_writes_run_in_the_model_order() {
        let mut s = planned(&[WRITE, WRITE]);
        s.complete_answer();
        assert_eq!(startable(&s), [0]);
        // Finishing the second first (it cannot have started) changes nothing for the first.
        assert!(!s.may_start(1));
        s.finish(0);
        assert_eq!(startable(&s), [1]);
    }

    #[test]
    fn reads_between_writes_run_together() {
        let mut s = planned(&[WRITE, READ, LATE_READ, READ, WRITE]);
        s.complete_answer();
        s.finish(0);
        assert_eq!(startable(&s), [1, 2, 3]);
        s.finish(2);
        s.finish(3);
        assert_eq!(startable(&s), [1]);
        s.finish(1);
        assert_eq!(startable(&s), [4]);
    }

    #[test]
    fn calls_are_planned_in_order_and_an_unplanned_call_holds_later_reads() {
        let mut s = StepSchedule::new();
        let (a, b) = (s.add(), s.add());
        assert!(s.may_plan(a));
        assert!(!s.may_plan(b));
        s.classify(b, READ);
        assert!(
            !s.may_start(b),
            "an earlier call could still turn out to be a write"
        );
        s.classify(a, READ);
        assert!(s.may_plan(b));
        assert_eq!(startable(&s), [0, 1]);
    }

    #[test]
    fn a_failed_plan_may_depend_on_an_earlier_write() {
        let mut s = planned(&[READ, WRITE, READ]);
        let last = s.add();
        assert!(!s.changes_before(1));
        assert!(s.changes_before(2));
        s.complete_answer();
        s.finish(1);
        assert!(s.changes_before(last), "also once the write has finished");
    }

    #[test]
    fn a_call_finished_without_a_plan_counts_as_a_read() {
        let mut s = StepSchedule::new();
        let (a, b) = (s.add(), s.add());
        s.finish(a);
        s.classify(b, READ);
        assert!(s.may_plan(b));
        assert_eq!(startable(&s), [1]);
        assert!(!s.changes_before(b));
    }

    #[tokio::test]
    async fn guards_wait_for_their_turn_and_release_it_when_dropped() {
        let schedule = Schedule::new();
        let write = schedule.add();
        let read = schedule.add();
        write.classify(Lane::Alone);
        read.classify(READ);
        let reader = tokio::spawn(async move {
            read.start_turn().await;
            read
        });
        tokio::task::yield_now().await;
        assert!(!reader.is_finished());
        schedule.complete_answer();
        write.start_turn().await;
        drop(write);
        let read = reader.await.unwrap();
        assert!(read.changes_before());
    }
}
