//! The checks behind the fuzz targets. Each module is also included by path in a stable test of the crate
//! it checks, which replays the committed seeds in `fuzz/seeds/` (see docs/fuzzing.md).

pub mod echo;
pub mod files;
pub mod seeds;
pub mod wire;
