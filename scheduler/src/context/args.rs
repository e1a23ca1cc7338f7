//! The instance a run serves: its key and the arguments its handler reads, as JSON text, and
//! the error when they do not decode as the handler asks ([`ArgsError`]). Read through
//! [`TaskContext::key`](super::TaskContext::key) and
//! [`TaskContext::args`](super::TaskContext::args).

/// Arguments of an instance that do not decode as the type a handler asked for
/// ([`TaskContext::args`](crate::TaskContext::args)): returned with `?`, the run is recorded
/// failed with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the arguments of {} do not decode as `{type_name}`: {reason}",
    match key { Some(key) => format!("instance `{task}/{key}`"), None => format!("task `{task}` (a run without arguments reads JSON `null`)") }
)]
pub struct ArgsError {
    task: String,
    key: Option<String>,
    type_name: &'static str,
    reason: String,
}

/// The instance a run serves (its key; `None`: the task's own row) and the arguments it reads
/// as JSON text: the instance's own, or those a manual run was asked with (see
/// [`Schedules`](crate::Schedules)).
#[derive(Debug)]
pub(super) struct RunInstance {
    key: Option<String>,
    args: Option<String>,
}

impl RunInstance {
    /// Instance `key`'s run, with its arguments as JSON text.
    pub(super) fn keyed(key: &str, args: Option<String>) -> Self {
        Self {
            key: Some(key.to_owned()),
            args,
        }
    }

    /// The run of the row `row` (a task's own, a shard's, or an instance's `task/key`) with the
    /// arguments its claim gave it; `None`: a run of a task's own row without arguments.
    pub(super) fn of_row(row: &str, args: Option<String>) -> Option<Self> {
        match (crate::instance::split_row(row), args) {
            (Some((_, key)), args) => Some(Self::keyed(key, args)),
            (None, Some(args)) => Some(Self {
                key: None,
                args: Some(args),
            }),
            (None, None) => None,
        }
    }

    /// The key of the instance; `None` for a run of the task's own row.
    pub(super) fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The arguments of a run of `task` serving `instance` (JSON `null` without), decoded as `T`.
    pub(super) fn decode<T: serde::de::DeserializeOwned>(
        instance: Option<&Self>,
        task: &str,
    ) -> Result<T, ArgsError> {
        let text = instance.and_then(|i| i.args.as_deref()).unwrap_or("null");
        serde_json::from_str(text).map_err(|e| ArgsError {
            task: task.to_owned(),
            key: instance.and_then(Self::key).map(str::to_owned),
            type_name: std::any::type_name::<T>(),
            // serde quotes the value it could not read: a secret's, perhaps.
            reason: crate::redact::hide_secret_values(text, &e.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::TaskContext;

    #[test]
    fn a_rows_arguments_are_read_and_their_secrets_kept_out_of_the_error() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Tenant {
            tenant: u64,
            token: u64,
        }
        let args = Some(r#"{"tenant": 1, "token": "s3cr3t-value"}"#.to_owned());
        // The task's own row with a manual run's arguments: no key, the arguments read.
        let own = TaskContext::standalone("report").with_row_args("report", args.clone());
        assert_eq!(own.key(), None);
        assert_eq!(own.args::<serde_json::Value>().unwrap()["tenant"], 1);
        let error = own.args::<Tenant>().unwrap_err().to_string();
        assert!(!error.contains("s3cr3t-value"), "{error}");
        assert!(error.contains(r#""***""#), "{error}");
        // An instance's row: its key and arguments.
        let instance = TaskContext::standalone("report").with_row_args("report/t-1", args);
        assert_eq!(instance.key(), Some("t-1"));
        let error = instance.args::<Tenant>().unwrap_err().to_string();
        assert!(error.contains("instance `report/t-1`"), "{error}");
        assert!(!error.contains("s3cr3t-value"), "{error}");
        // No arguments: JSON null.
        let none = TaskContext::standalone("report").with_row_args("report", None);
        assert_eq!(none.args::<Option<u64>>().unwrap(), None);
    }
}
