//! The document's `limits` (limits shared by tasks, `crate::limits`), checked, and why an entry
//! naming a limit that is not among the good ones is refused.

use super::{ConfigDocument, RefusalReason, ValidatedConfig};

/// The document's `limits`, checked: the good ones into `validated.limits`, the others into
/// `validated.limit_problems`, each with why.
pub(super) fn check(doc: &ConfigDocument, validated: &mut ValidatedConfig) {
    if let Err(e) = crate::bounds::LIMITS_PER_DOCUMENT.check("limits", doc.limits.len()) {
        validated
            .limit_problems
            .push(format!("{e} (every limit is refused until then)"));
        return;
    }
    for (name, size) in &doc.limits {
        if let Some(problem) = crate::limits::name_problem(name) {
            validated.limit_problems.push(problem);
            continue;
        }
        match crate::bounds::LIMIT_SIZE.check(format!("limits.{name}"), *size) {
            Ok(size) => {
                validated
                    .limits
                    .insert(name.clone(), u32::try_from(size).unwrap_or(u32::MAX));
            }
            Err(e) => validated.limit_problems.push(format!(
                "{e} (a limit's size is how many runs may hold it at once)"
            )),
        }
    }
}

/// Why an entry naming `limit`, which `validated.limits` lacks, is refused.
pub(super) fn refusal(
    doc: &ConfigDocument,
    validated: &ValidatedConfig,
    limit: &str,
) -> RefusalReason {
    if doc.limits.contains_key(limit) {
        let problem = validated
            .limit_problems
            .iter()
            .find(|p| p.contains(&format!("limits.{limit}`")))
            .cloned()
            .unwrap_or_else(|| format!("limit `{limit}` was refused"));
        return RefusalReason::InvalidLimit(format!("its limit is refused: {problem}"));
    }
    RefusalReason::UnknownLimit {
        name: limit.to_owned(),
        known: validated.limits.keys().cloned().collect(),
    }
}

pub(super) fn known(known: &[String]) -> String {
    if known.is_empty() {
        " (it declares none)".to_owned()
    } else {
        format!(" (it declares {})", known.join(", "))
    }
}
