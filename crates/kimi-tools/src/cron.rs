//! `CronCreate`, `CronList`, `CronDelete`: the session's scheduled prompts (seeds/002; beyond the
//! reference 1.49). The jobs and their rules live in [`kimi_core::CronStore`]; these tools check
//! arguments, ask for approval and format results.
//!
//! Creating and deleting change what the session will do later, so both need approval, and both are
//! refused in plan mode (they declare the session's `cron.json` as the file they write). Approving a
//! creation "for the session" only covers that exact schedule, prompt and recurrence: the approval action
//! carries a digest of all three.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::cron_time as iso;
use kimi_core::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_core::{CronStore, JobView};
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The tools' names.
pub const CREATE: &str = "CronCreate";
/// See [`CREATE`].
pub const LIST: &str = "CronList";
/// See [`CREATE`].
pub const DELETE: &str = "CronDelete";

/// CronList shows at most this many bytes of each prompt.
const LIST_PROMPT_BYTES: usize = 200;
/// The approval description shows at most this many characters of the prompt.
const DESCRIPTION_PROMPT_CHARS: usize = 80;

// Parameters of `CronCreate` (plain comments: doc comments would become schema descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct CreateArgs {
    /// Standard five-field cron expression in the user's local time zone: `minute hour day-of-month month
    /// day-of-week`, e.g. `*/10 * * * *` or `30 9 * * 1-5`.
    cron: String,
    /// The text to bring back into this conversation when the job fires (at most 8 KB of UTF-8).
    prompt: String,
    /// `true` (the default) fires on every match of the expression; `false` fires once at the next match
    /// and then deletes the job.
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    recurring: bool,
}

fn yes() -> bool {
    true
}

// No parameters; `properties: {}` spelled out as pydantic writes an empty model, since some providers
// reject an object schema without it.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("properties" = {}))]
struct ListArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
struct DeleteArgs {
    /// The 8-digit hex id returned by CronCreate or shown by CronList.
    id: String,
}

/// Schedules a prompt.
#[derive(Debug)]
pub struct CronCreate {
    spec: ToolSpec,
    store: Arc<CronStore>,
}

impl CronCreate {
    /// A `CronCreate` adding jobs to `store`.
    pub fn new(store: Arc<CronStore>) -> Self {
        Self {
            spec: crate::tool_spec::<CreateArgs>(CREATE, include_str!("descriptions/cron_create.md")),
            store,
        }
    }
}

impl Tool for CronCreate {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: CreateArgs = parse_args(args)?;
            let kind = if args.recurring { "recurring" } else { "one-shot" };
            let ask = ApprovalAsk {
                action: format!(
                    "schedule {kind} prompt `{}` #{}",
                    args.cron,
                    payload_digest(&args)
                ),
                description: format!(
                    "Schedule a {kind} prompt at `{}`: {}",
                    args.cron,
                    preview(&args.prompt)
                ),
                display: vec![DisplayBlock::Brief {
                    text: args.prompt.clone(),
                }],
                detail_display: Vec::new(),
                writes: writes(&self.store),
            };
            Ok(Plan::side_effect(
                ask,
                Box::pin(async move {
                    match self.store.create(&args.cron, &args.prompt, args.recurring).await {
                        Ok(created) => {
                            let output = format!(
                                "id: {}\nhumanSchedule: {}\nrecurring: {}\nnextFireAt: {}",
                                created.id,
                                created.human_schedule,
                                created.recurring,
                                iso(&created.next_fire_at)
                            );
                            ToolReturnValue::ok_with_brief(
                                output,
                                format!("Cron job {} scheduled.", created.id),
                                format!("Scheduled {} ({})", created.id, created.human_schedule),
                            )
                        }
                        Err(e) => ToolReturnValue::error("", e.to_string(), "Not scheduled"),
                    }
                }),
            ))
        })
    }
}

/// Lists the scheduled prompts.
#[derive(Debug)]
pub struct CronList {
    spec: ToolSpec,
    store: Arc<CronStore>,
}

impl CronList {
    /// A `CronList` reading `store`.
    pub fn new(store: Arc<CronStore>) -> Self {
        Self {
            spec: crate::tool_spec::<ListArgs>(LIST, include_str!("descriptions/cron_list.md")),
            store,
        }
    }
}

impl Tool for CronList {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let _: ListArgs = parse_args(args)?;
            Ok(Plan::read_only(Box::pin(async move {
                ToolReturnValue::ok(list_text(&self.store.list()), "")
            })))
        })
    }
}

/// Deletes a scheduled prompt.
#[derive(Debug)]
pub struct CronDelete {
    spec: ToolSpec,
    store: Arc<CronStore>,
}

impl CronDelete {
    /// A `CronDelete` removing jobs from `store`.
    pub fn new(store: Arc<CronStore>) -> Self {
        Self {
            spec: crate::tool_spec::<DeleteArgs>(DELETE, include_str!("descriptions/cron_delete.md")),
            store,
        }
    }
}

impl Tool for CronDelete {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: DeleteArgs = parse_args(args)?;
            let not_found = || {
                ToolReturnValue::error(
                    "",
                    kimi_core::CronJobNotFound(args.id.clone()).to_string(),
                    "Not found",
                )
            };
            // Nothing to ask about when there is nothing to delete.
            let Some(job) = self
                .store
                .list()
                .into_iter()
                .find(|job| job.id.as_str().eq_ignore_ascii_case(&args.id))
            else {
                return Err(not_found());
            };
            let ask = ApprovalAsk {
                action: "delete cron job".into(),
                description: format!(
                    "Delete cron job {} ({}): {}",
                    job.id,
                    job.human_schedule,
                    preview(&job.prompt)
                ),
                display: Vec::new(),
                detail_display: Vec::new(),
                writes: writes(&self.store),
            };
            Ok(Plan::side_effect(
                ask,
                Box::pin(async move {
                    match self.store.delete(&args.id).await {
                        Ok(()) => {
                            let text = format!("Deleted cron job {}.", job.id);
                            ToolReturnValue::ok_with_brief(text.clone(), "", text)
                        }
                        // Deleted meanwhile (a one-shot that fired while we waited for approval).
                        Err(e) => ToolReturnValue::error("", e.to_string(), "Not found"),
                    }
                }),
            ))
        })
    }
}

/// The file a change writes, so plan mode refuses it.
fn writes(store: &CronStore) -> Vec<PathBuf> {
    store.file().map(Into::into).into_iter().collect()
}

/// A digest of what is being scheduled, binding "approve for this session" to exactly this job.
fn payload_digest(args: &CreateArgs) -> String {
    let payload = serde_json::json!([args.cron, args.prompt, args.recurring]).to_string();
    let digest = format!("{:x}", md5::compute(payload.as_bytes()));
    digest[..12].to_owned()
}

/// The first line of `prompt`, cut to a readable length.
fn preview(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or("");
    let mut cut: String = line.chars().take(DESCRIPTION_PROMPT_CHARS).collect();
    if cut.len() < prompt.len() {
        cut.push('…');
    }
    cut
}

/// CronList's text: a count, then one block per job separated by `---` lines.
fn list_text(jobs: &[JobView]) -> String {
    if jobs.is_empty() {
        return "cron_jobs: 0\nNo cron jobs scheduled.".into();
    }
    let blocks: Vec<String> = jobs
        .iter()
        .map(|job| {
            let next = job.next_fire_at.as_ref().map_or_else(|| "none".to_owned(), iso);
            format!(
                "id: {}\ncron: {}\nhumanSchedule: {}\nprompt: {}\nnextFireAt: {next}\nrecurring: {}\nageDays: {}\nstale: {}",
                job.id,
                job.cron,
                job.human_schedule,
                list_prompt(&job.prompt),
                job.recurring,
                job.age_days,
                job.stale,
            )
        })
        .collect();
    format!("cron_jobs: {}\n{}", jobs.len(), blocks.join("\n---\n"))
}

/// The prompt as a JSON string, cut at a character boundary to about [`LIST_PROMPT_BYTES`] bytes.
fn list_prompt(prompt: &str) -> String {
    if prompt.len() <= LIST_PROMPT_BYTES {
        return Value::from(prompt).to_string();
    }
    let mut end = LIST_PROMPT_BYTES;
    while !prompt.is_char_boundary(end) {
        end -= 1;
    }
    Value::from(format!("{}…", &prompt[..end])).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use kimi_core::Effect;
    use kimi_core::{Clock, ManualClock};
    use pretty_assertions::assert_eq;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn ctx() -> CallContext {
        CallContext::new("tc-1", None, CancellationToken::new())
    }

    struct Tools {
        store: Arc<CronStore>,
        clock: Arc<ManualClock>,
        create: Arc<CronCreate>,
        list: Arc<CronList>,
        delete: Arc<CronDelete>,
        _dir: tempfile::TempDir,
    }

    fn tools() -> Tools {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(at("2025-01-06T09:00:30Z")));
        let store = Arc::new(CronStore::load(dir.path(), Arc::clone(&clock) as Arc<dyn Clock>));
        Tools {
            create: Arc::new(CronCreate::new(Arc::clone(&store))),
            list: Arc::new(CronList::new(Arc::clone(&store))),
            delete: Arc::new(CronDelete::new(Arc::clone(&store))),
            store,
            clock,
            _dir: dir,
        }
    }

    /// Plans and runs a call, returning the declared effect and the result.
    async fn call<T: Tool>(tool: &Arc<T>, args: Value) -> (Option<Effect>, ToolReturnValue) {
        match Arc::clone(tool).plan(args, ctx()).await {
            Ok(plan) => (Some(plan.effect), plan.run.await),
            Err(value) => (None, value),
        }
    }

    fn text(value: &ToolReturnValue) -> String {
        match &value.output {
            kimi_wire::message::ToolOutput::Text(text) => text.clone(),
            other => panic!("not text: {other:?}"),
        }
    }

    #[tokio::test]
    async fn create_asks_for_exactly_this_job_and_reports_it() {
        let t = tools();
        let args = json!({"cron": "*/5 * * * *", "prompt": "check the deploy"});
        let (effect, value) = call(&t.create, args.clone()).await;
        let Some(Effect::SideEffect(ask)) = effect else {
            panic!("needs approval: {effect:?}")
        };
        assert!(
            ask.action
                .starts_with("schedule recurring prompt `*/5 * * * *` #"),
            "{}",
            ask.action
        );
        assert_eq!(
            ask.description,
            "Schedule a recurring prompt at `*/5 * * * *`: check the deploy"
        );
        assert_eq!(
            ask.display,
            vec![DisplayBlock::Brief {
                text: "check the deploy".into()
            }]
        );
        assert_eq!(ask.writes, vec![t.store.file().unwrap().to_path_buf()]);
        assert!(!value.is_error, "{value:?}");
        let job = &t.store.list()[0];
        assert_eq!(
            text(&value),
            format!(
                "id: {}\nhumanSchedule: every 5 minutes\nrecurring: true\nnextFireAt: {}",
                job.id,
                iso(job.next_fire_at.as_ref().unwrap())
            )
        );
        assert_eq!(value.message, format!("Cron job {} scheduled.", job.id));

        // The same payload gets the same action; a different prompt or recurrence another one.
        let again = |args: Value| {
            let create = Arc::clone(&t.create);
            async move {
                match create.plan(args, ctx()).await.unwrap().effect {
                    Effect::SideEffect(ask) => ask.action,
                    Effect::ReadOnly => panic!("read-only"),
                }
            }
        };
        assert_eq!(again(args.clone()).await, ask.action);
        assert_ne!(
            again(json!({"cron": "*/5 * * * *", "prompt": "check the deploy!"})).await,
            ask.action
        );
        let once =
            again(json!({"cron": "*/5 * * * *", "prompt": "check the deploy", "recurring": false})).await;
        assert!(once.starts_with("schedule one-shot prompt"), "{once}");
    }

    #[tokio::test]
    async fn create_errors_come_back_as_tool_errors() {
        let t = tools();
        let (_, value) = call(&t.create, json!({"cron": "61 * * * *", "prompt": "x"})).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "",
                "Invalid cron expression `61 * * * *`: minute field `61`: 61 is outside 0-59",
                "Not scheduled"
            )
        );
        let (effect, value) = call(&t.create, json!({"prompt": "x"})).await;
        assert!(effect.is_none());
        assert!(
            value.message.starts_with("Error validating JSON arguments: "),
            "{}",
            value.message
        );
        assert!(t.store.is_empty());
    }

    #[tokio::test]
    async fn list_shows_every_job_soonest_first() {
        let t = tools();
        let (_, value) = call(&t.list, json!({})).await;
        assert_eq!(
            value,
            ToolReturnValue::ok("cron_jobs: 0\nNo cron jobs scheduled.", "")
        );

        let long = format!("{}{}", "a".repeat(199), "é and more");
        t.store.create("*/5 * * * *", &long, true).await.unwrap();
        t.store.create("2 * * * *", "say \"hi\"", false).await.unwrap();
        t.clock.advance(chrono::Duration::days(1));
        let (effect, value) = call(&t.list, json!({})).await;
        assert_eq!(effect, Some(Effect::ReadOnly));
        let jobs = t.store.list();
        let fire = |i: usize| iso(jobs[i].next_fire_at.as_ref().unwrap());
        assert_eq!(
            text(&value),
            format!(
                "cron_jobs: 2\n\
                 id: {}\ncron: 2 * * * *\nhumanSchedule: every hour at :02\nprompt: \"say \\\"hi\\\"\"\nnextFireAt: {}\nrecurring: false\nageDays: 1\nstale: false\n\
                 ---\n\
                 id: {}\ncron: */5 * * * *\nhumanSchedule: every 5 minutes\nprompt: \"{}…\"\nnextFireAt: {}\nrecurring: true\nageDays: 1\nstale: false",
                jobs[0].id,
                fire(0),
                jobs[1].id,
                "a".repeat(199),
                fire(1)
            )
        );
    }

    #[tokio::test]
    async fn delete_asks_then_deletes_and_reports_unknown_ids() {
        let t = tools();
        let created = t.store.create("*/5 * * * *", "poll", true).await.unwrap();
        let (effect, value) = call(&t.delete, json!({"id": created.id.as_str()})).await;
        let Some(Effect::SideEffect(ask)) = effect else {
            panic!("needs approval")
        };
        assert_eq!(ask.action, "delete cron job");
        assert_eq!(
            ask.description,
            format!("Delete cron job {} (every 5 minutes): poll", created.id)
        );
        assert_eq!(text(&value), format!("Deleted cron job {}.", created.id));
        assert!(t.store.is_empty());

        let (effect, value) = call(&t.delete, json!({"id": created.id.as_str()})).await;
        assert!(effect.is_none(), "nothing to approve");
        assert_eq!(
            value,
            ToolReturnValue::error("", format!("No cron job with id {}", created.id), "Not found")
        );
    }

    #[test]
    fn schemas() {
        let t = tools();
        assert_eq!(t.create.spec().parameters["required"], json!(["cron", "prompt"]));
        assert_eq!(
            t.create.spec().parameters["properties"]["recurring"]["default"],
            json!(true)
        );
        assert_eq!(t.delete.spec().parameters["required"], json!(["id"]));
        assert_eq!(
            t.list.spec().parameters,
            json!({"type": "object", "properties": {}})
        );
    }
}
