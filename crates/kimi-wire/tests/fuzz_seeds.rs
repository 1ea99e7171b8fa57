//! The fuzz targets' checks of the line reader and the dispatcher, replayed on the committed seeds
//! (`fuzz/seeds/`), so the properties hold on stable and in CI too. See docs/fuzzing.md.

#[path = "../../../fuzz/src/seeds.rs"]
mod seeds;
#[path = "../../../fuzz/src/wire.rs"]
mod wire;

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

#[test]
fn line_reader_seeds_keep_the_framing_properties() {
    let checked = seeds::replay(&fuzz_dir(), "line_reader", wire::check_line_reader);
    eprintln!("line_reader: {checked} inputs");
    assert!(checked > 0, "no seeds found");
}

#[test]
fn wire_dispatch_seeds_are_answered_as_the_reference_does() {
    let checked = seeds::replay(&fuzz_dir(), "wire_dispatch", wire::check_dispatch);
    eprintln!("wire_dispatch: {checked} inputs");
    assert!(checked > 0, "no seeds found");
}
