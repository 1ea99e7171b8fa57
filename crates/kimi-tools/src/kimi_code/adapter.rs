//! A kimi-code tool served by a shared implementation: its own spec (name, description, parameters),
//! its arguments turned into the implementation's, and the implementation's result turned into its own.
//! The implementation plans and runs the call as it always does (its effect, approval and access are
//! unchanged), so both agents share one behaviour per idea.

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::{CallContext, Plan, Tool};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use serde_json::Value;

/// Turns the model's arguments into the implementation's, or refuses them with the tool's error.
pub(crate) type ArgsAdapter = dyn Fn(Value) -> Result<Value, ToolReturnValue> + Send + Sync;

/// Turns the implementation's result (or its refusal) into the tool's.
pub(crate) type ResultAdapter = fn(ToolReturnValue) -> ToolReturnValue;

/// A tool of the profile over `inner`.
pub(crate) struct Adapted {
    spec: ToolSpec,
    inner: Arc<dyn Tool>,
    args: Box<ArgsAdapter>,
    result: ResultAdapter,
}

impl std::fmt::Debug for Adapted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapted")
            .field("name", &self.spec.name)
            .field("inner", &self.inner.spec().name)
            .finish_non_exhaustive()
    }
}

impl Adapted {
    /// `inner` shown to the model as `spec`, arguments and results passed through unchanged.
    pub(crate) fn new(inner: Arc<dyn Tool>, spec: ToolSpec) -> Self {
        Self {
            spec,
            inner,
            args: Box::new(Ok),
            result: std::convert::identity,
        }
    }

    /// With `adapter` turning the model's arguments into `inner`'s.
    pub(crate) fn args(
        mut self,
        adapter: impl Fn(Value) -> Result<Value, ToolReturnValue> + Send + Sync + 'static,
    ) -> Self {
        self.args = Box::new(adapter);
        self
    }

    /// With `adapter` turning `inner`'s results into the tool's.
    pub(crate) fn result(mut self, adapter: ResultAdapter) -> Self {
        self.result = adapter;
        self
    }
}

impl Tool for Adapted {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let result = self.result;
            let args = (self.args)(args)?;
            match Arc::clone(&self.inner).plan(args, ctx).await {
                Ok(mut plan) => {
                    let run = plan.run;
                    plan.run = Box::pin(async move { result(run.await) });
                    Ok(plan)
                }
                Err(refused) => Err(result(refused)),
            }
        })
    }
}
