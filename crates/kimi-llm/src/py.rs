//! Small reproductions of Python built-ins whose output ends up in
//! interface strings (error messages clients match on).
//!
//! Only what the echo DSL and script loading need: `repr()` of strings and of
//! JSON values, `str.strip()`/`split()`/`splitlines()` with Python's notion of
//! whitespace, `int(str)`, `bool()` of JSON values, and `json.dumps` ([`dumps`]).
//! Known gaps, each deliberate: [`py_repr`] decides printability from a table
//! of the common non-printable ranges rather than the full Unicode database
//! (unassigned code points print raw), and [`parse_int`] accepts ASCII digits
//! only where Python also accepts other Unicode decimal digits.

use std::fmt::Write as _;

use serde_json::Value;

/// Python's `repr()` of a `str`.
///
/// Single quotes unless the text contains `'` and no `"`; backslash, the
/// chosen quote, `\t`, `\n` and `\r` are escaped; other non-printable
/// characters become `\xNN`, `\uNNNN` or `\UNNNNNNNN`.
///
/// ```
/// assert_eq!(kimi_llm::py_repr("bad line"), "'bad line'");
/// assert_eq!(kimi_llm::py_repr("it's"), "\"it's\"");
/// assert_eq!(kimi_llm::py_repr("a\tb\\"), "'a\\tb\\\\'");
/// ```
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let code = u32::from(c);
                // Writing to a String cannot fail.
                let _ = if code < 0x100 {
                    write!(out, "\\x{code:02x}")
                } else if code < 0x10000 {
                    write!(out, "\\u{code:04x}")
                } else {
                    write!(out, "\\U{code:08x}")
                };
            }
        }
    }
    out.push(quote);
    out
}

/// Python's `str.isprintable()` for one character, from the categories it
/// excludes (Cc, Cf, Co, Zl, Zp and Zs other than the space); see the module
/// doc for the approximation.
fn is_printable(c: char) -> bool {
    let code = u32::from(c);
    if c == ' ' {
        return true;
    }
    if code < 0x20 || (0x7f..=0xa0).contains(&code) {
        return false;
    }
    if code < 0x100 {
        return code != 0xad;
    }
    const NON_PRINTABLE: &[(u32, u32)] = &[
        (0x0600, 0x0605),
        (0x061c, 0x061c),
        (0x06dd, 0x06dd),
        (0x070f, 0x070f),
        (0x0890, 0x0891),
        (0x08e2, 0x08e2),
        (0x1680, 0x1680),
        (0x180e, 0x180e),
        (0x2000, 0x200f),
        (0x2028, 0x202f),
        (0x205f, 0x2064),
        (0x2066, 0x206f),
        (0x3000, 0x3000),
        (0xd800, 0xf8ff),
        (0xfdd0, 0xfdef),
        (0xfeff, 0xfeff),
        (0xfff9, 0xfffb),
        (0xfffe, 0xffff),
        (0x110bd, 0x110bd),
        (0x110cd, 0x110cd),
        (0x13430, 0x1343f),
        (0x1bca0, 0x1bca3),
        (0x1d173, 0x1d17a),
        (0xe0000, 0xe00ff),
        (0xe01f0, 0xe0fff),
        (0xf0000, 0x10ffff),
    ];
    if code & 0xfffe == 0xfffe {
        return false;
    }
    !NON_PRINTABLE.iter().any(|&(lo, hi)| (lo..=hi).contains(&code))
}

/// Python's `str.isspace()` for one character.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()` without arguments.
pub(crate) fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// Python's `str.split()` without arguments.
pub(crate) fn split_whitespace(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_space).filter(|token| !token.is_empty())
}

/// Python's `str.splitlines()`: splits on every line boundary Python knows
/// (`\r\n` counts once) and drops a trailing empty line.
pub fn splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let boundary = matches!(
            c,
            '\n' | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        );
        if !boundary {
            continue;
        }
        lines.push(&s[start..i]);
        let mut end = i + c.len_utf8();
        if c == '\r'
            && let Some(&(j, '\n')) = chars.peek()
        {
            end = j + 1;
            chars.next();
        }
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// Python's `int(str)` in base 10: surrounding whitespace, an optional sign,
/// and `_` between digits are accepted. Values beyond `i128` saturate.
pub(crate) fn parse_int(s: &str) -> Option<i128> {
    let s = strip(s);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut value: i128 = 0;
    for b in digits.bytes() {
        match b {
            b'_' => {}
            b'0'..=b'9' => {
                let digit = i128::from(b - b'0');
                value = value.saturating_mul(10).saturating_add(digit);
            }
            _ => return None,
        }
    }
    Some(if negative { -value } else { value })
}

/// Python's `repr()` of a `float`: the shortest round-tripping digits, in
/// scientific form when the decimal exponent is below -4 or at least 16.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits as `d.ddde[-]x`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..16).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{exp_sign}{:02}", exp.abs());
    }
    if exp >= 0 {
        let int_len = usize::try_from(exp).unwrap_or(0) + 1;
        if digits.len() <= int_len {
            let zeros = "0".repeat(int_len - digits.len());
            format!("{sign}{digits}{zeros}.0")
        } else {
            let (int_part, frac) = digits.split_at(int_len);
            format!("{sign}{int_part}.{frac}")
        }
    } else {
        let zeros = "0".repeat(usize::try_from(-exp - 1).unwrap_or(0));
        format!("{sign}0.{zeros}{digits}")
    }
}

fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if !(n.is_i64() || n.is_u64()) => float_repr(f),
        _ => n.to_string(),
    }
}

/// Python's `repr()` of the value `json.loads` would have produced.
pub(crate) fn repr_json(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => number_text(n),
        Value::String(s) => py_repr(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(repr_json).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", py_repr(k), repr_json(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// The Python type name (`type(x).__name__`) of a JSON-loaded value.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's truthiness of a JSON-loaded value (`bool(value)`).
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// How Python's `json.dumps` is called. The one JSON writer for text the reference builds with
/// `json.dumps` (interface strings, tool outputs) and for the canonical keys calls are compared by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dumps {
    /// `", "` and `": "` between items and after keys (Python's default), rather than `","` and `":"`.
    pub spaced: bool,
    /// Every non-ASCII character as `\uXXXX` (Python's default `ensure_ascii=True`), rather than as it is.
    pub ensure_ascii: bool,
    /// Object keys in sorted order (`sort_keys=True`), rather than in their order.
    pub sort_keys: bool,
}

impl Dumps {
    /// `json.dumps(value)`.
    pub const DEFAULT: Self = Self {
        spaced: true,
        ensure_ascii: true,
        sort_keys: false,
    };
    /// `json.dumps(value, separators=(",", ":"))`.
    pub const COMPACT: Self = Self {
        spaced: false,
        ..Self::DEFAULT
    };
    /// `json.dumps(value, ensure_ascii=False)`.
    pub const UNICODE: Self = Self {
        ensure_ascii: false,
        ..Self::DEFAULT
    };
    /// Compact, sorted keys, non-ASCII kept: one text per value whatever its key order and spacing.
    pub const CANONICAL: Self = Self {
        spaced: false,
        ensure_ascii: false,
        sort_keys: true,
    };
}

/// `value` as Python's `json.dumps` writes it with the options `how`; floats as Python prints them.
pub fn dumps(value: &Value, how: Dumps) -> String {
    let mut out = String::new();
    dump_into(value, how, &mut out);
    out
}

/// Python's `json.dumps(value, separators=(",", ":"))`: compact, with every non-ASCII character
/// escaped as `\uXXXX` (`ensure_ascii`).
pub(crate) fn dumps_compact(value: &Value) -> String {
    dumps(value, Dumps::COMPACT)
}

fn dump_into(value: &Value, how: Dumps, out: &mut String) {
    let (item_sep, key_sep) = if how.spaced { (", ", ": ") } else { (",", ":") };
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_text(n)),
        Value::String(s) => dump_str(s, how.ensure_ascii, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                dump_into(item, how, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if how.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                dump_str(k, how.ensure_ascii, out);
                out.push_str(key_sep);
                dump_into(v, how, out);
            }
            out.push('}');
        }
    }
}

fn dump_str(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c if !ensure_ascii && u32::from(c) >= 0x20 => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn repr_of_strings() {
        let cases = [
            ("bad line without colon", "'bad line without colon'"),
            ("", "''"),
            ("it's", "\"it's\""),
            ("both ' and \"", "'both \\' and \"'"),
            ("say \"hi\"", "'say \"hi\"'"),
            ("tab\there", "'tab\\there'"),
            ("nl\ncr\r", "'nl\\ncr\\r'"),
            ("back\\slash", "'back\\\\slash'"),
            ("\u{0}\u{7f}\u{1b}", "'\\x00\\x7f\\x1b'"),
            ("nb\u{a0}sp", "'nb\\xa0sp'"),
            ("zw\u{200b}", "'zw\\u200b'"),
            ("héllo 你好 🎉", "'héllo 你好 🎉'"),
            ("ls\u{2028}", "'ls\\u2028'"),
            ("priv\u{f0000}", "'priv\\U000f0000'"),
        ];
        for (input, expected) in cases {
            assert_eq!(py_repr(input), expected, "{input:?}");
        }
    }

    #[test]
    fn float_reprs() {
        let cases = [
            (1.0, "1.0"),
            (1.5, "1.5"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e300, "1.2345e+300"),
            (-2.5, "-2.5"),
            (123.456, "123.456"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
        ];
        for (input, expected) in cases {
            assert_eq!(float_repr(input), expected, "{input}");
        }
    }

    #[test]
    fn dumps_spaces_escapes_and_sorts_as_asked() {
        let value =
            json!({"b": {"Which?": "Alpha, Beta", "中文": "是"}, "a": [1, 1.5, "x\n\u{1}", null], "c": {}});
        assert_eq!(
            dumps(&value, Dumps::UNICODE),
            r#"{"b": {"Which?": "Alpha, Beta", "中文": "是"}, "a": [1, 1.5, "x\n\u0001", null], "c": {}}"#
        );
        assert_eq!(
            dumps(&value, Dumps::DEFAULT),
            r#"{"b": {"Which?": "Alpha, Beta", "\u4e2d\u6587": "\u662f"}, "a": [1, 1.5, "x\n\u0001", null], "c": {}}"#
        );
        assert_eq!(
            dumps(&value, Dumps::CANONICAL),
            r#"{"a":[1,1.5,"x\n\u0001",null],"b":{"Which?":"Alpha, Beta","中文":"是"},"c":{}}"#
        );
    }

    #[test]
    fn json_repr_and_dumps() {
        let value = json!({"a": [1, 2.0, true, null], "b": "x'y", "c": {}});
        assert_eq!(
            repr_json(&value),
            "{'a': [1, 2.0, True, None], 'b': \"x'y\", 'c': {}}"
        );
        let value = json!({"q": "é\"\n", "n": [1, 1.5], "e": "🎉"});
        assert_eq!(
            dumps_compact(&value),
            r#"{"q":"\u00e9\"\n","n":[1,1.5],"e":"\ud83c\udf89"}"#
        );
    }

    #[test]
    fn ints_and_lines() {
        assert_eq!(parse_int(" 401 "), Some(401));
        assert_eq!(parse_int("+0401"), Some(401));
        assert_eq!(parse_int("-5"), Some(-5));
        assert_eq!(parse_int("1_000"), Some(1000));
        for bad in ["", "1.5", "_1", "1_", "1__0", "abc", "+", "4 01"] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
        assert_eq!(splitlines("a\r\nb\rc\nd\u{2028}e\n"), ["a", "b", "c", "d", "e"]);
        assert_eq!(splitlines("\n"), [""]);
        assert_eq!(splitlines(""), Vec::<&str>::new());
        assert_eq!(strip("\u{1f} x \u{a0}"), "x");
    }
}
