//! Secrets in an instance's arguments (JSON): every view of them (the admin API, the CLI, the
//! audit trail, events, logs, error messages) shows them through [`redact_args`]; the handler
//! alone reads the real values.

use serde_json::Value;

use super::{MASK, is_secret_label, redact_text};

/// `args` with its secrets hidden: the value of every field whose name looks secret
/// (`password`, `secret`, `token`, `api_key`, `dsn`, ... by the label rule of `docs/admin.md`, at any
/// depth, whatever the value: a string, a number, an object) becomes `"***"`; every other
/// string goes through [`redact_text`] and has the user information of any URL in it hidden
/// whole (`postgres://***@db/x`: a user name may be a token).
///
/// ```
/// use scheduler::testing::redact::redact_args;
/// use serde_json::json;
///
/// let args = json!({
///     "tenant": 42,
///     "api_key": "k-123",
///     "db": {"dsn": "host=db password=x", "url": "postgres://app:s3cret@db:5432/x"},
///     "hooks": [{"token": {"id": 7}}],
/// });
/// assert_eq!(
///     redact_args(&args),
///     json!({
///         "tenant": 42,
///         "api_key": "***",
///         "db": {"dsn": "***", "url": "postgres://***@db:5432/x"},
///         "hooks": [{"token": "***"}],
///     })
/// );
/// ```
pub fn redact_args(args: &Value) -> Value {
    match args {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, value)| {
                    let shown = if is_secret_label(name) {
                        Value::String(MASK.to_owned())
                    } else {
                        redact_args(value)
                    };
                    (name.clone(), shown)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact_args).collect()),
        Value::String(text) => Value::String(hide_userinfo(&redact_text(text))),
        other => other.clone(),
    }
}

/// Arguments stored as JSON text, redacted as [`redact_args`] does and written back compact;
/// text that is not JSON goes through [`redact_text`].
///
/// ```
/// use scheduler::testing::redact::redact_args_text;
///
/// assert_eq!(redact_args_text(r#"{"password":"x","n":1}"#), r#"{"n":1,"password":"***"}"#);
/// assert_eq!(redact_args_text("password=x"), "password=***");
/// ```
pub fn redact_args_text(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => redact_args(&value).to_string(),
        Err(_) => redact_text(text),
    }
}

/// Serializes arguments kept as JSON text (`None`: none) as the JSON value they hold, redacted
/// ([`redact_args`]), for `#[serde(serialize_with)]` on a record's field.
pub(crate) fn serialize_args_text<S: serde::Serializer>(
    text: &Option<String>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    let shown = text.as_deref().map(|text| {
        serde_json::from_str::<Value>(text)
            .map(|value| redact_args(&value))
            .unwrap_or_else(|_| Value::String(redact_text(text)))
    });
    shown.serialize(serializer)
}

/// `message` (an error quoting what it read of the arguments `args`, JSON text) with every
/// secret value of the arguments hidden: the strings and numbers under secret-looking fields,
/// and the user information of URLs.
///
/// ```
/// use scheduler::testing::redact::hide_secret_values;
///
/// let args = r#"{"tenant": "t", "token": "tok-9"}"#;
/// let said = r#"invalid type: string "tok-9", expected u64"#;
/// assert_eq!(hide_secret_values(args, said), r#"invalid type: string "***", expected u64"#);
/// ```
pub fn hide_secret_values(args: &str, message: &str) -> String {
    let Ok(value) = serde_json::from_str::<Value>(args) else {
        return redact_text(message);
    };
    let mut secrets = Vec::new();
    secret_values(&value, false, &mut secrets);
    // Longest first, so a secret holding another is hidden whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut shown = message.to_owned();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        shown = shown.replace(secret.as_str(), MASK);
    }
    hide_userinfo(&redact_text(&shown))
}

/// The values under secret-looking fields of `value` (all of them once `secret`), as text.
fn secret_values(value: &Value, secret: bool, out: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (name, v) in fields {
                secret_values(v, secret || is_secret_label(name), out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| secret_values(v, secret, out)),
        Value::String(text) if secret => out.push(text.clone()),
        Value::Number(n) if secret => out.push(n.to_string()),
        _ => {}
    }
}

/// `text` with the user information of every `scheme://user[:password]@host` hidden whole.
fn hide_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..authority].rfind('@') {
            Some(user_end) => {
                out.push_str(MASK);
                out.push_str(&tail[user_end..authority]);
            }
            None => out.push_str(&tail[..authority]),
        }
        rest = &tail[authority..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_fields_are_hidden_at_any_depth_whatever_their_value() {
        let args = json!({
            "Password": 1234,
            "client_secret": ["a", "b"],
            "refresh-token": {"value": "t"},
            "X-Api-Key": "k",
            "DSN": "postgres://u:p@h/db",
            "auth": true,
            "nested": [{"pwd": "p", "keep": "plain"}],
        });
        assert_eq!(
            redact_args(&args),
            json!({
                "Password": "***",
                "client_secret": "***",
                "refresh-token": "***",
                "X-Api-Key": "***",
                "DSN": "***",
                "auth": "***",
                "nested": [{"pwd": "***", "keep": "plain"}],
            })
        );
    }

    #[test]
    fn urls_lose_their_user_information_and_text_its_stated_secrets() {
        let args = json!({
            "source": "postgres://app:s3cret@h1:5432,h2:5432/db?sslmode=require",
            "mirror": "https://ghp_abc123@github.com/org/repo.git",
            "plain": "https://example.com/a@b",
            "note": "connect with password=hunter2 then Bearer abc.def",
            "keyword": "stays",
            "author": "stays too",
        });
        assert_eq!(
            redact_args(&args),
            json!({
                "source": "postgres://***@h1:5432,h2:5432/db?sslmode=require",
                "mirror": "https://***@github.com/org/repo.git",
                "plain": "https://example.com/a@b",
                "note": "connect with password=*** then Bearer ***",
                "keyword": "stays",
                "author": "stays too",
            })
        );
    }

    #[test]
    fn what_is_not_secret_is_kept_as_it_is() {
        let args = json!({"tenant": 42, "regions": ["eu", "us"], "dry": false, "x": null});
        assert_eq!(redact_args(&args), args);
        assert_eq!(redact_args(&Value::Null), Value::Null);
        assert_eq!(redact_args_text("not json"), "not json");
    }
}
