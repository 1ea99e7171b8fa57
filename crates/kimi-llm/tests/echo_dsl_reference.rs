//! The echo DSL parser against the Python reference: every script in
//! `fixtures/echo_dsl_reference.json` must give the same events or the same
//! error (class and text) as kosong's parser gave when the fixture was
//! generated (`fixtures/gen_echo_dsl_reference.py`).

use kimi_llm::StreamEvent;
use kimi_llm::echo::parse_script;
use kimi_wire::message::ContentPart;
use pretty_assertions::assert_eq;
use serde_json::Value;

fn json(s: &impl serde::Serialize) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

fn render(event: &StreamEvent) -> String {
    match event {
        StreamEvent::MessageId(id) => format!("id:{}", json(id)),
        StreamEvent::Usage(u) => format!(
            "usage:{},{},{},{}",
            u.input_other, u.output, u.input_cache_read, u.input_cache_creation
        ),
        StreamEvent::Part(ContentPart::Text(p)) => format!("text:{}", json(&p.text)),
        StreamEvent::Part(ContentPart::Think(p)) => format!("think:{}", json(&p.think)),
        StreamEvent::Part(ContentPart::ImageUrl(p)) => {
            format!(
                "image_url:[{}, {}]",
                json(&p.image_url.url),
                json(&p.image_url.id)
            )
        }
        StreamEvent::Part(ContentPart::AudioUrl(p)) => {
            format!(
                "audio_url:[{}, {}]",
                json(&p.audio_url.url),
                json(&p.audio_url.id)
            )
        }
        StreamEvent::Part(ContentPart::VideoUrl(p)) => {
            format!(
                "video_url:[{}, {}]",
                json(&p.video_url.url),
                json(&p.video_url.id)
            )
        }
        StreamEvent::ToolCall(call) => format!("tool_call:{}", json(call)),
        StreamEvent::ToolCallPart(part) => format!("tool_call_part:{}", json(&part.arguments_part)),
        // The echo DSL has no finish reason (kosong's echo provider neither).
        StreamEvent::Finish(reason) => format!("finish:{}", json(reason)),
    }
}

#[test]
fn matches_the_reference_parser() {
    let fixture: Value =
        serde_json::from_str(include_str!("fixtures/echo_dsl_reference.json")).expect("fixture");
    let cases = fixture["cases"].as_array().expect("cases");
    assert!(cases.len() > 100);
    for case in cases {
        let script = case["script"].as_str().expect("script");
        let actual = match parse_script(script) {
            Ok(parsed) => Value::from(parsed.events.iter().map(render).collect::<Vec<_>>()),
            Err(err) => Value::from(format!("{}: {err}", err.error_type())),
        };
        let expected = match (&case["events"], case["error"].as_str()) {
            (Value::Array(events), _) => Value::Array(events.clone()),
            // pydantic's ValidationError has no provider-error class here; the
            // text is kept and the class becomes ChatProviderError.
            (_, Some(error)) => Value::from(error.replacen("ValidationError:", "ChatProviderError:", 1)),
            _ => panic!("bad case {case}"),
        };
        assert_eq!(actual, expected, "script: {script:?}");
    }
}
