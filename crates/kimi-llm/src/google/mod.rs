//! `gemini` / `google_genai` (the Gemini API, by API key) and `vertexai` (Gemini through Vertex AI, by
//! Google credentials): `streamGenerateContent` over SSE.
//!
//! Reference: kosong's `GoogleGenAI` on the google-genai SDK, as kimi-cli's `llm.py` builds it
//! (`base_url` and `custom_headers` as the SDK's HTTP options, `vertexai=True` for `vertexai`, whose
//! `env` table the reference copies into the process environment). What the SDK decides is decided
//! here the same way, from the config and the environment (the provider's `env` table first):
//! - Gemini API: `<base_url>/<version>/models/<model>:streamGenerateContent?alt=sse` with
//!   `x-goog-api-key`; the key is `api_key`, else `GOOGLE_API_KEY`, else `GEMINI_API_KEY`; the version
//!   is `GOOGLE_GENAI_API_VERSION` (`beta` meaning `v1beta`), else `v1`.
//! - Vertex AI: `<base_url>/<version>/[projects/<p>/locations/<l>/]publishers/google/models/<model>...`,
//!   version `v1beta1` unless `GOOGLE_GENAI_API_VERSION` says otherwise. The project and location come
//!   from `GOOGLE_CLOUD_PROJECT` and `GOOGLE_CLOUD_LOCATION` (the location defaults to `global`), the
//!   project else from the credentials; an explicit `api_key` (express mode) takes precedence over
//!   them, and they take precedence over a key from the environment. Without a key, requests carry an
//!   OAuth token from the application default credentials (`auth.rs`). One difference: on a base URL
//!   outside `googleapis.com` without an explicit key, the SDK posts to the bare base URL without
//!   credentials (for a gateway that authenticates by custom headers); we keep the standard path and
//!   the credentials there too.
//!
//! `request.rs` builds the body, `stream.rs` reads the chunks, `errors.rs` words failures as the
//! reference does.

mod auth;
mod errors;
mod jwt;
mod request;
mod stream;

use std::fmt;
use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName};
use serde_json::{Value, json};

use crate::http::{LazyClient, secret_header};
use crate::{ChatError, ChatProvider, ChatRequest, ChatStream, ProviderSettings};
use auth::{CredentialSource, TokenSource};

/// Which Google API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoogleApi {
    /// The Gemini API (provider types `gemini` and `google_genai`).
    Gemini,
    /// Gemini through Vertex AI (provider type `vertexai`).
    VertexAi,
}

/// The reference's text when the Gemini API has no key.
const NO_API_KEY: &str = "No API key was provided. Please pass a valid API key. Learn how to create an API key \
     at https://aistudio.google.com/docs/api-key.";

/// Builds a Google provider; `env` answers environment variables (the provider's `env` table, then the
/// process). See [`GoogleProvider::new`].
pub fn create(
    settings: ProviderSettings,
    api: GoogleApi,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ChatProvider>, ChatError> {
    Ok(Arc::new(GoogleProvider::new(settings, api, env)?))
}

/// How Vertex AI requests are authorized.
#[derive(Debug)]
enum VertexAuth {
    /// Express mode: an API key.
    ApiKey(String),
    /// An OAuth token from Google credentials (boxed: it holds the token cache).
    OAuth(Box<TokenSource>),
}

/// Where requests go and how they are authorized.
#[derive(Debug)]
enum Target {
    Gemini {
        api_key: String,
    },
    Vertex {
        project: Option<String>,
        location: Option<String>,
        auth: VertexAuth,
    },
}

/// The Gemini / Vertex AI provider; see the module docs.
pub struct GoogleProvider {
    settings: ProviderSettings,
    client: LazyClient,
    custom_headers: HeaderMap,
    api_version: String,
    target: Target,
}

impl fmt::Debug for GoogleProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            Target::Gemini { .. } => "gemini".to_owned(),
            Target::Vertex {
                project,
                location,
                auth,
            } => format!(
                "vertexai project={project:?} location={location:?} auth={}",
                match auth {
                    VertexAuth::ApiKey(_) => "api key",
                    VertexAuth::OAuth(_) => "oauth",
                }
            ),
        };
        f.debug_struct("GoogleProvider")
            .field("settings", &self.settings)
            .field("api_version", &self.api_version)
            .field("target", &target)
            .finish_non_exhaustive()
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl GoogleProvider {
    /// Resolves the endpoint and credentials as the module docs say. Fails on an empty base URL or
    /// model, an invalid custom header, or a Gemini API provider without any key. Credential files are
    /// not read here but at the first request.
    pub fn new(
        settings: ProviderSettings,
        api: GoogleApi,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ChatError> {
        let custom_headers = settings.validate()?;
        let var = |name: &str| non_empty(env(name));
        let env_key = var("GOOGLE_API_KEY").or_else(|| var("GEMINI_API_KEY"));
        let explicit_key = non_empty(Some(settings.api_key.clone()));
        let version = var("GOOGLE_GENAI_API_VERSION");
        let (api_version, target) = match api {
            GoogleApi::Gemini => {
                let api_key = explicit_key
                    .or(env_key)
                    .ok_or_else(|| ChatError::provider(NO_API_KEY))?;
                let version = match version.as_deref() {
                    None => "v1".to_owned(),
                    Some("beta") => "v1beta".to_owned(),
                    Some(other) => other.to_owned(),
                };
                (version, Target::Gemini { api_key })
            }
            GoogleApi::VertexAi => {
                let version = match version.as_deref() {
                    None | Some("beta") => "v1beta1".to_owned(),
                    Some(other) => other.to_owned(),
                };
                (version, vertex_target(&settings, explicit_key, env_key, env))
            }
        };
        Ok(Self {
            client: settings.client(),
            settings,
            custom_headers,
            api_version,
            target,
        })
    }

    /// The model's resource path as the SDK writes it.
    fn model_path(&self) -> String {
        let model = self.settings.model.as_str();
        match self.target {
            Target::Gemini { .. } if model.starts_with("models/") || model.starts_with("tunedModels/") => {
                model.to_owned()
            }
            Target::Gemini { .. } => format!("models/{model}"),
            Target::Vertex { .. }
                if ["projects/", "models/", "publishers/"]
                    .iter()
                    .any(|p| model.starts_with(p)) =>
            {
                model.to_owned()
            }
            Target::Vertex { .. } => match model.split_once('/') {
                Some((publisher, id)) => format!("publishers/{publisher}/models/{id}"),
                None => format!("publishers/google/models/{model}"),
            },
        }
    }

    /// The URL of a streamed call, and the headers that authorize it.
    async fn endpoint(&self) -> Result<(String, HeaderMap), ChatError> {
        let mut headers = self.settings.json_headers();
        let mut path = self.model_path();
        match &self.target {
            Target::Gemini { api_key } => insert_secret(&mut headers, "x-goog-api-key", api_key),
            Target::Vertex {
                project,
                location,
                auth,
            } => {
                match auth {
                    VertexAuth::OAuth(tokens) => {
                        let access = tokens.access().await?;
                        let bearer = format!("Bearer {}", access.token);
                        insert_secret(&mut headers, AUTHORIZATION.as_str(), &bearer);
                        if let Some(quota) = access.quota_project.as_deref().and_then(|q| q.parse().ok()) {
                            headers.insert(HeaderName::from_static("x-goog-user-project"), quota);
                        }
                    }
                    VertexAuth::ApiKey(key) => insert_secret(&mut headers, "x-goog-api-key", key),
                }
                if (project.is_some() || location.is_some()) && !path.starts_with("projects/") {
                    let project = match (project, auth) {
                        (Some(project), _) => project.clone(),
                        (None, VertexAuth::OAuth(tokens)) => {
                            tokens.project().await?.ok_or_else(no_project)?
                        }
                        (None, VertexAuth::ApiKey(_)) => return Err(no_project()),
                    };
                    let location = location.as_deref().unwrap_or("global");
                    path = format!("projects/{project}/locations/{location}/{path}");
                }
            }
        }
        for (name, value) in &self.custom_headers {
            headers.insert(name.clone(), value.clone());
        }
        let url = format!(
            "{}/{}/{path}:streamGenerateContent?alt=sse",
            self.settings.base(),
            self.api_version
        );
        Ok((url, headers))
    }
}

fn no_project() -> ChatError {
    ChatError::provider(
        "Vertex AI needs a project: set GOOGLE_CLOUD_PROJECT (for example in the provider's `env` table)",
    )
}

fn insert_secret(headers: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(name), Some(value)) = (HeaderName::from_bytes(name.as_bytes()), secret_header(value)) {
        headers.insert(name, value);
    }
}

/// Project, location and credentials of a Vertex AI provider, decided as the google-genai SDK does
/// (except for base URLs outside googleapis.com, see below).
fn vertex_target(
    settings: &ProviderSettings,
    explicit_key: Option<String>,
    env_key: Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Target {
    let mut project = non_empty(env("GOOGLE_CLOUD_PROJECT"));
    let mut location = non_empty(env("GOOGLE_CLOUD_LOCATION"));
    let in_env = project.is_some() || location.is_some();
    let api_key = match (explicit_key, env_key) {
        (Some(key), _) => {
            if in_env {
                // An explicit key wins over the environment's project and location.
                project = None;
                location = None;
            }
            Some(key)
        }
        // A project or location from the environment wins over a key from the environment.
        (None, Some(_)) if in_env => None,
        (None, env_key) => env_key,
    };
    // Reference: `global` on a Google host. Elsewhere the SDK would post to the bare base URL without
    // credentials (an API gateway authenticating through custom headers); we keep the standard path
    // and credentials wherever the environment names a project.
    let google_host = settings.base().ends_with(".googleapis.com");
    if location.is_none() && api_key.is_none() && (google_host || project.is_some()) {
        location = Some("global".to_owned());
    }
    let auth = match api_key {
        Some(key) => VertexAuth::ApiKey(key),
        None => VertexAuth::OAuth(Box::new(TokenSource::new(CredentialSource::from_env(env)))),
    };
    Target::Vertex {
        project,
        location,
        auth,
    }
}

/// `generationConfig.thinkingConfig` for thinking on or off. Reference: Gemini 3 models take a
/// thinking level (off leaves the default level), others a budget (32 000 for "high", 0 for off).
pub(crate) fn thinking_config(model: &str, thinking: Option<bool>) -> Option<Value> {
    let on = thinking?;
    Some(match (model.contains("gemini-3"), on) {
        (true, true) => json!({"includeThoughts": true, "thinkingLevel": "HIGH"}),
        (true, false) => json!({"includeThoughts": true}),
        (false, true) => json!({"thinkingBudget": 32000, "includeThoughts": true}),
        (false, false) => json!({"thinkingBudget": 0, "includeThoughts": false}),
    })
}

#[async_trait::async_trait]
impl ChatProvider for GoogleProvider {
    fn model_name(&self) -> &str {
        &self.settings.model
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let built = request::build(&self.settings.model, self.settings.thinking, &request)?;
        let body = serde_json::to_vec(&built.body)
            .map_err(|e| ChatError::provider(format!("Cannot encode the request: {e}")))?;
        let (url, headers) = self.endpoint().await?;
        tracing::debug!(url = %url, model = %self.settings.model, bytes = body.len(), "streamGenerateContent request");
        let response = match crate::http::post(&self.client, &url, headers, body).await? {
            Ok(response) => response,
            Err(failure) => {
                if failure.status == 401
                    && let Target::Vertex {
                        auth: VertexAuth::OAuth(tokens),
                        ..
                    } = &self.target
                {
                    // A revoked or expired token: the next attempt fetches a new one.
                    tokens.invalidate().await;
                }
                return Err(errors::from_failure(failure));
            }
        };
        Ok(crate::sse::events(response, stream::Decoder::new(built.names)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |key: &str| vars.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned())
    }

    async fn url(
        base: &str,
        key: &str,
        api: GoogleApi,
        vars: &'static [(&'static str, &'static str)],
    ) -> String {
        let settings = ProviderSettings::new(base, key, "gemini-2.5-pro");
        let provider = GoogleProvider::new(settings, api, &env_of(vars)).unwrap();
        provider.endpoint().await.unwrap().0
    }

    #[tokio::test]
    async fn endpoints_follow_the_sdk() {
        let g = "https://generativelanguage.googleapis.com";
        assert_eq!(
            url(g, "k", GoogleApi::Gemini, &[]).await,
            format!("{g}/v1/models/gemini-2.5-pro:streamGenerateContent?alt=sse")
        );
        assert_eq!(
            url(
                &format!("{g}/"),
                "",
                GoogleApi::Gemini,
                &[("GEMINI_API_KEY", "k"), ("GOOGLE_GENAI_API_VERSION", "beta")]
            )
            .await,
            format!("{g}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse")
        );
        let v = "https://us-central1-aiplatform.googleapis.com";
        let project = &[
            ("GOOGLE_CLOUD_PROJECT", "p1"),
            ("GOOGLE_CLOUD_LOCATION", "us-central1"),
            ("GOOGLE_API_KEY", "env-key"),
        ];
        // The environment's project wins over the environment's key (which then goes unused).
        let settings = ProviderSettings::new(v, "", "gemini-2.5-pro");
        let provider = GoogleProvider::new(settings, GoogleApi::VertexAi, &env_of(project)).unwrap();
        assert!(matches!(
            &provider.target,
            Target::Vertex { project: Some(p), location: Some(l), auth: VertexAuth::OAuth(_) } if p == "p1" && l == "us-central1"
        ));
        // An explicit key (express mode) wins over the environment's project.
        assert_eq!(
            url(v, "explicit", GoogleApi::VertexAi, project).await,
            format!("{v}/v1beta1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse")
        );
        // Without a location, a Google host means `global`.
        let settings = ProviderSettings::new("https://aiplatform.googleapis.com/", "", "gemini-2.5-pro");
        let provider = GoogleProvider::new(
            settings,
            GoogleApi::VertexAi,
            &env_of(&[("GOOGLE_CLOUD_PROJECT", "p2")]),
        )
        .unwrap();
        assert!(matches!(
            &provider.target,
            Target::Vertex { project: Some(p), location: Some(l), .. } if p == "p2" && l == "global"
        ));
    }

    #[test]
    fn a_gemini_provider_needs_a_key_and_other_hosts_keep_the_project_path() {
        let settings =
            ProviderSettings::new("https://generativelanguage.googleapis.com", "", "gemini-2.5-pro");
        assert_eq!(
            GoogleProvider::new(settings, GoogleApi::Gemini, &env_of(&[])).unwrap_err(),
            ChatError::provider(NO_API_KEY)
        );
        let settings = ProviderSettings::new("http://127.0.0.1:9", "", "gemini-2.5-pro");
        let provider = GoogleProvider::new(
            settings,
            GoogleApi::VertexAi,
            &env_of(&[("GOOGLE_CLOUD_PROJECT", "p")]),
        )
        .unwrap();
        assert!(matches!(
            &provider.target,
            Target::Vertex { project: Some(p), location: Some(l), auth: VertexAuth::OAuth(_) }
                if p == "p" && l == "global"
        ));
    }

    /// Without `GOOGLE_CLOUD_PROJECT`, the project is the credentials': a service-account key file's
    /// `project_id`, or the metadata server's `project/project-id` (the mock serves both, and the tokens).
    #[tokio::test]
    async fn the_project_comes_from_the_credentials_when_the_environment_names_none() {
        use wiremock::matchers::{header, method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};

        let server = MockServer::start().await;
        let token = ResponseTemplate::new(200)
            .set_body_json(json!({"access_token": "ya29.t", "expires_in": 3600, "token_type": "Bearer"}));
        Mock::given(method("POST"))
            .and(path("/token"))
            .respond_with(token.clone())
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(
                "/computeMetadata/v1/instance/service-accounts/default/token",
            ))
            .and(header("metadata-flavor", "Google"))
            .respond_with(token)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/computeMetadata/v1/project/project-id"))
            .and(header("metadata-flavor", "Google"))
            .respond_with(ResponseTemplate::new(200).set_body_string("meta-project\n"))
            .mount(&server)
            .await;
        let dir = tempfile::tempdir().unwrap();
        let key_file = dir.path().join("sa.json");
        let key = json!({"type": "service_account", "client_email": "bot@p.iam", "project_id": "file-project",
            "private_key": include_str!("../../tests/fixtures/google/test_rsa_key.pem"),
            "token_uri": format!("{}/token", server.uri())});
        std::fs::write(&key_file, key.to_string()).unwrap();
        let key_file = key_file.to_string_lossy().into_owned();
        let metadata_host = server.address().to_string();
        let nowhere = dir.path().join("no-gcloud").to_string_lossy().into_owned();
        let base = "https://aiplatform.googleapis.com";

        for (vars, project) in [
            (vec![("GOOGLE_APPLICATION_CREDENTIALS", key_file)], "file-project"),
            (
                vec![("GCE_METADATA_HOST", metadata_host), ("CLOUDSDK_CONFIG", nowhere)],
                "meta-project",
            ),
        ] {
            let env = move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.clone());
            let settings = ProviderSettings::new(base, "", "gemini-2.5-pro");
            let provider = GoogleProvider::new(settings, GoogleApi::VertexAi, &env).unwrap();
            assert!(matches!(
                &provider.target,
                Target::Vertex { project: None, location: Some(l), auth: VertexAuth::OAuth(_) } if l == "global"
            ));
            let (url, headers) = provider.endpoint().await.unwrap();
            assert_eq!(
                url,
                format!(
                    "{base}/v1beta1/projects/{project}/locations/global/publishers/google/models/\
                     gemini-2.5-pro:streamGenerateContent?alt=sse"
                )
            );
            assert_eq!(headers[AUTHORIZATION], "Bearer ya29.t");
        }
    }

    #[test]
    fn thinking_configs() {
        assert_eq!(thinking_config("gemini-2.5-pro", None), None);
        assert_eq!(
            thinking_config("gemini-3-pro-preview", Some(true)),
            Some(json!({"includeThoughts": true, "thinkingLevel": "HIGH"}))
        );
        assert_eq!(
            thinking_config("gemini-2.5-flash", Some(false)),
            Some(json!({"thinkingBudget": 0, "includeThoughts": false}))
        );
    }
}
