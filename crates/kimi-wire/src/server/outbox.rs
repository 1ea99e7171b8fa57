//! The queue between everyone who sends to the client and the one thread that writes stdout.
//!
//! A send is a short lock and a `Vec` push, never a system call. The writer thread
//! ([`super::writer`]) takes everything queued at once (group commit): it first has each attached
//! [`Journal`] (the session files) write what it holds, then writes the lines to stdout, so a line
//! reaches the client only after every record handed to a journal before it reached its file. That
//! ordering is what makes "what a client has seen is on disk" hold without any acknowledgement per record.
//!
//! Waking the writer is the one cross-thread cost left. By default a send wakes it when it sleeps. With
//! an [`IdleSignal`] (the binary calls it from its runtime's park hook) the writer is woken once, when the
//! runtime's thread runs out of work, or early when a batch is large: a step's four events then cost one
//! wake-up, not four.
//!
//! The queue is bounded ([`OUTBOX_CAPACITY`] lines): a sender waits (asynchronously) while the client is
//! not reading, which is how a stalled client holds back the model stream instead of growing memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use tokio::sync::Semaphore;

/// The connection went away; nothing more can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the wire connection is closed")]
pub struct ConnectionClosed;

/// Lines queued for stdout before senders wait: enough to absorb a burst of streamed parts, small enough
/// (a few MB of typical events) to bound memory when the client is not reading.
pub const OUTBOX_CAPACITY: usize = 1024;

/// Lines queued before a send wakes a writer that otherwise waits for the runtime to go idle: the
/// writer then works beside a producer that never pauses (a long stream of parts).
const WAKE_BATCH: usize = 64;

/// Something the writer thread writes before each batch of lines goes to the client: a session file
/// whose records must be on disk before the client sees the events they record.
pub trait Journal: Send + Sync {
    /// Writes what the journal holds. Failures are the journal's to remember and report.
    fn commit(&self);
}

/// The shared queue; the server, every [`crate::ClientHandle`] and the writer thread hold it.
pub(crate) struct Outbox {
    state: Mutex<State>,
    /// The writer waits here.
    wake: Condvar,
    /// Free places in the queue; a sender takes one, the writer gives it back once the line is out.
    space: Semaphore,
    /// Committed before each batch; held weakly so a dropped journal (a finished subagent) goes away.
    journals: Mutex<Vec<Weak<dyn Journal>>>,
    /// Wake-ups wait for the runtime to go idle ([`IdleSignal`]).
    deferred: AtomicBool,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("space", &self.space.available_permits())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    lines: Vec<String>,
    /// A journal has records the writer has not committed yet.
    journal_pending: bool,
    closed: bool,
    /// The writer waits on `wake` and nobody has woken it since.
    writer_asleep: bool,
}

/// What the writer took in one go.
pub(crate) struct Batch {
    /// Whether the outbox was closed when the batch was taken: after this batch, nothing more comes.
    pub closed: bool,
}

impl Outbox {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            space: Semaphore::new(OUTBOX_CAPACITY),
            journals: Mutex::new(Vec::new()),
            deferred: AtomicBool::new(false),
        })
    }

    /// Queues `line` (without its newline), waiting while the queue is full.
    pub(crate) async fn send(&self, line: String) -> Result<(), ConnectionClosed> {
        // The place is given back by the writer once the line is written, not when this permit drops.
        self.space.acquire().await.map_err(|_| ConnectionClosed)?.forget();
        let mut state = self.lock();
        if state.closed {
            return Err(ConnectionClosed);
        }
        state.lines.push(line);
        let wake = !self.deferred.load(Ordering::Relaxed) || state.lines.len() >= WAKE_BATCH;
        self.wake_writer(&mut state, wake);
        Ok(())
    }

    /// Has the outbox stopped taking lines?
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// No more lines are taken; what is queued still goes out.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        // Senders waiting for a place give up with `ConnectionClosed`.
        self.space.close();
        self.wake_writer(&mut state, true);
    }

    /// Adds `journal` to what the writer commits before each batch.
    pub(crate) fn attach(&self, journal: Weak<dyn Journal>) {
        let mut journals = crate::sync::lock(&self.journals);
        journals.retain(|j| j.strong_count() > 0);
        journals.push(journal);
    }

    /// A journal holds records to write: the writer commits them at its next batch, even with no line
    /// queued.
    pub(crate) fn journal_pending(&self) {
        let mut state = self.lock();
        state.journal_pending = true;
        let wake = !self.deferred.load(Ordering::Relaxed);
        self.wake_writer(&mut state, wake);
    }

    /// The runtime's thread has nothing left to run: wake the writer if anything waits for it.
    fn idle(&self) {
        let mut state = self.lock();
        let wake = !state.lines.is_empty() || state.journal_pending;
        self.wake_writer(&mut state, wake);
    }

    fn wake_writer(&self, state: &mut State, wake: bool) {
        if wake && state.writer_asleep {
            state.writer_asleep = false;
            self.wake.notify_one();
        }
    }

    /// The writer's side: blocks until there are lines or journal records to write, or the outbox is
    /// closed, and moves the queued lines into `into` (empty on entry).
    pub(crate) fn take(&self, into: &mut Vec<String>) -> Batch {
        let mut state = self.lock();
        loop {
            if !state.lines.is_empty() || state.journal_pending || state.closed {
                std::mem::swap(&mut state.lines, into);
                state.journal_pending = false;
                return Batch { closed: state.closed };
            }
            state.writer_asleep = true;
            state = crate::sync::wait(&self.wake, state);
        }
    }

    /// Has every attached journal write what it holds (the writer, before the lines of a batch).
    pub(crate) fn commit_journals(&self) {
        let live: Vec<Arc<dyn Journal>> = {
            let journals = crate::sync::lock(&self.journals);
            journals.iter().filter_map(Weak::upgrade).collect()
        };
        for journal in live {
            journal.commit();
        }
    }

    /// `count` lines were written (or dropped): their places are free again.
    pub(crate) fn release(&self, count: usize) {
        self.space.add_permits(count);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }
}

/// A journal's link to the writer that commits it (see [`crate::ClientHandle::attach_journal`]).
#[derive(Debug, Clone)]
pub struct JournalLink(Weak<Outbox>);

impl JournalLink {
    pub(crate) fn new(outbox: &Arc<Outbox>) -> Self {
        Self(Arc::downgrade(outbox))
    }

    /// Tells the writer the journal holds records to write.
    pub fn pending(&self) {
        if let Some(outbox) = self.0.upgrade() {
            outbox.journal_pending();
        }
    }
}

/// Lets the stdout writer sleep through a burst of lines: sends stop waking it (except for large
/// batches) and [`IdleSignal::idle`], called when the runtime's thread parks, wakes it once. Give it to
/// the server in [`crate::ServerConfig::idle`] and call it from `tokio::runtime::Builder::on_thread_park`.
#[derive(Debug, Clone, Default)]
pub struct IdleSignal {
    outboxes: Arc<Mutex<Vec<Weak<Outbox>>>>,
}

impl IdleSignal {
    /// The runtime's thread is about to park: every writer with work waiting is woken.
    pub fn idle(&self) {
        let outboxes = crate::sync::lock(&self.outboxes);
        for outbox in outboxes.iter().filter_map(Weak::upgrade) {
            outbox.idle();
        }
    }

    pub(crate) fn attach(&self, outbox: &Arc<Outbox>) {
        outbox.deferred.store(true, Ordering::Relaxed);
        let mut outboxes = crate::sync::lock(&self.outboxes);
        outboxes.retain(|o| o.strong_count() > 0);
        outboxes.push(Arc::downgrade(outbox));
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use futures::FutureExt;
    // Not tokio's runtime: its cooperative budget would make a poll after a thousand sends Pending.
    use futures::executor::block_on;

    use super::*;

    /// Fills the outbox to capacity without a writer draining it.
    async fn fill(outbox: &Outbox) {
        for i in 0..OUTBOX_CAPACITY {
            outbox.send(format!("line {i}")).await.unwrap();
        }
    }

    /// Stands in for a writer that waits on the condvar: the state a `take` leaves behind when it sleeps.
    fn writer_waits(outbox: &Outbox) {
        outbox.lock().writer_asleep = true;
    }

    fn writer_asleep(outbox: &Outbox) -> bool {
        outbox.lock().writer_asleep
    }

    #[test]
    fn a_full_outbox_holds_the_sender_until_the_writer_frees_a_place() {
        block_on(async {
            let outbox = Outbox::new();
            fill(&outbox).await;
            let mut next = pin!(outbox.send("one too many".into()));
            assert!(
                futures::poll!(next.as_mut()).is_pending(),
                "a send past the capacity must wait"
            );

            let mut taken = Vec::new();
            outbox.take(&mut taken);
            assert_eq!(taken.len(), OUTBOX_CAPACITY);
            // Taking the lines is not writing them: the places come back only with `release`.
            assert!(futures::poll!(next.as_mut()).is_pending());
            outbox.release(1);
            assert_eq!(futures::poll!(next.as_mut()), Poll::Ready(Ok(())));

            let mut rest = Vec::new();
            outbox.take(&mut rest);
            assert_eq!(rest, ["one too many"]);
        });
    }

    #[test]
    fn close_turns_a_waiting_sender_away_and_still_hands_out_what_is_queued() {
        block_on(async {
            let outbox = Outbox::new();
            fill(&outbox).await;
            let mut waiting = pin!(outbox.send("never queued".into()));
            assert!(futures::poll!(waiting.as_mut()).is_pending());

            outbox.close();
            assert_eq!(
                futures::poll!(waiting.as_mut()),
                Poll::Ready(Err(ConnectionClosed))
            );
            assert!(outbox.is_closed());
            // Places freed after the close do not reopen it.
            outbox.release(1);
            assert_eq!(
                outbox.send("late".into()).now_or_never(),
                Some(Err(ConnectionClosed))
            );

            let mut taken = Vec::new();
            let batch = outbox.take(&mut taken);
            assert!(batch.closed, "the writer learns this batch is the last");
            assert_eq!(taken.len(), OUTBOX_CAPACITY);
            assert_eq!(taken.first().map(String::as_str), Some("line 0"));
            assert_eq!(taken.last().map(String::as_str), Some("line 1023"));
        });
    }

    #[test]
    fn without_an_idle_signal_every_send_wakes_a_sleeping_writer() {
        block_on(async {
            let outbox = Outbox::new();
            writer_waits(&outbox);
            outbox.send("event".into()).await.unwrap();
            assert!(!writer_asleep(&outbox));
        });
    }

    #[test]
    fn with_an_idle_signal_the_writer_sleeps_until_the_runtime_goes_idle() {
        block_on(async {
            let outbox = Outbox::new();
            let idle = IdleSignal::default();
            idle.attach(&outbox);
            writer_waits(&outbox);

            for event in ["step begin", "tool call", "tool result", "step end"] {
                outbox.send(event.into()).await.unwrap();
            }
            outbox.journal_pending();
            assert!(
                writer_asleep(&outbox),
                "sends and journal records wait for the idle runtime"
            );

            idle.idle();
            assert!(!writer_asleep(&outbox), "one wake-up for the whole step");
        });
    }

    #[test]
    fn an_idle_runtime_with_nothing_queued_leaves_the_writer_asleep() {
        block_on(async {
            let outbox = Outbox::new();
            let idle = IdleSignal::default();
            idle.attach(&outbox);
            writer_waits(&outbox);
            idle.idle();
            assert!(writer_asleep(&outbox));
        });
    }

    #[test]
    fn a_large_batch_wakes_the_writer_without_waiting_for_idle() {
        block_on(async {
            let outbox = Outbox::new();
            IdleSignal::default().attach(&outbox);
            writer_waits(&outbox);
            for i in 1..WAKE_BATCH {
                outbox.send(format!("part {i}")).await.unwrap();
            }
            assert!(
                writer_asleep(&outbox),
                "{} lines are below the batch",
                WAKE_BATCH - 1
            );
            outbox.send("the batch's last part".into()).await.unwrap();
            assert!(
                !writer_asleep(&outbox),
                "the {WAKE_BATCH}th line wakes the writer"
            );
        });
    }

    #[test]
    fn a_writer_blocked_in_take_is_woken_by_the_idle_signal() {
        let outbox = Outbox::new();
        let idle = IdleSignal::default();
        idle.attach(&outbox);
        let writer = {
            let outbox = Arc::clone(&outbox);
            std::thread::spawn(move || {
                let mut taken = Vec::new();
                outbox.take(&mut taken);
                taken
            })
        };
        // The writer sets the flag under the lock just before it waits on the condvar.
        while !writer_asleep(&outbox) {
            std::thread::yield_now();
        }
        block_on(outbox.send("event".into())).unwrap();
        assert!(writer_asleep(&outbox), "the send did not notify the writer");
        idle.idle();
        assert_eq!(writer.join().unwrap(), ["event"]);
    }

    #[test]
    fn a_dropped_outbox_or_journal_link_is_a_no_op() {
        let outbox = Outbox::new();
        let link = JournalLink::new(&outbox);
        let idle = IdleSignal::default();
        idle.attach(&outbox);
        drop(outbox);
        link.pending();
        idle.idle();
    }
}
