//! Plan mode's plan file: where it lives and which session it belongs to.
//!
//! As in the reference, plans live under the user's home, not the share dir: `~/.kimi/plans/<slug>.md`,
//! with a slug chosen once per plan session and kept in `state.json` (`plan_slug`) so a resumed session
//! finds its plan again. Our slugs are our own three-word names.

use std::path::{Path, PathBuf};

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
}
