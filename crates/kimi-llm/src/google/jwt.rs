//! The signed assertion a Google service account trades for an access token (RFC 7523, RS256).
//!
//! ring, already in the build for TLS, signs RSA PKCS#1 v1.5 with SHA-256 from the PKCS#8 key of a
//! service-account file; base64 is already in the build too. No JWT crate is needed for one fixed
//! header and four claims.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde_json::json;

/// The scope Vertex AI needs.
pub(crate) const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How long an assertion is valid (Google's maximum).
const LIFETIME_SECS: u64 = 3600;

/// An RSA private key read from a PEM block.
pub(crate) struct SigningKey(RsaKeyPair);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(..)")
    }
}

impl SigningKey {
    /// Reads `-----BEGIN PRIVATE KEY-----` (PKCS#8, what service-account files hold) or
    /// `-----BEGIN RSA PRIVATE KEY-----` (PKCS#1). The error says what is wrong, never the key.
    pub(crate) fn from_pem(pem: &str) -> Result<Self, String> {
        let (label, der) = pem_block(pem).ok_or("the private key is not a PEM block")?;
        let pair = match label.as_str() {
            "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der),
            "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der),
            other => return Err(format!("unsupported private key type {other:?}")),
        };
        pair.map(Self)
            .map_err(|e| format!("the private key is not a usable RSA key ({e})"))
    }

    /// The RS256 signature of `message`, base64url without padding.
    pub(crate) fn sign(&self, message: &[u8]) -> Result<String, String> {
        let mut signature = vec![0; self.0.public().modulus_len()];
        self.0
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), message, &mut signature)
            .map_err(|_| "signing the token request failed".to_owned())?;
        Ok(URL_SAFE_NO_PAD.encode(signature))
    }
}

/// The first PEM block's label and decoded bytes.
fn pem_block(pem: &str) -> Option<(String, Vec<u8>)> {
    let start = pem.find("-----BEGIN ")?;
    let rest = &pem[start + "-----BEGIN ".len()..];
    let (label, rest) = rest.split_once("-----")?;
    let end = rest.find(&format!("-----END {label}-----"))?;
    let body: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
    Some((label.to_owned(), STANDARD.decode(body).ok()?))
}

/// The claims of one assertion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Claims<'a> {
    /// The service account's email.
    pub issuer: &'a str,
    /// The token endpoint the assertion is for.
    pub audience: &'a str,
    /// The key id, from the key file.
    pub key_id: Option<&'a str>,
    /// Seconds since the epoch.
    pub issued_at: u64,
}

/// `header.claims.signature`, ready to post as the `assertion`.
pub(crate) fn assertion(key: &SigningKey, claims: &Claims<'_>) -> Result<String, String> {
    let mut header = json!({"alg": "RS256", "typ": "JWT"});
    if let Some(kid) = claims.key_id {
        header["kid"] = json!(kid);
    }
    let payload = json!({
        "iss": claims.issuer,
        "scope": CLOUD_PLATFORM_SCOPE,
        "aud": claims.audience,
        "iat": claims.issued_at,
        "exp": claims.issued_at + LIFETIME_SECS,
    });
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(payload.to_string())
    );
    let signature = key.sign(signing_input.as_bytes())?;
    Ok(format!("{signing_input}.{signature}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

    const KEY: &str = include_str!("../../tests/fixtures/google/test_rsa_key.pem");
    const VECTOR_SIGNATURE: &str = include_str!("../../tests/fixtures/google/test_rsa_key.sig");

    #[test]
    fn signatures_match_openssl() {
        // PKCS#1 v1.5 signatures are deterministic: openssl's for the same key and bytes must match.
        let key = SigningKey::from_pem(KEY).unwrap();
        assert_eq!(
            key.sign(b"kimi-agent test vector").unwrap(),
            VECTOR_SIGNATURE.trim()
        );
    }

    #[test]
    fn the_assertion_verifies_and_carries_the_claims() {
        let key = SigningKey::from_pem(KEY).unwrap();
        let claims = Claims {
            issuer: "bot@p.iam.gserviceaccount.com",
            audience: "https://oauth2.googleapis.com/token",
            key_id: Some("kid-1"),
            issued_at: 1_700_000_000,
        };
        let jwt = assertion(&key, &claims).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |s: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap()
        };
        assert_eq!(
            decode(parts[0]),
            json!({"alg": "RS256", "typ": "JWT", "kid": "kid-1"})
        );
        assert_eq!(
            decode(parts[1]),
            json!({"iss": "bot@p.iam.gserviceaccount.com", "scope": CLOUD_PLATFORM_SCOPE,
                   "aud": "https://oauth2.googleapis.com/token", "iat": 1_700_000_000u64, "exp": 1_700_003_600u64})
        );
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.0.public().as_ref().to_vec());
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        public
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .unwrap();
    }

    #[test]
    fn bad_keys_are_refused_without_showing_them() {
        assert_eq!(
            SigningKey::from_pem("not a key").unwrap_err(),
            "the private key is not a PEM block"
        );
        let wrong = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(
            SigningKey::from_pem(wrong)
                .unwrap_err()
                .starts_with("the private key is not a usable RSA key")
        );
    }
}
