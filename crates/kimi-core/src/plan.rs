//! Plan mode's plan file: where it lives and which session it belongs to.
//!
//! As in the reference, plans live under the user's home, not the share dir: `~/.kimi/plans/<slug>.md`,
//! with a slug chosen once per plan session and kept in `state.json` (`plan_slug`) so a resumed session
//! finds its plan again. Our slugs are our own three-word names. Plans are the agent's own files: the
//! directory is created 0700 and plan files 0600 (`private_files`), as everything under the share dir.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Plan mode's switch and its plan session, shared by the loop (which restricts writes), the
/// `set_plan_mode` method and the EnterPlanMode / ExitPlanMode tools.
///
/// As the reference: turning it on starts a plan session (a slug, so a plan file) unless one exists;
/// turning it off ends the session, so the next plan gets a new file. Turning it on also creates the
/// plans directory (the plan file's parent must exist for WriteFile) and leaves a note for the model's
/// reminders ([`PlanMode::take_entered`]).
#[derive(Debug)]
pub struct PlanMode {
    enabled: AtomicBool,
    slug: Mutex<Option<String>>,
    dir: PathBuf,
    /// Plan mode was turned on (or found on at start) and the model has not been told yet.
    entered: AtomicBool,
}

impl PlanMode {
    /// Plan mode as restored (`enabled`, `slug` from state.json), with plans in `dir`.
    pub fn new(enabled: bool, slug: Option<String>, dir: PathBuf) -> Self {
        let plan = Self {
            enabled: AtomicBool::new(false),
            slug: Mutex::new(slug),
            dir,
            entered: AtomicBool::new(false),
        };
        if enabled {
            plan.set(true);
        }
        plan
    }

    /// Is plan mode on?
    pub fn is_on(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    /// Turns plan mode on or off; returns whether that changed anything.
    pub fn set(&self, enabled: bool) -> bool {
        let mut slug = self.lock_slug();
        if enabled {
            slug.get_or_insert_with(|| new_slug(&self.dir));
        } else {
            *slug = None;
        }
        let changed = self.enabled.swap(enabled, Ordering::SeqCst) != enabled;
        if changed && enabled {
            if let Err(e) = crate::private_files::create_dir_all(&self.dir) {
                tracing::warn!(dir = %self.dir.display(), error = %e, "plans directory not created");
            }
            self.entered.store(true, Ordering::SeqCst);
        }
        changed
    }

    /// Whether plan mode was turned on (or was on at start) since the last call: the model is then
    /// told, once, that it is in plan mode and where its plan file is.
    pub fn take_entered(&self) -> bool {
        self.entered.swap(false, Ordering::SeqCst)
    }

    /// The current plan session's slug (state.json `plan_slug`).
    pub fn slug(&self) -> Option<String> {
        self.lock_slug().clone()
    }

    /// The plan file of the current plan session, if there is one.
    pub fn file(&self) -> Option<PathBuf> {
        self.lock_slug().as_deref().map(|slug| plan_file(&self.dir, slug))
    }

    /// The only file writes may touch, while plan mode is on.
    pub fn active_file(&self) -> Option<PathBuf> {
        if self.is_on() { self.file() } else { None }
    }

    fn lock_slug(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        crate::sync::lock(&self.slug)
    }
}

/// Words slugs are made of (ours): short, distinct, easy to read in a path.
const WORDS: &[&str] = &[
    "amber", "birch", "cedar", "delta", "ember", "fjord", "glade", "harbor", "island", "juniper", "kestrel",
    "lagoon", "meadow", "nimbus", "orchid", "pebble", "quartz", "ridge", "summit", "tundra", "umber",
    "valley", "willow", "yarrow", "zephyr", "canyon", "dune", "grove", "heron", "lichen", "marsh", "otter",
];

/// The directory plans are written to: `$HOME/.kimi/plans`.
pub fn plans_dir() -> PathBuf {
    crate::paths::home_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".kimi")
        .join("plans")
}

/// The plan file for `slug`.
pub fn plan_file(dir: &Path, slug: &str) -> PathBuf {
    dir.join(format!("{slug}.md"))
}

/// A fresh slug that names no existing plan in `dir`.
pub fn new_slug(dir: &Path) -> String {
    let seed = uuid::Uuid::new_v4().as_u128();
    for attempt in 0..20u128 {
        let n = seed.rotate_left((attempt * 13) as u32);
        let pick = |shift: u32| WORDS[((n >> shift) as usize) % WORDS.len()];
        let slug = format!("{}-{}-{}", pick(0), pick(16), pick(32));
        if !plan_file(dir, &slug).exists() {
            return slug;
        }
    }
    format!("plan-{}", uuid::Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_three_words_and_avoid_existing_plans() {
        let dir = tempfile::tempdir().unwrap();
        let slug = new_slug(dir.path());
        assert_eq!(slug.split('-').count(), 3);
        std::fs::write(plan_file(dir.path(), &slug), "x").unwrap();
        assert_ne!(new_slug(dir.path()), slug);
    }

    #[test]
    fn turning_on_starts_a_plan_session_and_off_ends_it() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().join("plans");
        let plan = PlanMode::new(false, None, dir.clone());
        assert_eq!(
            (plan.is_on(), plan.file(), plan.active_file()),
            (false, None, None)
        );
        assert!(!plan.take_entered());
        assert!(plan.set(true));
        assert!(dir.is_dir(), "the plans directory exists for the plan file");
        assert!(plan.take_entered(), "the model is to be told");
        assert!(!plan.take_entered(), "once");
        assert!(!plan.set(true), "already on");
        assert!(!plan.take_entered(), "nothing changed");
        let file = plan.active_file().unwrap();
        assert_eq!(file.parent(), Some(dir.as_path()));
        assert_eq!(plan.file(), Some(file));
        assert!(plan.set(false));
        assert_eq!(
            (plan.is_on(), plan.slug(), plan.active_file()),
            (false, None, None)
        );
    }

    #[test]
    fn a_restored_session_keeps_its_slug() {
        let dir = tempfile::tempdir().unwrap();
        let plan = PlanMode::new(true, Some("amber-birch-cedar".into()), dir.path().to_path_buf());
        assert!(plan.is_on());
        assert!(
            plan.take_entered(),
            "a restarted session in plan mode is told so again"
        );
        assert_eq!(plan.active_file(), Some(dir.path().join("amber-birch-cedar.md")));
    }
}
