//! The echo DSL fuzz target's check, replayed on the committed seeds (`fuzz/seeds/echo_dsl`).

#[path = "../../../fuzz/src/echo.rs"]
mod echo;
#[path = "../../../fuzz/src/seeds.rs"]
mod seeds;

use std::path::Path;

#[test]
fn echo_dsl_seeds_parse_without_panicking() {
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let checked = seeds::replay(&fuzz_dir, "echo_dsl", echo::check_script);
    eprintln!("echo_dsl: {checked} inputs");
    assert!(checked > 0, "no seeds found");
}
