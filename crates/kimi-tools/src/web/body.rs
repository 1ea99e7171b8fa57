//! A response body: read under a size cap, classified by its content type, decoded to text.
//!
//! The reference reads any body whole and decodes it as text whatever it is; an image or a PDF then
//! comes back as "no content extracted" at best. We read at most [`WebLimits::max_body_bytes`]
//! (`super::WebLimits`), say plainly when a response is not text, and decode with the charset the
//! server or the page declares.

use std::fmt;

use encoding_rs::{Encoding, UTF_8};

use super::Failure;

/// Bytes looked at when the content type has to be guessed, and when an HTML page's `<meta charset>`
/// is searched for (the HTML standard's prescan also stops at 1024).
const SNIFF_BYTES: usize = 1024;

/// What a response holds, as far as FetchURL cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    /// An HTML page: its main content is extracted.
    Html,
    /// Text that is passed through as it is (plain text, Markdown, JSON, XML, source code...).
    Text,
    /// Not text; the content type as the server gave it (or what we found when it gave none).
    NotText(String),
}

/// The `Content-Type` header, split into its type and its charset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ContentType {
    /// `type/subtype`, lowercased; empty when the header is missing.
    pub essence: String,
    /// The `charset` parameter, when given.
    pub charset: Option<String>,
}

impl ContentType {
    /// Parses a header value such as `text/html; charset=UTF-8`.
    pub fn parse(header: Option<&str>) -> Self {
        let Some(header) = header else {
            return Self::default();
        };
        let mut parts = header.split(';');
        let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let charset = parts.find_map(|param| {
            let (name, value) = param.split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("charset")
                .then(|| value.trim().trim_matches(['"', '\'']).to_owned())
                .filter(|v| !v.is_empty())
        });
        Self { essence, charset }
    }

    /// What the type alone says the body holds; `None` when only the bytes can tell (no type, or a
    /// generic binary stream, which servers often send for text files).
    pub fn declared(&self) -> Option<Kind> {
        let essence = self.essence.as_str();
        if matches!(essence, "text/html" | "application/xhtml+xml") {
            Some(Kind::Html)
        } else if is_textual(essence) {
            Some(Kind::Text)
        } else if essence.is_empty() || essence == "application/octet-stream" {
            None
        } else {
            Some(Kind::NotText(essence.to_owned()))
        }
    }

    /// What a body of this type holds; `head` (its first bytes) decides when the type says too little.
    pub fn kind(&self, head: &[u8]) -> Kind {
        self.declared().unwrap_or_else(|| {
            sniff(head).unwrap_or_else(|| {
                Kind::NotText(if self.essence.is_empty() {
                    "none, and the body looks binary".to_owned()
                } else {
                    self.essence.clone()
                })
            })
        })
    }
}

/// Types that are text even though they are not `text/*`.
fn is_textual(essence: &str) -> bool {
    let Some((top, sub)) = essence.split_once('/') else {
        return false;
    };
    top == "text"
        || (top == "application"
            && (matches!(
                sub,
                "json"
                    | "xml"
                    | "javascript"
                    | "ecmascript"
                    | "x-javascript"
                    | "yaml"
                    | "x-yaml"
                    | "toml"
                    | "x-sh"
                    | "x-httpd-php"
                    | "sql"
                    | "graphql"
                    | "x-ndjson"
            ) || sub.ends_with("+json")
                || sub.ends_with("+xml")))
}

/// Guesses from the first bytes: NUL bytes or invalid UTF-8 mean binary; markup that opens an HTML
/// document means HTML; anything else is text.
fn sniff(head: &[u8]) -> Option<Kind> {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    if head.contains(&0) {
        return None;
    }
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // A multi-byte character cut by the sniff window is still text.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&head[..e.valid_up_to()]).ok()?,
        Err(_) => return None,
    };
    let start = text
        .trim_start_matches('\u{feff}')
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") || start.contains("<body") {
        Some(Kind::Html)
    } else {
        Some(Kind::Text)
    }
}

/// Decodes `bytes`: a byte-order mark wins, then the header's charset, then (for HTML) a charset the
/// page declares in its first 1024 bytes, then UTF-8. Undecodable bytes become U+FFFD.
pub(super) fn decode(bytes: &[u8], content_type: &ContentType, html: bool) -> String {
    let declared = content_type
        .charset
        .as_deref()
        .and_then(|label| Encoding::for_label(label.as_bytes()))
        .or_else(|| html.then(|| meta_charset(bytes)).flatten());
    let (text, _, _) = declared.unwrap_or(UTF_8).decode(bytes);
    text.into_owned()
}

/// The encoding named by `charset=` in the first 1024 bytes (`<meta charset="...">` or the
/// `http-equiv` form). A simplification of the HTML standard's prescan, which is enough in practice.
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = bytes[..bytes.len().min(SNIFF_BYTES)].to_ascii_lowercase();
    let at = head.windows(8).position(|w| w == b"charset=")?;
    let rest = &head[at + 8..];
    let rest = rest
        .strip_prefix(b"\"")
        .or_else(|| rest.strip_prefix(b"'"))
        .unwrap_or(rest);
    let end = rest
        .iter()
        .position(|b| matches!(b, b'"' | b'\'' | b';' | b'>' | b'/') || b.is_ascii_whitespace())
        .unwrap_or(rest.len());
    let encoding = Encoding::for_label(&rest[..end])?;
    // Reference (HTML standard): a page cannot declare UTF-16 in ASCII-compatible bytes.
    Some(
        if encoding == encoding_rs::UTF_16LE || encoding == encoding_rs::UTF_16BE {
            UTF_8
        } else {
            encoding
        },
    )
}

/// Why a body was not read whole.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The body is larger than the cap (declared or found while reading).
    TooLarge,
    /// The connection failed or timed out while reading.
    Failed(Failure),
}

/// Reads the whole body, refusing one longer than `max_bytes` (before reading, when the server declares
/// its length; else as soon as the cap is passed).
pub(super) async fn read_capped(
    mut response: reqwest::Response,
    max_bytes: u64,
) -> Result<Vec<u8>, ReadError> {
    if response.content_length().is_some_and(|n| n > max_bytes) {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| ReadError::Failed(e.into()))? {
        if (body.len() + chunk.len()) as u64 > max_bytes {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A byte count for people: `10 MiB`, `512 KiB`, `1000 bytes`.
pub(super) struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * 1024;
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{} MiB", n / MIB),
            n if n >= KIB && n % KIB == 0 => write!(f, "{} KiB", n / KIB),
            n => write!(f, "{n} bytes"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn kind(header: Option<&str>, head: &[u8]) -> Kind {
        ContentType::parse(header).kind(head)
    }

    #[test]
    fn content_types_are_parsed() {
        assert_eq!(
            ContentType::parse(Some("Text/HTML; Charset=\"ISO-8859-1\"")),
            ContentType {
                essence: "text/html".into(),
                charset: Some("ISO-8859-1".into())
            }
        );
        assert_eq!(ContentType::parse(None), ContentType::default());
        assert_eq!(ContentType::parse(Some("text/plain; charset=")).charset, None);
    }

    #[test]
    fn kinds_follow_the_type_then_the_bytes() {
        assert_eq!(kind(Some("text/html; charset=utf-8"), b""), Kind::Html);
        assert_eq!(ContentType::parse(None).declared(), None);
        assert_eq!(
            ContentType::parse(Some("application/octet-stream")).declared(),
            None
        );
        assert_eq!(
            ContentType::parse(Some("video/mp4")).declared(),
            Some(Kind::NotText("video/mp4".into()))
        );
        assert_eq!(kind(Some("application/xhtml+xml"), b""), Kind::Html);
        for text in [
            "text/plain",
            "text/markdown",
            "text/csv",
            "application/json",
            "application/problem+json",
            "application/rss+xml",
            "application/javascript",
        ] {
            assert_eq!(kind(Some(text), b"\x00"), Kind::Text, "{text}");
        }
        assert_eq!(kind(Some("image/png"), b"abc"), Kind::NotText("image/png".into()));
        assert_eq!(
            kind(Some("application/pdf"), b"%PDF"),
            Kind::NotText("application/pdf".into())
        );
        // No type, or a generic one: the bytes decide.
        assert_eq!(kind(None, b"  <!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(kind(None, b"<html><body>hi"), Kind::Html);
        assert_eq!(kind(None, b"just words"), Kind::Text);
        assert_eq!(
            kind(Some("application/octet-stream"), b"fn main() {}"),
            Kind::Text
        );
        assert_eq!(
            kind(None, b"\x89PNG\r\n\x1a\n\x00\x00"),
            Kind::NotText("none, and the body looks binary".into())
        );
        assert_eq!(
            kind(Some("application/octet-stream"), b"\xff\xfe\xfa"),
            Kind::NotText("application/octet-stream".into())
        );
        // A character cut at the end of the sniff window does not make text binary.
        let mut cut = vec![b'a'; SNIFF_BYTES - 1];
        cut.extend("é".as_bytes());
        assert_eq!(kind(None, &cut), Kind::Text);
    }

    #[test]
    fn decoding_uses_the_declared_charset() {
        let latin1 = b"caf\xe9";
        let declared = ContentType::parse(Some("text/plain; charset=iso-8859-1"));
        assert_eq!(decode(latin1, &declared, false), "café");
        // Undeclared: UTF-8, with replacement characters.
        assert_eq!(decode(latin1, &ContentType::default(), false), "caf\u{fffd}");
        // An HTML page may declare its own.
        let gbk = [b"<meta charset=\"gbk\"><p>".as_slice(), &[0xc4, 0xe3, 0xba, 0xc3]].concat();
        assert_eq!(
            decode(&gbk, &ContentType::default(), true),
            "<meta charset=\"gbk\"><p>你好"
        );
        let equiv = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\">\x93";
        assert!(decode(equiv, &ContentType::default(), true).ends_with('\u{201c}'));
        // ... but the header wins, and a byte-order mark wins over both.
        let header = ContentType::parse(Some("text/html; charset=utf-8"));
        assert!(decode(&gbk, &header, true).ends_with('\u{fffd}'));
        let bom = [&[0xef, 0xbb, 0xbf][..], "ok".as_bytes()].concat();
        assert_eq!(decode(&bom, &declared, false), "ok");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(Size(10 * 1024 * 1024).to_string(), "10 MiB");
        assert_eq!(Size(4096).to_string(), "4 KiB");
        assert_eq!(Size(1000).to_string(), "1000 bytes");
    }
}
