//! Byte-for-byte JSON compatibility of the protocol types with the Python reference.
//!
//! The literals in `REFERENCE_MESSAGES` were produced by the reference's own pydantic models
//! (kimi-cli 1.49): `JSONRPCEventMessage(params=..).model_dump_json()` (or the request
//! counterpart), with the JSON-RPC envelope stripped, so each is exactly the `params` the reference
//! writes on stdout.

use kimi_wire::message::{
    ApprovalAnswer, ApprovalDecision, ApprovalRequest, ApprovalSourceKind, ContentPart, DisplayBlock, Event,
    HookAction, HookAnswer, IndexMap, McpServerState, McpServerStatus, McpStatus, MediaUrl, QuestionAnswer,
    Request, StatusUpdate, StepBegin, SubagentEvent, TodoDisplayItem, TodoStatus, TokenUsage, ToolCall,
    ToolCallPart, ToolCallRequest, ToolOutput, ToolResult, ToolReturnValue, TurnBegin, TurnEnd, UserInput,
    WireMessage,
};
use kimi_wire::params::{
    CancelResult, ExternalToolsResult, HooksInfo, InitializeParams, InitializeResult, PromptParams,
    PromptResult, RejectedTool, ReplayResult, ReplayStatus, ServerCapabilities, ServerInfo,
    SetPlanModeParams, SetPlanModeResult, SlashCommandInfo, SteerResult,
};
use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// (case name, exact JSON emitted by the reference).
const REFERENCE_MESSAGES: &[(&str, &str)] = &[
    (
        "turn_begin_text",
        r##"{"type":"TurnBegin","payload":{"user_input":"hello ☃"}}"##,
    ),
    (
        "turn_begin_parts",
        r##"{"type":"TurnBegin","payload":{"user_input":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","id":null}}]}}"##,
    ),
    (
        "steer_input",
        r##"{"type":"SteerInput","payload":{"user_input":"also this"}}"##,
    ),
    ("turn_end", r##"{"type":"TurnEnd","payload":{}}"##),
    ("step_begin", r##"{"type":"StepBegin","payload":{"n":1}}"##),
    ("step_interrupted", r##"{"type":"StepInterrupted","payload":{}}"##),
    (
        "step_retry",
        r##"{"type":"StepRetry","payload":{"n":2,"next_attempt":2,"max_attempts":3,"wait_s":1.5,"error_type":"APIStatusError","status_code":429}}"##,
    ),
    (
        "step_retry_no_status",
        r##"{"type":"StepRetry","payload":{"n":1,"next_attempt":2,"max_attempts":3,"wait_s":2.0,"error_type":"APIConnectionError","status_code":null}}"##,
    ),
    (
        "hook_triggered",
        r##"{"type":"HookTriggered","payload":{"event":"PreToolUse","target":"Shell","hook_count":2}}"##,
    ),
    (
        "hook_resolved",
        r##"{"type":"HookResolved","payload":{"event":"PreToolUse","target":"Shell","action":"block","reason":"no rm","duration_ms":12}}"##,
    ),
    ("compaction_begin", r##"{"type":"CompactionBegin","payload":{}}"##),
    ("compaction_end", r##"{"type":"CompactionEnd","payload":{}}"##),
    (
        "mcp_loading_begin",
        r##"{"type":"MCPLoadingBegin","payload":{}}"##,
    ),
    ("mcp_loading_end", r##"{"type":"MCPLoadingEnd","payload":{}}"##),
    (
        "status_update_empty",
        r##"{"type":"StatusUpdate","payload":{"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null}}"##,
    ),
    (
        "status_update_full",
        r##"{"type":"StatusUpdate","payload":{"context_usage":0.25,"context_tokens":1000,"max_context_tokens":4000,"token_usage":{"input_other":10,"output":5,"input_cache_read":3,"input_cache_creation":0},"message_id":"msg-1","plan_mode":false,"mcp_status":{"loading":true,"connected":1,"total":2,"tools":3,"servers":[{"name":"fs","status":"connected","tools":["read","write"]},{"name":"gh","status":"connecting","tools":[]}]}}}"##,
    ),
    (
        "status_update_plan",
        r##"{"type":"StatusUpdate","payload":{"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":true,"mcp_status":null}}"##,
    ),
    (
        "notification",
        r##"{"type":"Notification","payload":{"id":"n1","category":"task","type":"task.completed","source_kind":"background_task","source_id":"b1","title":"Done","body":"Task finished","severity":"info","created_at":1714000000.123456,"payload":{"task_id":"b1","exit_code":0}}}"##,
    ),
    (
        "notification_empty_payload",
        r##"{"type":"Notification","payload":{"id":"n2","category":"c","type":"t","source_kind":"k","source_id":"s","title":"T","body":"B","severity":"warning","created_at":1.0,"payload":{}}}"##,
    ),
    (
        "content_text",
        r##"{"type":"ContentPart","payload":{"type":"text","text":"Hi \"there\"\n"}}"##,
    ),
    (
        "content_think",
        r##"{"type":"ContentPart","payload":{"type":"think","think":"hmm","encrypted":null}}"##,
    ),
    (
        "content_think_encrypted",
        r##"{"type":"ContentPart","payload":{"type":"think","think":"","encrypted":"sig=="}}"##,
    ),
    (
        "content_image",
        r##"{"type":"ContentPart","payload":{"type":"image_url","image_url":{"url":"https://x/i.png","id":"img1"}}}"##,
    ),
    (
        "content_audio",
        r##"{"type":"ContentPart","payload":{"type":"audio_url","audio_url":{"url":"https://x/a.mp3","id":null}}}"##,
    ),
    (
        "content_video",
        r##"{"type":"ContentPart","payload":{"type":"video_url","video_url":{"url":"https://x/v.mp4","id":null}}}"##,
    ),
    (
        "tool_call",
        r##"{"type":"ToolCall","payload":{"type":"function","id":"tc-1","function":{"name":"Shell","arguments":"{\"command\":\"ls\"}"},"extras":null}}"##,
    ),
    (
        "tool_call_streaming",
        r##"{"type":"ToolCall","payload":{"type":"function","id":"tc-2","function":{"name":"Shell","arguments":null},"extras":{"index":0}}}"##,
    ),
    (
        "tool_call_part",
        r##"{"type":"ToolCallPart","payload":{"arguments_part":"{\"comm"}}"##,
    ),
    (
        "tool_call_part_null",
        r##"{"type":"ToolCallPart","payload":{"arguments_part":null}}"##,
    ),
    (
        "tool_result_ok",
        r##"{"type":"ToolResult","payload":{"tool_call_id":"tc-1","return_value":{"is_error":false,"output":"file.txt\n","message":"Command executed successfully.","display":[],"extras":null}}}"##,
    ),
    (
        "tool_result_ok_brief",
        r##"{"type":"ToolResult","payload":{"tool_call_id":"tc-1","return_value":{"is_error":false,"output":[{"type":"text","text":"x"}],"message":"","display":[{"type":"brief","text":"Done"}],"extras":null}}}"##,
    ),
    (
        "tool_result_error",
        r##"{"type":"ToolResult","payload":{"tool_call_id":"tc-1","return_value":{"is_error":true,"output":"","message":"Agent turn ended before tool result was received.","display":[{"type":"brief","text":"Turn ended"}],"extras":null}}}"##,
    ),
    (
        "tool_result_error_no_brief",
        r##"{"type":"ToolResult","payload":{"tool_call_id":"tc-1","return_value":{"is_error":true,"output":"out","message":"bad","display":[],"extras":null}}}"##,
    ),
    (
        "approval_response",
        r##"{"type":"ApprovalResponse","payload":{"request_id":"r1","response":"approve_for_session","feedback":""}}"##,
    ),
    (
        "approval_response_feedback",
        r##"{"type":"ApprovalResponse","payload":{"request_id":"r1","response":"reject","feedback":"use git mv"}}"##,
    ),
    (
        "subagent_event",
        r##"{"type":"SubagentEvent","payload":{"parent_tool_call_id":"tc-9","agent_id":"a1","subagent_type":"coder","event":{"type":"StepBegin","payload":{"n":1}}}}"##,
    ),
    (
        "subagent_event_content",
        r##"{"type":"SubagentEvent","payload":{"parent_tool_call_id":null,"agent_id":null,"subagent_type":null,"event":{"type":"ContentPart","payload":{"type":"text","text":"sub"}}}}"##,
    ),
    (
        "subagent_nested",
        r##"{"type":"SubagentEvent","payload":{"parent_tool_call_id":"tc-1","agent_id":null,"subagent_type":null,"event":{"type":"SubagentEvent","payload":{"parent_tool_call_id":"tc-2","agent_id":null,"subagent_type":null,"event":{"type":"TurnEnd","payload":{}}}}}}"##,
    ),
    (
        "plan_display",
        r##"{"type":"PlanDisplay","payload":{"content":"# Plan","file_path":"/tmp/plan.md"}}"##,
    ),
    (
        "btw_begin",
        r##"{"type":"BtwBegin","payload":{"id":"b1","question":"why?"}}"##,
    ),
    (
        "btw_end",
        r##"{"type":"BtwEnd","payload":{"id":"b1","response":"because","error":null}}"##,
    ),
    (
        "btw_end_error",
        r##"{"type":"BtwEnd","payload":{"id":"b1","response":null,"error":"boom"}}"##,
    ),
    (
        "approval_request",
        r##"{"type":"ApprovalRequest","payload":{"id":"req-1","tool_call_id":"tc-1","sender":"Shell","action":"run command","description":"Run `ls`","source_kind":"foreground_turn","source_id":"abc","agent_id":null,"subagent_type":null,"source_description":null,"display":[{"type":"shell","language":"bash","command":"ls"}]}}"##,
    ),
    (
        "approval_request_minimal",
        r##"{"type":"ApprovalRequest","payload":{"id":"req-2","tool_call_id":"tc-2","sender":"WriteFile","action":"edit","description":"Edit a file","source_kind":null,"source_id":null,"agent_id":null,"subagent_type":null,"source_description":null,"display":[]}}"##,
    ),
    (
        "tool_call_request",
        r##"{"type":"ToolCallRequest","payload":{"id":"tc-1","name":"my_tool","arguments":"{\"a\":1}"}}"##,
    ),
    (
        "tool_call_request_null",
        r##"{"type":"ToolCallRequest","payload":{"id":"tc-1","name":"my_tool","arguments":null}}"##,
    ),
    (
        "question_request",
        r##"{"type":"QuestionRequest","payload":{"id":"q1","tool_call_id":"tc-4","questions":[{"question":"Which?","header":"","options":[{"label":"A","description":""},{"label":"B","description":"bee"}],"multi_select":false,"body":"","other_label":"","other_description":""},{"question":"More?","header":"More","options":[{"label":"x","description":""}],"multi_select":true,"body":"**b**","other_label":"Other","other_description":"free"}]}}"##,
    ),
    (
        "hook_request",
        r##"{"type":"HookRequest","payload":{"id":"abcdef012345","subscription_id":"s1","event":"PreToolUse","target":"Shell","input_data":{"tool_name":"Shell","tool_input":{"command":"ls"}}}}"##,
    ),
    (
        "hook_request_minimal",
        r##"{"type":"HookRequest","payload":{"id":"abcdef012345","subscription_id":"","event":"Stop","target":"","input_data":{}}}"##,
    ),
    (
        "status_small_float",
        r##"{"type":"StatusUpdate","payload":{"context_usage":0.00001,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null}}"##,
    ),
    (
        "status_zero_float",
        r##"{"type":"StatusUpdate","payload":{"context_usage":0.0,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null}}"##,
    ),
];

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| panic!("serialize: {e}"))
}

fn round_trip<T: Serialize + DeserializeOwned>(json: &str) -> String {
    let value: T = serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
    to_json(&value)
}

#[test]
fn every_reference_message_round_trips_byte_for_byte() {
    for (name, json) in REFERENCE_MESSAGES {
        let message: WireMessage = serde_json::from_str(json).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(to_json(&message), *json, "{name}");
        let envelope: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(Some(message.type_name()), envelope["type"].as_str(), "{name}");
        // The typed enums read the same text directly.
        match message {
            WireMessage::Event(_) => assert_eq!(round_trip::<Event>(json), *json, "{name}"),
            WireMessage::Request(_) => assert_eq!(round_trip::<Request>(json), *json, "{name}"),
        }
    }
}

fn reference(name: &str) -> &'static str {
    REFERENCE_MESSAGES
        .iter()
        .find(|(case, _)| *case == name)
        .map_or_else(|| panic!("no reference case {name}"), |(_, json)| *json)
}

#[test]
fn constructed_events_serialize_like_the_reference() {
    let cases: Vec<(&str, Event)> = vec![
        (
            "turn_begin_text",
            TurnBegin {
                user_input: "hello ☃".into(),
            }
            .into(),
        ),
        ("turn_end", TurnEnd {}.into()),
        ("step_begin", StepBegin { n: 1 }.into()),
        ("status_update_empty", StatusUpdate::default().into()),
        (
            "status_update_plan",
            StatusUpdate {
                plan_mode: Some(true),
                ..StatusUpdate::default()
            }
            .into(),
        ),
        (
            "status_update_full",
            StatusUpdate {
                context_usage: Some(0.25),
                context_tokens: Some(1000),
                max_context_tokens: Some(4000),
                token_usage: Some(TokenUsage {
                    input_other: 10,
                    output: 5,
                    input_cache_read: 3,
                    input_cache_creation: 0,
                }),
                message_id: Some("msg-1".into()),
                plan_mode: Some(false),
                mcp_status: Some(McpStatus {
                    loading: true,
                    connected: 1,
                    total: 2,
                    tools: 3,
                    servers: vec![
                        McpServerStatus {
                            name: "fs".into(),
                            status: McpServerState::Connected,
                            tools: vec!["read".into(), "write".into()],
                        },
                        McpServerStatus {
                            name: "gh".into(),
                            status: McpServerState::Connecting,
                            tools: vec![],
                        },
                    ],
                }),
            }
            .into(),
        ),
        ("content_text", ContentPart::text("Hi \"there\"\n").into()),
        ("content_think", ContentPart::think("hmm").into()),
        (
            "tool_call",
            ToolCall::new("tc-1", "Shell", Some(r#"{"command":"ls"}"#.into())).into(),
        ),
        ("tool_call_part_null", ToolCallPart::default().into()),
        (
            "tool_result_ok",
            ToolResult {
                tool_call_id: "tc-1".into(),
                return_value: ToolReturnValue::ok("file.txt\n", "Command executed successfully."),
            }
            .into(),
        ),
        (
            "tool_result_ok_brief",
            ToolResult {
                tool_call_id: "tc-1".into(),
                return_value: ToolReturnValue::ok_with_brief(ContentPart::text("x"), "", "Done"),
            }
            .into(),
        ),
        (
            "tool_result_error",
            ToolResult {
                tool_call_id: "tc-1".into(),
                return_value: ToolReturnValue::error(
                    "",
                    "Agent turn ended before tool result was received.",
                    "Turn ended",
                ),
            }
            .into(),
        ),
        (
            "tool_result_error_no_brief",
            ToolResult {
                tool_call_id: "tc-1".into(),
                return_value: ToolReturnValue::error("out", "bad", ""),
            }
            .into(),
        ),
        (
            "approval_response",
            ApprovalAnswer {
                request_id: "r1".into(),
                response: ApprovalDecision::ApproveForSession,
                feedback: String::new(),
            }
            .into(),
        ),
        (
            "subagent_event",
            SubagentEvent {
                parent_tool_call_id: Some("tc-9".into()),
                agent_id: Some("a1".into()),
                subagent_type: Some("coder".into()),
                event: Box::new(StepBegin { n: 1 }.into()),
            }
            .into(),
        ),
    ];
    for (name, event) in cases {
        assert_eq!(to_json(&event), reference(name), "{name}");
    }
}

#[test]
fn constructed_requests_serialize_like_the_reference() {
    let approval = Request::ApprovalRequest(ApprovalRequest {
        id: "req-1".into(),
        tool_call_id: "tc-1".into(),
        sender: "Shell".into(),
        action: "run command".into(),
        description: "Run `ls`".into(),
        source_kind: Some(ApprovalSourceKind::ForegroundTurn),
        source_id: Some("abc".into()),
        agent_id: None,
        subagent_type: None,
        source_description: None,
        display: vec![DisplayBlock::Shell {
            language: "bash".into(),
            command: "ls".into(),
        }],
    });
    assert_eq!(approval.id(), "req-1");
    assert_eq!(to_json(&approval), reference("approval_request"));

    let call = ToolCall::new("tc-1", "my_tool", None);
    let request = Request::from(ToolCallRequest::from(&call));
    assert_eq!(request.id(), "tc-1");
    assert_eq!(to_json(&request), reference("tool_call_request_null"));
}

#[test]
fn client_answers_match_the_reference() {
    // `ApprovalResponse(...)`, `QuestionResponse(...)`, `HookResponse(...)` `.model_dump_json()`.
    let approval = r#"{"request_id":"r1","response":"approve","feedback":""}"#;
    let question = r#"{"request_id":"q1","answers":{"Which?":"A","More?":"x, y"}}"#;
    let hook = r#"{"request_id":"h1","action":"allow","reason":""}"#;
    assert_eq!(round_trip::<ApprovalAnswer>(approval), approval);
    assert_eq!(round_trip::<QuestionAnswer>(question), question);
    assert_eq!(round_trip::<HookAnswer>(hook), hook);

    // Defaults the reference fills in.
    let answer: ApprovalAnswer = serde_json::from_str(r#"{"request_id":"r1","response":"approve"}"#).unwrap();
    assert_eq!(to_json(&answer), approval);
    let answer: HookAnswer = serde_json::from_str(r#"{"request_id":"h1"}"#).unwrap();
    assert_eq!(answer.action, HookAction::Allow);
    assert_eq!(to_json(&answer), hook);

    // Answer order is kept (the model sees the answers in this order).
    let mut answers = IndexMap::new();
    answers.insert("Which?".to_owned(), "A".to_owned());
    answers.insert("More?".to_owned(), "x, y".to_owned());
    assert_eq!(
        to_json(&QuestionAnswer {
            request_id: "q1".into(),
            answers
        }),
        question
    );

    // Non-string answers are refused, as the reference's `dict[str, str]` does.
    assert!(serde_json::from_str::<QuestionAnswer>(r#"{"request_id":"q","answers":{"a":1}}"#).is_err());
    assert!(serde_json::from_str::<ApprovalAnswer>(r#"{"request_id":"r","response":"maybe"}"#).is_err());

    // A ToolCallRequest is answered with a ToolResult.
    let result = r#"{"tool_call_id":"tc-1","return_value":{"is_error":false,"output":[{"type":"text","text":"hi"}],"message":"ok","display":[]}}"#;
    let parsed: ToolResult = serde_json::from_str(result).unwrap();
    assert_eq!(
        parsed.return_value.output,
        ToolOutput::Parts(vec![ContentPart::text("hi")])
    );
    assert_eq!(parsed.return_value.extras, None);
}

#[test]
fn legacy_names_are_accepted_on_read() {
    let legacy = r#"{"type":"ApprovalRequestResolved","payload":{"request_id":"r1","response":"reject"}}"#;
    let message: WireMessage = serde_json::from_str(legacy).unwrap();
    assert_eq!(
        to_json(&message),
        r#"{"type":"ApprovalResponse","payload":{"request_id":"r1","response":"reject","feedback":""}}"#
    );

    let legacy = r#"{"type":"SubagentEvent","payload":{"task_tool_call_id":"old","event":{"type":"TurnEnd","payload":{}}}}"#;
    let message: Event = serde_json::from_str(legacy).unwrap();
    assert_eq!(
        to_json(&message),
        r#"{"type":"SubagentEvent","payload":{"parent_tool_call_id":"old","agent_id":null,"subagent_type":null,"event":{"type":"TurnEnd","payload":{}}}}"#
    );

    // The legacy key only fills in a missing new key, never an explicit null.
    let both = r#"{"type":"SubagentEvent","payload":{"parent_tool_call_id":null,"task_tool_call_id":"old","event":{"type":"TurnEnd","payload":{}}}}"#;
    let Event::SubagentEvent(event) = serde_json::from_str(both).unwrap() else {
        panic!()
    };
    assert_eq!(event.parent_tool_call_id, None);
}

#[test]
fn subagent_events_wrap_events_only() {
    let wrapped_request = r#"{"type":"SubagentEvent","payload":{"event":{"type":"ToolCallRequest","payload":{"id":"a","name":"b","arguments":null}}}}"#;
    assert!(serde_json::from_str::<Event>(wrapped_request).is_err());
}

#[test]
fn every_display_block_serializes_like_the_reference() {
    // Built with the reference's block classes, `UnknownDisplayBlock(type="fancy", data=..)` last.
    // Not a round trip: reading an unknown block nests its keys under `data` (see below).
    let expected = r##"{"type":"ToolResult","payload":{"tool_call_id":"tc-3","return_value":{"is_error":false,"output":"","message":"","display":[{"type":"diff","path":"a.txt","old_text":"a","new_text":"b","old_start":1,"new_start":1,"is_summary":false},{"type":"diff","path":"a.txt","old_text":"a","new_text":"b","old_start":3,"new_start":4,"is_summary":true},{"type":"todo","items":[{"title":"x","status":"pending"},{"title":"y","status":"in_progress"},{"title":"z","status":"done"}]},{"type":"shell","language":"bash","command":"ls -la"},{"type":"background_task","task_id":"b1","kind":"bash","status":"running","description":"sleep"},{"type":"fancy","data":{"k":[1,2]}}],"extras":{"debug":true}}}}"##;
    let event: Event = ToolResult {
        tool_call_id: "tc-3".into(),
        return_value: ToolReturnValue {
            is_error: false,
            output: ToolOutput::Text(String::new()),
            message: String::new(),
            display: vec![
                DisplayBlock::Diff {
                    path: "a.txt".into(),
                    old_text: "a".into(),
                    new_text: "b".into(),
                    old_start: 1,
                    new_start: 1,
                    is_summary: false,
                },
                DisplayBlock::Diff {
                    path: "a.txt".into(),
                    old_text: "a".into(),
                    new_text: "b".into(),
                    old_start: 3,
                    new_start: 4,
                    is_summary: true,
                },
                DisplayBlock::Todo {
                    items: vec![
                        TodoDisplayItem {
                            title: "x".into(),
                            status: TodoStatus::Pending,
                        },
                        TodoDisplayItem {
                            title: "y".into(),
                            status: TodoStatus::InProgress,
                        },
                        TodoDisplayItem {
                            title: "z".into(),
                            status: TodoStatus::Done,
                        },
                    ],
                },
                DisplayBlock::Shell {
                    language: "bash".into(),
                    command: "ls -la".into(),
                },
                DisplayBlock::BackgroundTask {
                    task_id: "b1".into(),
                    kind: "bash".into(),
                    status: "running".into(),
                    description: "sleep".into(),
                },
                DisplayBlock::Unknown {
                    r#type: "fancy".into(),
                    data: serde_json::json!({"k": [1, 2]}),
                },
            ],
            extras: Some(serde_json::json!({"debug": true}).as_object().unwrap().clone()),
        },
    }
    .into();
    assert_eq!(to_json(&event), expected);
}

#[test]
fn unknown_display_blocks_are_kept() {
    // Reference: every key but `type` moves under `data`, and is written back nested.
    let display = |blocks: &str| {
        format!(
            r#"{{"type":"ToolResult","payload":{{"tool_call_id":"t","return_value":{{"is_error":false,"output":"","message":"","display":[{blocks}],"extras":null}}}}}}"#
        )
    };
    let cases = [
        (
            r#"{"type":"fancy","x":1,"y":[2]}"#,
            r#"{"type":"fancy","data":{"x":1,"y":[2]}}"#,
        ),
        (
            r#"{"type":"fancy","data":{"x":1}}"#,
            r#"{"type":"fancy","data":{"data":{"x":1}}}"#,
        ),
        (r#"{"type":"unknown","data":5}"#, r#"{"type":"unknown","data":5}"#),
    ];
    for (input, output) in cases {
        let event: Event = serde_json::from_str(&display(input)).unwrap();
        assert_eq!(to_json(&event), display(output), "{input}");
    }

    let block: DisplayBlock = serde_json::from_str(r#"{"type":"hide_output"}"#).unwrap();
    assert_eq!(
        block,
        DisplayBlock::Unknown {
            r#type: "hide_output".into(),
            data: serde_json::json!({})
        }
    );
}

#[test]
fn known_display_blocks_with_bad_fields_are_errors() {
    for bad in [
        r#"{"type":"brief"}"#,
        r#"{"type":"diff","path":"a"}"#,
        r#"{"type":"todo","items":[{"title":"x","status":"later"}]}"#,
        r#"{"type":"unknown"}"#,
        r#"{"type":7}"#,
        r#"{"text":"no type"}"#,
    ] {
        assert!(serde_json::from_str::<DisplayBlock>(bad).is_err(), "{bad}");
    }
    let diff: DisplayBlock =
        serde_json::from_str(r#"{"type":"diff","path":"a","old_text":"","new_text":"x"}"#).unwrap();
    assert_eq!(
        to_json(&diff),
        r#"{"type":"diff","path":"a","old_text":"","new_text":"x","old_start":1,"new_start":1,"is_summary":false}"#
    );
}

#[test]
fn unknown_content_part_types_are_rejected() {
    assert!(serde_json::from_str::<ContentPart>(r#"{"type":"foo","text":"x"}"#).is_err());
    assert!(serde_json::from_str::<ContentPart>(r#"{"text":"x"}"#).is_err());
    assert!(serde_json::from_str::<PromptParams>(r#"{"user_input":[{"type":"foo"}]}"#).is_err());
    assert!(serde_json::from_str::<Event>(r#"{"type":"ContentPart","payload":{"type":"foo"}}"#).is_err());
    // Extra keys are ignored.
    let part: ContentPart = serde_json::from_str(r#"{"type":"text","text":"x","extra":1}"#).unwrap();
    assert_eq!(part, ContentPart::text("x"));
}

#[test]
fn unknown_message_types_are_rejected() {
    assert!(serde_json::from_str::<WireMessage>(r#"{"type":"Nope","payload":{}}"#).is_err());
    assert!(serde_json::from_str::<WireMessage>(r#"{"type":"TurnEnd"}"#).is_err());
}

#[test]
fn missing_optional_fields_are_accepted() {
    let cases = [
        (
            r#"{"type":"StatusUpdate","payload":{"extra":1}}"#,
            reference("status_update_empty"),
        ),
        (
            r#"{"type":"StatusUpdate","payload":{"plan_mode":true}}"#,
            reference("status_update_plan"),
        ),
        (
            r#"{"type":"StepRetry","payload":{"n":1,"next_attempt":2,"max_attempts":3,"wait_s":2,"error_type":"APIConnectionError"}}"#,
            reference("step_retry_no_status"),
        ),
        (
            r#"{"type":"ContentPart","payload":{"type":"think","think":"hmm"}}"#,
            reference("content_think"),
        ),
        (
            r#"{"type":"ToolCallPart","payload":{}}"#,
            reference("tool_call_part_null"),
        ),
        (
            r#"{"type":"BtwEnd","payload":{"id":"b1","error":"boom"}}"#,
            reference("btw_end_error"),
        ),
        (
            r#"{"type":"ApprovalRequest","payload":{"id":"req-2","tool_call_id":"tc-2","sender":"WriteFile","action":"edit","description":"Edit a file"}}"#,
            reference("approval_request_minimal"),
        ),
        (
            r#"{"type":"HookRequest","payload":{"id":"abcdef012345","event":"Stop"}}"#,
            reference("hook_request_minimal"),
        ),
        (
            r#"{"type":"HookTriggered","payload":{"event":"Stop"}}"#,
            r#"{"type":"HookTriggered","payload":{"event":"Stop","target":"","hook_count":1}}"#,
        ),
        (
            r#"{"type":"HookResolved","payload":{"event":"Stop"}}"#,
            r#"{"type":"HookResolved","payload":{"event":"Stop","target":"","action":"allow","reason":"","duration_ms":0}}"#,
        ),
        (
            r#"{"type":"Notification","payload":{"id":"n2","category":"c","type":"t","source_kind":"k","source_id":"s","title":"T","body":"B","severity":"warning","created_at":1}}"#,
            reference("notification_empty_payload"),
        ),
        (
            r#"{"type":"StatusUpdate","payload":{"token_usage":{"input_other":1,"output":2},"mcp_status":{"loading":false,"connected":0,"total":0,"tools":0}}}"#,
            r#"{"type":"StatusUpdate","payload":{"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":{"input_other":1,"output":2,"input_cache_read":0,"input_cache_creation":0},"message_id":null,"plan_mode":null,"mcp_status":{"loading":false,"connected":0,"total":0,"tools":0,"servers":[]}}}"#,
        ),
        (
            r#"{"type":"QuestionRequest","payload":{"id":"q","tool_call_id":"t","questions":[{"question":"?","options":[{"label":"a"}]}]}}"#,
            r#"{"type":"QuestionRequest","payload":{"id":"q","tool_call_id":"t","questions":[{"question":"?","header":"","options":[{"label":"a","description":""}],"multi_select":false,"body":"","other_label":"","other_description":""}]}}"#,
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(round_trip::<WireMessage>(input), expected, "{input}");
    }
}

#[test]
fn token_usage_sums() {
    let usage = TokenUsage {
        input_other: 10,
        output: 5,
        input_cache_read: 3,
        input_cache_creation: 2,
    };
    assert_eq!(usage.input(), 15);
    assert_eq!(usage.total(), 20);
}

#[test]
fn user_input_helpers() {
    let text: UserInput = serde_json::from_str(r#""hi""#).unwrap();
    assert_eq!(text, UserInput::Text("hi".into()));
    assert_eq!(text.to_parts(), vec![ContentPart::text("hi")]);
    let parts: UserInput = serde_json::from_str(
        r#"[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"think","think":"t"},{"type":"text","text":"b"}]"#,
    )
    .unwrap();
    assert_eq!(parts.text_summary(), "ab");
    let UserInput::Parts(list) = &parts else { panic!() };
    assert_eq!(
        list[1],
        ContentPart::ImageUrl(kimi_wire::message::ImageUrlPart {
            image_url: MediaUrl::new("u")
        })
    );
    assert_eq!(list[0].as_text(), Some("a"));
    assert_eq!(list[2].as_text(), None);
}

#[test]
fn tool_return_value_brief() {
    assert_eq!(
        ToolReturnValue::error("", "m", "Turn ended").brief(),
        "Turn ended"
    );
    assert_eq!(ToolReturnValue::ok("", "m").brief(), "");
}

#[test]
fn method_params() {
    let params: InitializeParams = serde_json::from_str(r#"{"protocol_version":"1.10"}"#).unwrap();
    assert_eq!(params.client, None);
    let params: InitializeParams = serde_json::from_str(
        r#"{"protocol_version":"1.9","client":{"name":"ide"},"external_tools":[{"name":"t","parameters":{"type":"object"}}],"hooks":[{"id":"s1","event":"Stop"}],"capabilities":{"supports_question":true}}"#,
    )
    .unwrap();
    let hooks = params.hooks.unwrap();
    assert_eq!((hooks[0].matcher.as_str(), hooks[0].timeout), ("", 30));
    let capabilities = params.capabilities.unwrap();
    assert!(capabilities.supports_question && !capabilities.supports_plan_mode);
    assert_eq!(params.external_tools.unwrap()[0].description, "");
    assert!(serde_json::from_str::<InitializeParams>("{}").is_err());
    assert!(
        serde_json::from_str::<InitializeParams>(
            r#"{"protocol_version":"1","external_tools":[{"name":"t","parameters":[]}]}"#
        )
        .is_err()
    );

    assert!(serde_json::from_str::<PromptParams>("{}").is_err());
    let prompt: PromptParams = serde_json::from_str(r#"{"user_input":"hi","extra":1}"#).unwrap();
    assert_eq!(prompt.user_input, UserInput::Text("hi".into()));
    assert!(serde_json::from_str::<SetPlanModeParams>("{}").is_err());
}

#[test]
fn method_results_match_the_reference() {
    // The result dicts built in `kimi_cli/wire/server.py`.
    assert_eq!(to_json(&PromptResult::finished()), r#"{"status":"finished"}"#);
    assert_eq!(to_json(&PromptResult::cancelled()), r#"{"status":"cancelled"}"#);
    assert_eq!(
        to_json(&PromptResult::max_steps_reached(100)),
        r#"{"status":"max_steps_reached","steps":100}"#
    );
    assert_eq!(to_json(&SteerResult::default()), r#"{"status":"steered"}"#);
    assert_eq!(
        to_json(&SetPlanModeResult::new(true)),
        r#"{"status":"ok","plan_mode":true}"#
    );
    assert_eq!(
        to_json(&ReplayResult {
            status: ReplayStatus::Cancelled,
            events: 3,
            requests: 1
        }),
        r#"{"status":"cancelled","events":3,"requests":1}"#
    );
    assert_eq!(to_json(&CancelResult {}), "{}");

    let mut configured = IndexMap::new();
    configured.insert("Stop".to_owned(), 2);
    let mut result = InitializeResult {
        protocol_version: "1.10".into(),
        server: ServerInfo {
            name: "Kimi Code CLI".into(),
            version: "1.49.0".into(),
        },
        slash_commands: vec![SlashCommandInfo {
            name: "init".into(),
            description: "d".into(),
            aliases: vec![],
        }],
        external_tools: None,
        hooks: HooksInfo {
            supported_events: vec!["PreToolUse".into(), "Stop".into()],
            configured,
        },
        capabilities: ServerCapabilities::default(),
        sandbox: None,
        session_held_by: None,
    };
    let without_tools = r#"{"protocol_version":"1.10","server":{"name":"Kimi Code CLI","version":"1.49.0"},"slash_commands":[{"name":"init","description":"d","aliases":[]}],"hooks":{"supported_events":["PreToolUse","Stop"],"configured":{"Stop":2}},"capabilities":{"supports_question":true}}"#;
    assert_eq!(to_json(&result), without_tools);
    assert_eq!(round_trip::<InitializeResult>(without_tools), without_tools);
    result.external_tools = Some(ExternalToolsResult {
        accepted: vec!["a".into()],
        rejected: vec![RejectedTool {
            name: "Shell".into(),
            reason: "conflicts with builtin tool".into(),
        }],
    });
    assert_eq!(
        to_json(&result),
        r#"{"protocol_version":"1.10","server":{"name":"Kimi Code CLI","version":"1.49.0"},"slash_commands":[{"name":"init","description":"d","aliases":[]}],"external_tools":{"accepted":["a"],"rejected":[{"name":"Shell","reason":"conflicts with builtin tool"}]},"hooks":{"supported_events":["PreToolUse","Stop"],"configured":{"Stop":2}},"capabilities":{"supports_question":true}}"#
    );
    // Extension (issue 16): only when another process holds the session, after every reference key.
    result.external_tools = None;
    result.session_held_by = Some(kimi_wire::params::SessionHolderInfo { pid: Some(4242) });
    let held = r#"{"protocol_version":"1.10","server":{"name":"Kimi Code CLI","version":"1.49.0"},"slash_commands":[{"name":"init","description":"d","aliases":[]}],"hooks":{"supported_events":["PreToolUse","Stop"],"configured":{"Stop":2}},"capabilities":{"supports_question":true},"session_held_by":{"pid":4242}}"#;
    assert_eq!(to_json(&result), held);
    assert_eq!(round_trip::<InitializeResult>(held), held);
}

#[test]
fn a_refusal_for_a_held_session_names_the_holder() {
    let error = kimi_wire::RpcError::session_in_use("s-1", Some(77));
    assert_eq!(
        serde_json::to_value(&error).unwrap(),
        serde_json::json!({
            "code": -32000,
            "message": "Session s-1 is in use by another kimi-agent process (pid 77)",
            "data": {"session_id": "s-1", "pid": 77},
        })
    );
    assert_eq!(
        kimi_wire::RpcError::session_in_use("s-1", None).message,
        "Session s-1 is in use by another kimi-agent process (pid unknown)"
    );
}

#[test]
fn floats_are_written_like_the_reference() {
    // pydantic-core and serde_json agree below 1e16 (pydantic writes `1e16`, serde_json `1e+16`).
    assert_eq!(
        round_trip::<Event>(reference("status_small_float")),
        reference("status_small_float")
    );
    assert_eq!(
        round_trip::<Event>(reference("status_zero_float")),
        reference("status_zero_float")
    );
    let status: Event =
        serde_json::from_str(r#"{"type":"StatusUpdate","payload":{"context_usage":0}}"#).unwrap();
    assert_eq!(to_json(&status), reference("status_zero_float"));
}
