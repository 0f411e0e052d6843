//! HTTP for `strata fleet`: one agent (connection pool, TLS with the system's roots or the
//! user's CA file), a timeout per request, a bound on what a response may hold, and the
//! credentials from a file or the environment, never from the command line.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How a request authenticates.
#[derive(Clone, Default)]
pub enum Auth {
    #[default]
    None,
    /// `Authorization: Basic ...`, from `user:password`.
    Basic(String),
    /// `Authorization: Bearer ...`.
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        f.write_str(match self {
            Auth::None => "none",
            Auth::Basic(_) => "basic",
            Auth::Bearer(_) => "bearer",
        })
    }
}

impl Auth {
    /// From `--basic-auth-file` / `--bearer-token-file`, else `STRATA_PROMETHEUS_BASIC_AUTH`
    /// (`user:password`) / `STRATA_PROMETHEUS_TOKEN`. A file's one line, trimmed.
    pub fn from(basic_file: Option<&Path>, token_file: Option<&Path>) -> Result<Auth, String> {
        let read = |p: &Path| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .map_err(|e| format!("cannot read {}: {e}", p.display()))
        };
        if let Some(p) = basic_file {
            let v = read(p)?;
            if !v.contains(':') {
                return Err(format!(
                    "{}: not user:password (hint: one line, user:password)",
                    p.display()
                ));
            }
            return Ok(Auth::Basic(v));
        }
        if let Some(p) = token_file {
            return Ok(Auth::Bearer(read(p)?));
        }
        if let Ok(v) = std::env::var("STRATA_PROMETHEUS_BASIC_AUTH") {
            return Ok(Auth::Basic(v));
        }
        if let Ok(v) = std::env::var("STRATA_PROMETHEUS_TOKEN") {
            return Ok(Auth::Bearer(v));
        }
        Ok(Auth::None)
    }

    fn header(&self) -> Option<String> {
        match self {
            Auth::None => None,
            Auth::Basic(pair) => Some(format!("Basic {}", base64_encode(pair.as_bytes()))),
            Auth::Bearer(token) => Some(format!("Bearer {token}")),
        }
    }
}

/// Standard base64 (RFC 4648, padded), for the Basic header.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    auth: Auth,
    limit: u64,
}

impl Client {
    /// `timeout`: the whole of one request, connect to last byte; `limit`: the most bytes a
    /// response body may hold; `ca`: a PEM file of the roots to trust instead of the system's.
    pub fn new(
        timeout: Duration,
        limit: u64,
        ca: Option<&Path>,
        auth: Auth,
    ) -> Result<Client, String> {
        use ureq::tls::{parse_pem, PemItem, RootCerts, TlsConfig};
        let roots = match ca {
            None => RootCerts::PlatformVerifier,
            Some(path) => {
                let pem = std::fs::read(path)
                    .map_err(|e| format!("cannot read --ca {}: {e}", path.display()))?;
                let certs: Vec<_> = parse_pem(&pem)
                    .filter_map(|item| match item {
                        Ok(PemItem::Certificate(c)) => Some(c),
                        _ => None,
                    })
                    .collect();
                if certs.is_empty() {
                    return Err(format!(
                        "--ca {}: no certificate in it (hint: a PEM file of CA certificates)",
                        path.display()
                    ));
                }
                RootCerts::Specific(Arc::new(certs))
            }
        };
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .tls_config(TlsConfig::builder().root_certs(roots).build())
            .user_agent(concat!("strata/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Ok(Client { agent, auth, limit })
    }

    /// The hint for a server that wants credentials.
    pub const AUTH_HINT: &'static str =
        "hint: --basic-auth-file FILE or --bearer-token-file FILE, or STRATA_PROMETHEUS_BASIC_AUTH / STRATA_PROMETHEUS_TOKEN";

    /// GET `url`: its status and body, or why not in a line.
    pub fn get(&self, url: &str) -> Result<(u16, String), String> {
        self.get_with(url, &[])
    }

    /// GET `url` with `query` pairs (encoded here).
    pub fn get_with(&self, url: &str, query: &[(&str, &str)]) -> Result<(u16, String), String> {
        let mut request = self.agent.get(url);
        for (k, v) in query {
            request = request.query(*k, *v);
        }
        if let Some(h) = self.auth.header() {
            request = request.header("Authorization", h);
        }
        let response = request.call().map_err(|e| why(&e))?;
        self.read(response)
    }

    /// POST `form` to `url` (`application/x-www-form-urlencoded`): for a query too long for a
    /// URL, which Prometheus's API takes as a form too.
    pub fn post_form(&self, url: &str, form: &[(&str, &str)]) -> Result<(u16, String), String> {
        let mut request = self.agent.post(url);
        if let Some(h) = self.auth.header() {
            request = request.header("Authorization", h);
        }
        let response = request
            .send_form(form.iter().copied())
            .map_err(|e| why(&e))?;
        self.read(response)
    }

    fn read(
        &self,
        mut response: ureq::http::Response<ureq::Body>,
    ) -> Result<(u16, String), String> {
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(self.limit)
            .read_to_string()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(n) => {
                    format!(
                        "the response is over {} (read {})",
                        crate::units::bytes(self.limit),
                        crate::units::bytes(n)
                    )
                }
                e => why(&e),
            })?;
        Ok((status, body))
    }
}

/// An error in a line, without the URL's credentials (none are put there).
fn why(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused".into()
        }
        e => {
            let text = crate::text::clean(&e.to_string()).into_owned();
            if text.contains("certificate") {
                format!("{text} (hint: --ca FILE, the PEM of the CA that signed the server's certificate)")
            } else {
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_base64_and_never_printed() {
        assert_eq!(base64_encode(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(base64_encode(b"a"), "YQ==");
        assert_eq!(base64_encode(b"ab"), "YWI=");
        let auth = Auth::Basic("user:secret".into());
        assert_eq!(format!("{auth:?}"), "basic");
        assert_eq!(auth.header().unwrap(), "Basic dXNlcjpzZWNyZXQ=");
    }
}
