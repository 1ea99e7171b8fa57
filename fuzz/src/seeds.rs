//! Replaying committed seeds (and, on request, a local fuzzing corpus) through a check, for the stable
//! tests that include this file by path.

use std::path::Path;

/// Runs `check` on every file in `fuzz/seeds/<target>/`, and in `fuzz/corpus/<target>/` when
/// `KIMI_FUZZ_CORPUS` is set (after a local fuzzing run). `fuzz_dir` is the `fuzz/` directory.
/// Returns how many inputs were checked; a panic names the input.
pub fn replay(fuzz_dir: &Path, target: &str, check: impl Fn(&[u8])) -> usize {
    let mut dirs = vec![fuzz_dir.join("seeds").join(target)];
    if std::env::var_os("KIMI_FUZZ_CORPUS").is_some() {
        dirs.push(fuzz_dir.join("corpus").join(target));
    }
    let mut checked = 0;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&data)));
            if let Err(panic) = outcome {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                panic!("{target} fails on {}: {message}", path.display());
            }
            checked += 1;
        }
    }
    checked
}
