//! What subagents are made of besides the session: the types an agent file offers, and the models a
//! subagent may switch to.

use std::collections::BTreeMap;
use std::sync::Arc;

use kimi_llm::ChatProvider;

use crate::agent_spec::{AgentSpec, AgentSpecError};
use crate::soul::ModelInfo;

/// One subagent type the agent file offers.
#[derive(Debug, Clone)]
pub struct SubagentType {
    /// Its name (`coder`, `explore`, `plan`).
    pub name: String,
    /// What it is good at.
    pub description: String,
    /// When to pick it.
    pub when_to_use: String,
    /// Its tool paths (agent-file form).
    pub tools: Vec<String>,
    /// Its rendered system prompt.
    pub system_prompt: String,
}

impl SubagentType {
    /// Loads type `name` from its agent file at `path`, rendering its prompt with `vars` (the
    /// session's built-in prompt variables).
    pub(crate) fn load(
        name: &str,
        description: &str,
        path: &str,
        vars: &BTreeMap<String, String>,
    ) -> Result<Self, AgentSpecError> {
        let spec = AgentSpec::load(path)?;
        let mut vars = vars.clone();
        vars.extend(spec.system_prompt_args.clone());
        let system_prompt = crate::prompt::render(&spec.system_prompt_template()?, &vars);
        Ok(Self {
            name: name.to_owned(),
            description: description.to_owned(),
            when_to_use: spec.when_to_use.split_whitespace().collect::<Vec<_>>().join(" "),
            tools: spec.effective_tools(),
            system_prompt,
        })
    }
}

/// A provider and its model facts.
pub(crate) type ModelChoice = (Option<Arc<dyn ChatProvider>>, ModelInfo);

/// Builds the provider for a model alias of the configuration, for a subagent run with `model`.
#[derive(Clone)]
pub(crate) struct ModelSwitch(Arc<BuildModel>);

type BuildModel = dyn Fn(&str) -> Result<ModelChoice, String> + Send + Sync;

impl ModelSwitch {
    /// A switch calling `build` with the alias.
    pub(crate) fn new(build: impl Fn(&str) -> Result<ModelChoice, String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(build))
    }

    pub(crate) fn build(&self, alias: &str) -> Result<ModelChoice, String> {
        (self.0)(alias)
    }
}

impl std::fmt::Debug for ModelSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelSwitch")
    }
}
