//! JSON text as Python's `json.dumps(..., ensure_ascii=False)` writes it: `", "` between items and
//! `": "` after keys. Tool outputs the reference builds with `json.dumps` keep that spacing, so models
//! and tests see the same text.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

/// Serializes `value` with Python's default separators; non-ASCII text is written as is.
pub fn to_python_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    value.serialize(&mut serializer)?;
    // serde_json writes only valid UTF-8.
    Ok(String::from_utf8_lossy(&out).into_owned())
}

struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spacing_matches_python() {
        let value = json!({"answers": {"Which?": "Alpha, Beta", "中文": "是"}, "list": [1, "a\n", null], "empty": {}});
        assert_eq!(
            to_python_json(&value).unwrap(),
            r#"{"answers": {"Which?": "Alpha, Beta", "中文": "是"}, "list": [1, "a\n", null], "empty": {}}"#
        );
    }
}
