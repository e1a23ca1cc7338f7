//! The checks of owners and labels (a task entry's `owners` and `labels`, and an instance's
//! own, from Rust, the admin API, the command line or the config file): one rule for each,
//! worded alike wherever it refuses (`invalid owner ...`, `invalid label ...`, as
//! `RefusalReason::InvalidOwner` and `InvalidLabel` say it).

use std::collections::BTreeMap;

/// Longest owner or label value kept (an address, a handle, a team name).
const MAX_TAG_LEN: usize = crate::bounds::TAG_LEN.max as usize;

/// `labels` as `key=value, ...`, in key order (empty: none), as the audit log, `check` and the
/// command line show them.
pub(crate) fn labels_text(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(", ")
}

/// What is wrong with each unusable owner, in order.
pub(crate) fn owner_problems(owners: &[String]) -> impl Iterator<Item = String> + '_ {
    owners.iter().enumerate().filter_map(|(i, owner)| {
        let problem = if owner.trim().is_empty() {
            "is blank"
        } else if owner.trim() != owner {
            "has leading or trailing whitespace"
        } else if owner.chars().any(char::is_control) {
            "contains control characters"
        } else if owner.chars().count() > MAX_TAG_LEN {
            "is longer than 256 characters"
        } else if owners[..i].contains(owner) {
            "is listed twice"
        } else {
            return None;
        };
        Some(format!("`{}`: {problem}", owner.escape_debug()))
    })
}

/// What is wrong with `owners` as a config entry's are checked (their count, then each
/// unusable one), as the entry's refusals say it; `None`: they are usable. An instance's own
/// owners are checked the same way.
pub(crate) fn owners_problem(owners: &[String]) -> Option<String> {
    let count = crate::bounds::TAGS_PER_TASK
        .check("owners", owners.len())
        .err();
    let problems: Vec<String> = count
        .map(|e| e.to_string())
        .into_iter()
        .chain(owner_problems(owners))
        .map(|p| format!("invalid owner {p}"))
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// What is wrong with `labels` as a config entry's are checked (their count, then each unusable
/// one), as the entry's refusals say it; `None`: they are usable. An instance's own labels are
/// checked the same way.
pub(crate) fn labels_problem(labels: &BTreeMap<String, String>) -> Option<String> {
    let count = crate::bounds::TAGS_PER_TASK
        .check("labels", labels.len())
        .err();
    let problems: Vec<String> = count
        .map(|e| e.to_string())
        .into_iter()
        .chain(label_problems(labels))
        .map(|p| format!("invalid label {p}"))
        .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// What is wrong with each unusable label, in key order.
pub(crate) fn label_problems(
    labels: &BTreeMap<String, String>,
) -> impl Iterator<Item = String> + '_ {
    labels.iter().filter_map(|(key, value)| {
        let key_ok = (1..=63).contains(&key.len())
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
        let problem = if !key_ok {
            "the key must be 1 to 63 characters of A-Z, a-z, 0-9, `_`, `.`, `-`, `/`"
        } else if value.chars().any(char::is_control) {
            "the value contains control characters"
        } else if value.chars().count() > MAX_TAG_LEN {
            "the value is longer than 256 characters"
        } else {
            return None;
        };
        Some(format!("`{}`: {problem}", key.escape_debug()))
    })
}
