//! The poison-tolerant lock helpers, from the lowest crate so every crate takes its locks the same way.

pub use kimi_wire::sync::{into_inner, lock, read, wait, write};
