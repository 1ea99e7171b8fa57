//! Content parts (text, thinking, media) and the user input that carries them.
//!
//! Reference: kosong's `ContentPart` registry. The discriminator is the `type` key; a `type` that no
//! part claims is a validation error (the server answers -32602), unlike display blocks, which keep
//! unknown kinds.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// One piece of message content: text, model reasoning, or a reference to an image, audio clip or
/// video. On the wire every content part travels as the event type `ContentPart`; its own `type` key
/// says which kind it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(tag = "type")]
pub enum ContentPart {
    /// Plain text.
    #[serde(rename = "text")]
    Text(TextPart),
    /// Model reasoning ("thinking") text.
    #[serde(rename = "think")]
    Think(ThinkPart),
    /// An image, by URL or data URI.
    #[serde(rename = "image_url")]
    ImageUrl(ImageUrlPart),
    /// An audio clip, by URL or data URI.
    #[serde(rename = "audio_url")]
    AudioUrl(AudioUrlPart),
    /// A video, by URL or data URI.
    #[serde(rename = "video_url")]
    VideoUrl(VideoUrlPart),
}

impl ContentPart {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextPart { text: text.into() })
    }

    /// A thinking part without an encrypted signature.
    pub fn think(think: impl Into<String>) -> Self {
        Self::Think(ThinkPart {
            think: think.into(),
            encrypted: None,
        })
    }

    /// The text of a text part; `None` for every other kind (thinking included).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(part) => Some(&part.text),
            Self::Think(_) | Self::ImageUrl(_) | Self::AudioUrl(_) | Self::VideoUrl(_) => None,
        }
    }

    /// The wire name of this part's kind (`"text"`, `"think"`, `"image_url"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Text(_) => "text",
            Self::Think(_) => "think",
            Self::ImageUrl(_) => "image_url",
            Self::AudioUrl(_) => "audio_url",
            Self::VideoUrl(_) => "video_url",
        }
    }
}

/// Payload of a `text` content part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct TextPart {
    /// The text itself. While streaming, each event carries one chunk.
    pub text: String,
}

/// Payload of a `think` content part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ThinkPart {
    /// The reasoning text. While streaming, each event carries one chunk.
    pub think: String,
    /// Opaque signature or encrypted reasoning some providers return; `null` when absent.
    #[serde(default)]
    pub encrypted: Option<String>,
}

/// Where a media part's bytes live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct MediaUrl {
    /// An `http(s)` URL or a `data:` URI with base64 content.
    pub url: String,
    /// Optional identifier that lets the model tell several media items apart; `null` when unset.
    #[serde(default)]
    pub id: Option<String>,
}

impl MediaUrl {
    /// A media URL without an id.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            id: None,
        }
    }
}

/// Payload of an `image_url` content part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct ImageUrlPart {
    /// The image location.
    pub image_url: MediaUrl,
}

/// Payload of an `audio_url` content part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct AudioUrlPart {
    /// The audio location.
    pub audio_url: MediaUrl,
}

/// Payload of a `video_url` content part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct VideoUrlPart {
    /// The video location.
    pub video_url: MediaUrl,
}

/// What the user sends in `prompt` and `steer`: either a bare string or a list of content parts.
/// It is echoed back unchanged in `TurnBegin` and `SteerInput`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema, TS)]
#[serde(untagged)]
pub enum UserInput {
    /// A plain text prompt.
    Text(String),
    /// A multi-part prompt (text mixed with media).
    Parts(Vec<ContentPart>),
}

/// Chosen by the JSON type rather than by trying each variant (serde's `untagged`), so a bad part is
/// reported at its own path (`$.user_input[1]`, errors as data) instead of "did not match any variant".
impl<'de> Deserialize<'de> for UserInput {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InputVisitor;

        impl<'de> serde::de::Visitor<'de> for InputVisitor {
            type Value = UserInput;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a list of content parts")
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<UserInput, E> {
                Ok(UserInput::Text(text.to_owned()))
            }

            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<UserInput, E> {
                Ok(UserInput::Text(text))
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, parts: A) -> Result<UserInput, A::Error> {
                Vec::<ContentPart>::deserialize(serde::de::value::SeqAccessDeserializer::new(parts))
                    .map(UserInput::Parts)
            }
        }

        deserializer.deserialize_any(InputVisitor)
    }
}

impl UserInput {
    /// The input as content parts; a bare string becomes one text part.
    pub fn to_parts(&self) -> Vec<ContentPart> {
        match self {
            Self::Text(text) => vec![ContentPart::text(text.clone())],
            Self::Parts(parts) => parts.clone(),
        }
    }

    /// The text parts concatenated without a separator (media and thinking are left out).
    pub fn text_summary(&self) -> String {
        match self {
            Self::Text(text) => text.clone(),
            Self::Parts(parts) => parts.iter().filter_map(ContentPart::as_text).collect(),
        }
    }
}

impl From<String> for UserInput {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for UserInput {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<Vec<ContentPart>> for UserInput {
    fn from(parts: Vec<ContentPart>) -> Self {
        Self::Parts(parts)
    }
}
