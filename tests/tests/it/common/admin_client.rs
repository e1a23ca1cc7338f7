//! A request to a test node's admin API as an operator sends it: a bearer token or none, an
//! actor (`X-Scheduler-Actor`) or none, a JSON body or none; the answer read as status and JSON.

use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Who calls a node's admin API: what [`AdminClient::call`] sends with every request.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdminClient<'a> {
    /// The bearer token sent (`None`: no `Authorization` header).
    pub token: Option<&'a str>,
    /// The operator named in `X-Scheduler-Actor` (`None`: no such header; the audit names the
    /// API's default).
    pub actor: Option<&'a str>,
}

impl<'a> AdminClient<'a> {
    /// A client sending `token`, naming no actor.
    pub fn with_token(token: &'a str) -> Self {
        Self {
            token: Some(token),
            actor: None,
        }
    }

    /// `method url`, with `body` as JSON if any: the answer's status and its JSON body
    /// (`Value::Null` for a body that is not JSON).
    pub async fn call(
        &self,
        method: Method,
        url: impl reqwest::IntoUrl,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = reqwest::Client::new().request(method, url);
        if let Some(token) = self.token {
            request = request.bearer_auth(token);
        }
        if let Some(actor) = self.actor {
            request = request.header("X-Scheduler-Actor", actor);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}
