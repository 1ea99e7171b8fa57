//! The configuration and agent-file fuzz targets' checks, replayed on the committed seeds
//! (`fuzz/seeds/config_text`, `fuzz/seeds/agent_file`).

#[path = "../../../fuzz/src/files.rs"]
mod files;
#[path = "../../../fuzz/src/seeds.rs"]
mod seeds;

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

#[test]
fn config_seeds_parse_without_panicking() {
    let checked = seeds::replay(&fuzz_dir(), "config_text", files::check_config);
    eprintln!("config_text: {checked} inputs");
    assert!(checked > 0, "no seeds found");
}

#[test]
fn agent_file_seeds_parse_without_panicking() {
    let checked = seeds::replay(&fuzz_dir(), "agent_file", files::check_agent_file);
    eprintln!("agent_file: {checked} inputs");
    assert!(checked > 0, "no seeds found");
}
