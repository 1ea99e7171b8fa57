//! Media parts (`image_url`, `audio_url`, `video_url`) as the native APIs want them: inline base64
//! with its media type, or a remote URL.

use kimi_wire::message::ContentPart;

/// Where a media part's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MediaSource<'a> {
    /// A `data:<media type>;base64,<data>` URI.
    Inline {
        /// The media type, e.g. `image/png`.
        media_type: &'a str,
        /// The base64 payload.
        data: &'a str,
    },
    /// Any other URL, passed on as it is.
    Remote(&'a str),
}

impl<'a> MediaSource<'a> {
    /// Reads `url`; a `data:` URI without a `;base64,` payload is refused with the reference's text
    /// (`Invalid data URL for <kind>: ...`, shortened to its head).
    pub(crate) fn parse(url: &'a str, kind: &str) -> Result<Self, String> {
        let Some(rest) = url.strip_prefix("data:") else {
            return Ok(Self::Remote(url));
        };
        match rest.split_once(";base64,") {
            Some((media_type, data)) => Ok(Self::Inline { media_type, data }),
            None => Err(format!("Invalid data URL for {kind}: {}", head(url))),
        }
    }
}

/// The start of a URL, for error messages (a data URI can be megabytes).
pub(crate) fn head(url: &str) -> String {
    const MAX: usize = 64;
    match url.char_indices().nth(MAX) {
        Some((end, _)) => format!("{}...", &url[..end]),
        None => url.to_owned(),
    }
}

/// The URL of a media part, with the kind the reference names it by in errors.
pub(crate) fn media_url(part: &ContentPart) -> Option<(&str, &'static str)> {
    match part {
        ContentPart::ImageUrl(p) => Some((p.image_url.url.as_str(), "image")),
        ContentPart::AudioUrl(p) => Some((p.audio_url.url.as_str(), "audio")),
        ContentPart::VideoUrl(p) => Some((p.video_url.url.as_str(), "video")),
        ContentPart::Text(_) | ContentPart::Think(_) => None,
    }
}

/// A media type guessed from a URL's extension, for APIs that want one beside a remote URL.
pub(crate) fn guess_media_type(url: &str, kind: &str) -> &'static str {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("mp4") => "video/mp4",
        Some("mov") => "video/quicktime",
        Some("webm") => "video/webm",
        Some("mp3") => "audio/mp3",
        Some("wav") => "audio/wav",
        Some("ogg") => "audio/ogg",
        Some("flac") => "audio/flac",
        // Reference defaults: an unknown image is PNG, an unknown audio clip MP3.
        _ => match kind {
            "audio" => "audio/mp3",
            "video" => "video/mp4",
            _ => "image/png",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_and_remote_urls() {
        assert_eq!(
            MediaSource::parse("data:image/png;base64,AAA=", "image"),
            Ok(MediaSource::Inline {
                media_type: "image/png",
                data: "AAA="
            })
        );
        assert_eq!(
            MediaSource::parse("https://x/y.png", "image"),
            Ok(MediaSource::Remote("https://x/y.png"))
        );
        assert_eq!(
            MediaSource::parse("data:image/png,plain", "image"),
            Err("Invalid data URL for image: data:image/png,plain".to_owned())
        );
        assert_eq!(guess_media_type("https://x/a.JPG?s=1", "image"), "image/jpeg");
        assert_eq!(guess_media_type("https://x/a", "video"), "video/mp4");
    }
}
