//! Google OAuth access tokens for Vertex AI: where the credentials are, trading them for a token, and
//! refreshing it before it expires.
//!
//! Application default credentials are looked for as google-auth does: the key file named by
//! `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's `application_default_credentials.json` (under
//! `CLOUDSDK_CONFIG`, else `~/.config/gcloud`), else the metadata server of a Google Cloud machine
//! (`GCE_METADATA_HOST`, else `metadata.google.internal`). Key files of type `service_account` are traded
//! with a signed assertion (see `jwt.rs`), `authorized_user` files (gcloud's) with their refresh token.
//!
//! Nothing is read before the first request: a session that never calls the model never touches the
//! credentials. A token is reused until less than [`REFRESH_MARGIN`] of its life is left.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;

use super::jwt::{Claims, SigningKey, assertion};
use crate::ChatError;
use crate::http::{ClientTimeouts, LazyClient, chain};

/// How long before its expiry a token is replaced (google-auth's refresh threshold).
pub(crate) const REFRESH_MARGIN: Duration = Duration::from_secs(225);

/// The token endpoint when a key file names none.
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// google-auth's text when no credentials are found anywhere.
const NO_DEFAULT_CREDENTIALS: &str = "Your default credentials were not found. To set up Application Default \
     Credentials, see https://cloud.google.com/docs/authentication/external/set-up-adc for more information.";

/// Where the credentials are looked for, decided from the environment when the provider is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CredentialSource {
    /// `GOOGLE_APPLICATION_CREDENTIALS`.
    pub explicit_file: Option<PathBuf>,
    /// gcloud's application default credentials file, if a config directory is known.
    pub gcloud_file: Option<PathBuf>,
    /// The metadata server's host.
    pub metadata_host: String,
}

impl CredentialSource {
    /// The places `env` points to.
    pub(crate) fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Self {
        let gcloud_dir = env("CLOUDSDK_CONFIG")
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|home| Path::new(&home).join(".config").join("gcloud")));
        Self {
            explicit_file: env("GOOGLE_APPLICATION_CREDENTIALS").map(PathBuf::from),
            gcloud_file: gcloud_dir.map(|dir| dir.join("application_default_credentials.json")),
            metadata_host: env("GCE_METADATA_HOST").unwrap_or_else(|| "metadata.google.internal".to_owned()),
        }
    }
}

/// A key file's fields that matter here; `type` says which apply.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    private_key: Option<String>,
    private_key_id: Option<String>,
    token_uri: Option<String>,
    project_id: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    refresh_token: Option<String>,
    quota_project_id: Option<String>,
}

/// Credentials ready to be traded for tokens.
#[derive(Debug)]
enum Credentials {
    ServiceAccount {
        email: String,
        /// Boxed: an RSA key pair is large beside the other variants.
        key: Box<SigningKey>,
        key_id: Option<String>,
        token_uri: String,
        project_id: Option<String>,
        quota_project_id: Option<String>,
    },
    AuthorizedUser {
        client_id: String,
        client_secret: String,
        refresh_token: String,
        token_uri: String,
        quota_project_id: Option<String>,
    },
    Metadata {
        root: String,
    },
}

/// A token and when it stops being usable.
#[derive(Debug, Clone)]
struct Token {
    value: String,
    expires_at: Instant,
}

/// What a request needs from the credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Access {
    /// The bearer token.
    pub token: String,
    /// The project billed for quota (`x-goog-user-project`), when the credentials name one.
    pub quota_project: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    credentials: Option<Arc<Credentials>>,
    token: Option<Token>,
}

/// Vertex AI's source of access tokens; see the module docs.
#[derive(Debug)]
pub(crate) struct TokenSource {
    source: CredentialSource,
    client: LazyClient,
    /// Held across the token request so that concurrent calls wait for one refresh instead of each
    /// starting its own.
    state: tokio::sync::Mutex<State>,
}

impl TokenSource {
    pub(crate) fn new(source: CredentialSource) -> Self {
        Self {
            source,
            client: LazyClient::new(ClientTimeouts {
                connect: Some(Duration::from_secs(5)),
                read: None,
                total: Some(Duration::from_secs(60)),
            }),
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    /// A token valid for at least [`REFRESH_MARGIN`], fetched now if the cached one is not.
    pub(crate) async fn access(&self) -> Result<Access, ChatError> {
        let mut state = self.state.lock().await;
        let credentials = self.credentials(&mut state).await?;
        let quota_project = match credentials.as_ref() {
            Credentials::ServiceAccount { quota_project_id, .. }
            | Credentials::AuthorizedUser { quota_project_id, .. } => quota_project_id.clone(),
            Credentials::Metadata { .. } => None,
        };
        if let Some(token) = &state.token
            && token.expires_at > Instant::now() + REFRESH_MARGIN
        {
            return Ok(Access {
                token: token.value.clone(),
                quota_project,
            });
        }
        let token = self.fetch(&credentials).await?;
        let value = token.value.clone();
        state.token = Some(token);
        Ok(Access {
            token: value,
            quota_project,
        })
    }

    /// Forgets the cached token (after the API refused it), so the next request fetches another.
    pub(crate) async fn invalidate(&self) {
        self.state.lock().await.token = None;
    }

    /// The project the credentials belong to, for when the environment names none.
    pub(crate) async fn project(&self) -> Result<Option<String>, ChatError> {
        let credentials = {
            let mut state = self.state.lock().await;
            self.credentials(&mut state).await?
        };
        match credentials.as_ref() {
            Credentials::ServiceAccount { project_id, .. } => Ok(project_id.clone()),
            Credentials::AuthorizedUser { quota_project_id, .. } => Ok(quota_project_id.clone()),
            Credentials::Metadata { root } => {
                let client = self.http()?;
                let response = client
                    .get(format!("{root}project/project-id"))
                    .header("Metadata-Flavor", "Google")
                    .send()
                    .await
                    .map_err(|e| transport("the metadata server", &e))?;
                if !response.status().is_success() {
                    return Ok(None);
                }
                let text = response
                    .text()
                    .await
                    .map_err(|e| transport("the metadata server", &e))?;
                Ok(Some(text.trim().to_owned()).filter(|p| !p.is_empty()))
            }
        }
    }

    fn http(&self) -> Result<&reqwest::Client, ChatError> {
        self.client
            .get()
            .map_err(|e| ChatError::provider(format!("Cannot create the HTTP client: {e}")))
    }

    async fn credentials(&self, state: &mut State) -> Result<Arc<Credentials>, ChatError> {
        if let Some(credentials) = &state.credentials {
            return Ok(credentials.clone());
        }
        let credentials = Arc::new(self.load()?);
        state.credentials = Some(credentials.clone());
        Ok(credentials)
    }

    fn load(&self) -> Result<Credentials, ChatError> {
        if let Some(path) = &self.source.explicit_file {
            if !path.exists() {
                return Err(credentials_error(format!(
                    "File {} was not found.",
                    path.display()
                )));
            }
            return read_key_file(path);
        }
        if let Some(path) = self.source.gcloud_file.as_deref().filter(|p| p.is_file()) {
            return read_key_file(path);
        }
        Ok(Credentials::Metadata {
            root: format!("http://{}/computeMetadata/v1/", self.source.metadata_host),
        })
    }

    async fn fetch(&self, credentials: &Credentials) -> Result<Token, ChatError> {
        let client = self.http()?;
        let request = match credentials {
            Credentials::ServiceAccount {
                email,
                key,
                key_id,
                token_uri,
                ..
            } => {
                let issued_at = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let claims = Claims {
                    issuer: email,
                    audience: token_uri,
                    key_id: key_id.as_deref(),
                    issued_at,
                };
                let jwt = assertion(key, &claims).map_err(credentials_error)?;
                let form = form_encode(&[
                    ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                    ("assertion", &jwt),
                ]);
                form_post(client, token_uri, form)
            }
            Credentials::AuthorizedUser {
                client_id,
                client_secret,
                refresh_token,
                token_uri,
                ..
            } => {
                let form = form_encode(&[
                    ("grant_type", "refresh_token"),
                    ("client_id", client_id),
                    ("client_secret", client_secret),
                    ("refresh_token", refresh_token),
                ]);
                form_post(client, token_uri, form)
            }
            Credentials::Metadata { root } => client
                .get(format!("{root}instance/service-accounts/default/token"))
                .header("Metadata-Flavor", "Google"),
        };
        let metadata = matches!(credentials, Credentials::Metadata { .. });
        let response = request.send().await.map_err(|e| {
            if metadata && e.is_connect() {
                // Not on Google Cloud and no key file: google-auth's answer.
                credentials_error(NO_DEFAULT_CREDENTIALS.to_owned())
            } else {
                transport("the token endpoint", &e)
            }
        })?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| transport("the token endpoint", &e))?;
        token_from_answer(status.as_u16(), &body)
    }
}

fn form_post(client: &reqwest::Client, url: &str, form: String) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form)
}

/// Reads the token endpoint's answer: `access_token` and `expires_in`, or an OAuth error.
fn token_from_answer(status: u16, body: &str) -> Result<Token, ChatError> {
    #[derive(Deserialize)]
    struct Answer {
        access_token: Option<String>,
        expires_in: Option<u64>,
        error: Option<String>,
        error_description: Option<String>,
    }
    let answer: Option<Answer> = serde_json::from_str(body).ok();
    if (200..300).contains(&status)
        && let Some(Answer {
            access_token: Some(value),
            expires_in,
            ..
        }) = answer
    {
        let lifetime = Duration::from_secs(expires_in.unwrap_or(3600));
        return Ok(Token {
            value,
            expires_at: Instant::now() + lifetime,
        });
    }
    let detail = match answer {
        Some(Answer {
            error: Some(error),
            error_description,
            ..
        }) => match error_description {
            Some(description) => format!("{error}: {description}"),
            None => error,
        },
        _ => body.trim().chars().take(200).collect(),
    };
    let message = format!("the token endpoint answered {status}: {detail}");
    if status >= 500 || status == 429 {
        // The endpoint's own trouble: worth another attempt.
        Err(ChatError::Connection {
            message: format!("Connection error: {message}"),
        })
    } else {
        Err(credentials_error(message))
    }
}

fn read_key_file(path: &Path) -> Result<Credentials, ChatError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| credentials_error(format!("cannot read {}: {e}", path.display())))?;
    let file: KeyFile = serde_json::from_str(&text)
        .map_err(|e| credentials_error(format!("{} is not a credentials file: {e}", path.display())))?;
    let missing = |field: &str| credentials_error(format!("{} has no {field}", path.display()));
    let token_uri = file.token_uri.unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned());
    match file.kind.as_deref() {
        Some("service_account") => {
            let pem = file.private_key.ok_or_else(|| missing("private_key"))?;
            let key = SigningKey::from_pem(&pem)
                .map_err(|e| credentials_error(format!("{}: {e}", path.display())))?;
            Ok(Credentials::ServiceAccount {
                email: file.client_email.ok_or_else(|| missing("client_email"))?,
                key: Box::new(key),
                key_id: file.private_key_id,
                token_uri,
                project_id: file.project_id,
                quota_project_id: file.quota_project_id,
            })
        }
        Some("authorized_user") => Ok(Credentials::AuthorizedUser {
            client_id: file.client_id.ok_or_else(|| missing("client_id"))?,
            client_secret: file.client_secret.ok_or_else(|| missing("client_secret"))?,
            refresh_token: file.refresh_token.ok_or_else(|| missing("refresh_token"))?,
            token_uri,
            quota_project_id: file.quota_project_id,
        }),
        other => Err(credentials_error(format!(
            "{}: credentials of type {} are not supported by kimi-agent (use a service account key or \
             `gcloud auth application-default login`)",
            path.display(),
            other.map_or_else(|| "(none)".to_owned(), |t| format!("{t:?}"))
        ))),
    }
}

/// A problem with the credentials themselves: retrying will not help.
fn credentials_error(detail: String) -> ChatError {
    tracing::warn!(%detail, "Vertex AI credentials");
    ChatError::provider(format!("Vertex AI credentials: {detail}"))
}

fn transport(whom: &str, error: &reqwest::Error) -> ChatError {
    tracing::warn!(error = %chain(error), "cannot reach {whom}");
    if error.is_timeout() {
        ChatError::Timeout {
            message: format!("Request timed out: {whom} did not answer."),
        }
    } else {
        ChatError::Connection {
            message: format!("Connection error: cannot reach {whom}."),
        }
    }
}

/// `application/x-www-form-urlencoded` of `pairs`.
fn form_encode(pairs: &[(&str, &str)]) -> String {
    fn encode(text: &str, out: &mut String) {
        for byte in text.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(byte));
            } else {
                // Writing to a String cannot fail.
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    let mut out = String::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode(key, &mut out);
        out.push('=');
        encode(value, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    #[test]
    fn the_environment_decides_where_to_look() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |key: &str| vars.iter().find(|(k, _)| *k == key).map(|(_, v)| (*v).to_owned())
        };
        let source = CredentialSource::from_env(&env(&[("HOME", "/home/u")]));
        assert_eq!(
            source,
            CredentialSource {
                explicit_file: None,
                gcloud_file: Some(PathBuf::from(
                    "/home/u/.config/gcloud/application_default_credentials.json"
                )),
                metadata_host: "metadata.google.internal".into(),
            }
        );
        let source = CredentialSource::from_env(&env(&[
            ("HOME", "/home/u"),
            ("CLOUDSDK_CONFIG", "/etc/gc"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/k.json"),
            ("GCE_METADATA_HOST", "127.0.0.1:9"),
        ]));
        assert_eq!(source.explicit_file, Some(PathBuf::from("/k.json")));
        assert_eq!(
            source.gcloud_file,
            Some(PathBuf::from("/etc/gc/application_default_credentials.json"))
        );
        assert_eq!(source.metadata_host, "127.0.0.1:9");
    }

    #[test]
    fn token_answers() {
        let token = token_from_answer(
            200,
            r#"{"access_token":"ya29.x","expires_in":3599,"token_type":"Bearer"}"#,
        )
        .unwrap();
        assert_eq!(token.value, "ya29.x");
        assert!(token.expires_at > Instant::now() + Duration::from_secs(3500));
        assert_eq!(
            token_from_answer(
                400,
                r#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#
            )
            .unwrap_err(),
            ChatError::provider(
                "Vertex AI credentials: the token endpoint answered 400: invalid_grant: Invalid JWT Signature."
            )
        );
        assert!(token_from_answer(503, "busy").unwrap_err().is_retryable());
        assert!(!token_from_answer(200, "{}").unwrap_err().is_retryable());
    }

    #[test]
    fn key_files_of_each_type() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, value: Value| {
            let path = dir.path().join(name);
            std::fs::write(&path, value.to_string()).unwrap();
            path
        };
        let sa = json!({"type": "service_account", "client_email": "bot@p.iam", "project_id": "p",
            "private_key": include_str!("../../tests/fixtures/google/test_rsa_key.pem"), "private_key_id": "k1"});
        let Credentials::ServiceAccount {
            token_uri,
            project_id,
            ..
        } = read_key_file(&write("sa.json", sa)).unwrap()
        else {
            panic!("not a service account");
        };
        assert_eq!(
            (token_uri.as_str(), project_id.as_deref()),
            (DEFAULT_TOKEN_URI, Some("p"))
        );
        let user = json!({"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r",
            "quota_project_id": "q"});
        assert!(matches!(
            read_key_file(&write("user.json", user)).unwrap(),
            Credentials::AuthorizedUser { quota_project_id: Some(q), .. } if q == "q"
        ));
        let other = write("ext.json", json!({"type": "external_account"}));
        let error = read_key_file(&other).unwrap_err().to_string();
        assert!(
            error.contains("\"external_account\" are not supported"),
            "{error}"
        );
        let broken = write(
            "sa2.json",
            json!({"type": "service_account", "client_email": "e", "private_key": "x"}),
        );
        let error = read_key_file(&broken).unwrap_err().to_string();
        assert!(error.ends_with("the private key is not a PEM block"), "{error}");
    }

    #[test]
    fn form_encoding() {
        assert_eq!(
            form_encode(&[("grant_type", "refresh_token"), ("refresh_token", "1//a+b/c=")]),
            "grant_type=refresh_token&refresh_token=1%2F%2Fa%2Bb%2Fc%3D"
        );
    }
}
