//! Validation pass: decides whether a `#[task]` is well formed and, if so, builds the [`Task`]
//! that [`crate::expand`] turns into code.
//!
//! This module owns every rule of the attribute: which options exist and what values they take
//! (durations are parsed here, at compile time, so a typo never reaches a running scheduler),
//! what a task name may contain, and which function signatures the scheduler can call. It reports
//! every violation at once, each at the offending token, in rustc's voice. It does not check types
//! that only rustc can judge (whether the error type converts, whether the future is `Send`): the
//! expansion leaves those to trait bounds placed at the right spans.

use std::fmt::Display;
use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{
    Expr, ExprLit, ExprPath, ExprUnary, FnArg, Ident, Item, ItemFn, Lit, LitStr, Path, Type, UnOp,
};

use crate::ast::{ArgEntry, TaskArgs};

/// The longest task name accepted; names are stored in a database column and shown in config.
const MAX_NAME_LEN: usize = 128;

/// Every option `#[task]` accepts, in the order the unknown-option message lists them.
const KEYS: [&str; 16] = [
    "name",
    "crate",
    "timeout",
    "retries",
    "backoff",
    "misfire",
    "lock_lifetime",
    "recovery",
    "isolation",
    "memory_limit",
    "max_processes",
    "cpu_limit",
    "max_file_size",
    "shards",
    "jitter",
    "limit",
];

/// The most retries one run may ask for; more is a loop, not a retry policy.
const MAX_RETRIES: u32 = 100;

/// The most shards one task may have (the runtime's `scheduler::shard::MAX_SHARDS`).
const MAX_SHARDS: u32 = 1_000;

/// The widest `jitter` window (the runtime's `bounds::JITTER`).
const MAX_JITTER: Duration = Duration::from_secs(86_400);

/// The shortest `timeout`: below a millisecond the engine's timers cannot tell.
const MIN_TIMEOUT: Duration = Duration::from_millis(1);
/// The shortest `backoff`, for the same reason.
const MIN_BACKOFF: Duration = Duration::from_millis(1);
/// The shortest per-task `lock_lifetime`: the lock must survive a renewal round trip.
const MIN_LOCK_LIFETIME: Duration = Duration::from_secs(1);

/// The names of the misfire policies and the `scheduler::Misfire` variant each one means.
const MISFIRE_POLICIES: &[(&str, &str)] = &[("once", "Once"), ("skip", "Skip")];
/// The names of the recovery policies and the `scheduler::Recovery` variant each one means.
const RECOVERY_POLICIES: &[(&str, &str)] = &[("rerun", "Rerun"), ("never", "Never")];
/// The names of the isolation policies and the `scheduler::Isolation` variant each one means.
const ISOLATION_POLICIES: &[(&str, &str)] = &[("in-process", "InProcess"), ("process", "Process")];

// The ranges of an isolated task's process limits: the runtime's `scheduler::bounds` (a unit
// test there keeps these numbers and its own alike), written as plain numbers for that test.

/// The smallest `memory_limit` (64 MiB): a child process of a Rust binary with a tokio runtime
/// allocates several MiB (2 MiB of stack per runtime thread) before its handler allocates
/// anything; a smaller limit is a typo rather than a plan.
const MIN_MEMORY_LIMIT: u64 = 67108864;
/// The largest `memory_limit` (1024 TiB).
const MAX_MEMORY_LIMIT: u64 = 1125899906842624;
/// The smallest `max_processes`: the child's own threads count (a tokio runtime has several).
const MIN_PROCESSES: u64 = 16;
/// The largest `max_processes` (Linux's largest `pid_max`).
const MAX_PROCESSES: u64 = 4194304;
/// The smallest `cpu_limit`, in seconds.
const MIN_CPU_LIMIT: u64 = 1;
/// The largest `cpu_limit`, in seconds (a year).
const MAX_CPU_LIMIT: u64 = 31557600;
/// The smallest `max_file_size` (1 KiB).
const MIN_FILE_SIZE: u64 = 1024;
/// The largest `max_file_size` (1024 TiB).
const MAX_FILE_SIZE: u64 = 1125899906842624;
/// The options that limit the task's own process, which need `isolation = "process"`.
const PROCESS_LIMITS: [&str; 4] = [
    "memory_limit",
    "max_processes",
    "cpu_limit",
    "max_file_size",
];
/// The units a `memory_limit` is written in, lowercase, and their size in bytes.
const MEMORY_UNITS: &[(&str, u64)] = &[
    ("b", 1),
    ("kib", 1 << 10),
    ("mib", 1 << 20),
    ("gib", 1 << 30),
    ("tib", 1 << 40),
    ("kb", 1_000),
    ("mb", 1_000_000),
    ("gb", 1_000_000_000),
    ("tb", 1_000_000_000_000),
];

/// A `#[task]` that passed validation.
pub struct Task {
    /// The user's function, emitted unchanged.
    pub func: ItemFn,
    /// The stable task name, with the span of its literal.
    pub name: LitStr,
    /// The path of the `scheduler` crate (`crate = ...`, default `::scheduler`).
    pub krate: Path,
    /// Whether the function takes the `TaskContext` parameter.
    pub takes_context: bool,
    /// The policy options given in the attribute; unset ones stay `None`.
    pub policy: Policy,
}

/// The policy options of a task, checked and converted; the expansion emits only those given.
#[derive(Default)]
pub struct Policy {
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub backoff: Option<Duration>,
    /// The `Misfire` variant, spanned at the literal that chose it.
    pub misfire: Option<Ident>,
    pub lock_lifetime: Option<Duration>,
    /// The `Recovery` variant, spanned at the literal that chose it.
    pub recovery: Option<Ident>,
    /// The `Isolation` variant, spanned at the literal that chose it.
    pub isolation: Option<Ident>,
    /// The memory limit of an isolated task's process, in bytes.
    pub memory_limit: Option<u64>,
    /// The most processes (and threads) of its user an isolated task's process may start.
    pub max_processes: Option<u64>,
    /// The CPU time an isolated task's process may use, in whole seconds.
    pub cpu_limit: Option<u64>,
    /// The largest file an isolated task's process may write, in bytes.
    pub max_file_size: Option<u64>,
    /// How many runs one tick is split into.
    pub shards: Option<Shards>,
    /// The window each tick starts within.
    pub jitter: Option<Duration>,
    /// The limit shared with other tasks its runs hold (`limit = "warehouse-db"`).
    pub limit: Option<String>,
}

/// The `shards` option: a fixed count, or one run per live node (`"nodes"`, a broadcast).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shards {
    /// `shards = 8`.
    Count(u32),
    /// `shards = "nodes"`.
    Nodes,
}

/// Every error found so far, combined into one so they are all reported together.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(error),
            None => self.0 = Some(error),
        }
    }

    fn at(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }
}

/// The options as given, before defaults are applied.
#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    krate: Option<Path>,
    policy: Policy,
}

/// Validates the parsed arguments and the annotated item together, so that a mistake in one does
/// not hide mistakes in the other.
pub fn validate(args: syn::Result<TaskArgs>, item: TokenStream) -> syn::Result<Task> {
    let mut errors = Errors::default();

    let options = match args {
        Ok(args) => Some(validate_options(&args, &mut errors)),
        Err(error) => {
            errors.push(error);
            None
        }
    };

    let func = match syn::parse2::<Item>(item) {
        Ok(Item::Fn(func)) => Some(func),
        Ok(other) => {
            errors.push(not_a_fn(&other));
            None
        }
        Err(_) => {
            errors.push(syn::Error::new(
                Span::call_site(),
                "#[task] can only be applied to an `async fn`",
            ));
            None
        }
    };
    let takes_context = func
        .as_ref()
        .is_some_and(|func| validate_signature(func, &mut errors));

    match (errors.0, options, func) {
        (Some(errors), _, _) => Err(errors),
        (
            None,
            Some(Options {
                name: Some(name),
                krate,
                policy,
            }),
            Some(func),
        ) => Ok(Task {
            func,
            name,
            krate: krate.unwrap_or_else(|| syn::parse_quote!(::scheduler)),
            takes_context,
            policy,
        }),
        (None, _, _) => unreachable!("a missing part without an error"),
    }
}

/// The value without the invisible group a `macro_rules!` `$value:expr` wraps it in.
fn ungroup(mut value: &Expr) -> &Expr {
    while let Expr::Group(group) = value {
        value = &group.expr;
    }
    value
}

/// Checks every `key = value` and that `name` is given; pushes what is wrong.
fn validate_options(args: &TaskArgs, errors: &mut Errors) -> Options {
    let mut options = Options::default();
    let mut seen = Vec::new();
    let mut limit_keys = Vec::new();
    for ArgEntry { key, value } in &args.entries {
        let key_name = key.to_string();
        if seen.contains(&key_name) {
            errors.push(syn::Error::new(
                key.span(),
                format!("`{key}` specified more than once"),
            ));
            continue;
        }
        let value = ungroup(value);
        // Adding an option is one arm here, its name in `KEYS` and a field in `Options`.
        let policy = &mut options.policy;
        let result = match key_name.as_str() {
            "name" => parse_name(value).map(|name| options.name = Some(name)),
            "crate" => parse_crate(value).map(|krate| options.krate = Some(krate)),
            "timeout" => parse_duration("timeout", "30m", MIN_TIMEOUT, value)
                .map(|timeout| policy.timeout = Some(timeout)),
            "retries" => parse_retries(value).map(|retries| policy.retries = Some(retries)),
            "backoff" => parse_duration("backoff", "30s", MIN_BACKOFF, value)
                .map(|backoff| policy.backoff = Some(backoff)),
            "misfire" => parse_policy("misfire", MISFIRE_POLICIES, value)
                .map(|misfire| policy.misfire = Some(misfire)),
            "lock_lifetime" => parse_duration("lock_lifetime", "2m", MIN_LOCK_LIFETIME, value)
                .map(|lifetime| policy.lock_lifetime = Some(lifetime)),
            "recovery" => parse_policy("recovery", RECOVERY_POLICIES, value)
                .map(|recovery| policy.recovery = Some(recovery)),
            "isolation" => parse_policy("isolation", ISOLATION_POLICIES, value)
                .map(|isolation| policy.isolation = Some(isolation)),
            "memory_limit" => {
                limit_keys.push(key);
                parse_memory_limit(value).map(|limit| policy.memory_limit = Some(limit))
            }
            "max_processes" => {
                limit_keys.push(key);
                parse_max_processes(value).map(|n| policy.max_processes = Some(n))
            }
            "cpu_limit" => {
                limit_keys.push(key);
                parse_cpu_limit(value).map(|secs| policy.cpu_limit = Some(secs))
            }
            "max_file_size" => {
                limit_keys.push(key);
                parse_size("max_file_size", "1GiB", MIN_FILE_SIZE, MAX_FILE_SIZE, value)
                    .map(|bytes| policy.max_file_size = Some(bytes))
            }
            "shards" => parse_shards(value).map(|shards| policy.shards = Some(shards)),
            "jitter" => parse_jitter(value).map(|jitter| policy.jitter = Some(jitter)),
            "limit" => parse_limit(value).map(|limit| policy.limit = Some(limit)),
            _ => {
                errors.push(syn::Error::new(
                    key.span(),
                    format!(
                        "unknown #[task] option `{key}`: the options are {}",
                        prose_list(KEYS.iter().map(|key| format!("`{key}`")), "and")
                    ),
                ));
                continue;
            }
        };
        // A known key with an invalid value still counts as given, so it is not also reported
        // as missing.
        seen.push(key_name);
        if let Err(error) = result {
            errors.push(error);
        }
    }
    if !seen.iter().any(|key| key == "name") {
        errors.push(syn::Error::new(
            Span::call_site(),
            "missing `name`: write #[task(name = \"...\")]",
        ));
    }
    // A limit applies to a process of the task's own; an invalid `isolation` was reported above.
    let isolation_given = seen.iter().any(|key| key == "isolation");
    let isolated = options
        .policy
        .isolation
        .as_ref()
        .is_some_and(|variant| variant == "Process");
    if !isolated && (!isolation_given || options.policy.isolation.is_some()) {
        for key in limit_keys {
            debug_assert!(PROCESS_LIMITS.contains(&key.to_string().as_str()));
            errors.push(syn::Error::new(
                key.span(),
                format!(
                    "`{key}` requires `isolation = \"process\"`: the limit applies to the process \
                     a task runs in on its own; add isolation = \"process\""
                ),
            ));
        }
    }
    options
}

fn parse_name(value: &Expr) -> syn::Result<LitStr> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    else {
        return Err(syn::Error::new_spanned(
            value,
            "`name` must be a string literal: write name = \"...\"",
        ));
    };
    let name = lit.value();
    if name.is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "task name cannot be empty: write a stable name such as `syncAdvertiserReport`",
        ));
    }
    if let Some(bad) = name.chars().find(|c| !is_name_char(*c)) {
        let shown = match bad {
            ' ' => "a space".to_owned(),
            c if c.is_control() => format!("`{}`", c.escape_default()),
            c => format!("`{c}`"),
        };
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "task name contains {shown}: use only ASCII letters, digits, `_`, `.`, `:` and `-`"
            ),
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "task name is {} characters long: use at most {MAX_NAME_LEN}",
                name.len()
            ),
        ));
    }
    Ok(lit.clone())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

fn parse_crate(value: &Expr) -> syn::Result<Path> {
    match value {
        Expr::Path(ExprPath {
            attrs,
            qself: None,
            path,
            ..
        }) if attrs.is_empty() => Ok(path.clone()),
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => lit.parse(),
        _ => Err(syn::Error::new_spanned(
            value,
            "`crate` must be a path: write crate = ::scheduler",
        )),
    }
}

/// A duration written as a string literal in humantime syntax (`"30s"`, `"1h30m"`), at least
/// `min`.
fn parse_duration(key: &str, example: &str, min: Duration, value: &Expr) -> syn::Result<Duration> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{key}` must be a string literal such as \"{example}\""),
        ));
    };
    let text = lit.value();
    if text.trim().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{key}` cannot be empty: write it like `30s`, `5m` or `1h30m`"),
        ));
    }
    let duration = humantime::parse_duration(&text).map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!(
                "invalid `{key}`: `{}` is not a duration; write it like `30s`, `5m` or `1h30m`",
                text.escape_debug()
            ),
        )
    })?;
    if duration < min {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`{key}` must be at least {}",
                humantime::format_duration(min)
            ),
        ));
    }
    Ok(duration)
}

/// The jitter window: a duration from `0s` to [`MAX_JITTER`].
fn parse_jitter(value: &Expr) -> syn::Result<Duration> {
    let jitter = parse_duration("jitter", "30s", Duration::ZERO, value)?;
    if jitter > MAX_JITTER {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`jitter` must be at most {}",
                humantime::format_duration(MAX_JITTER)
            ),
        ));
    }
    Ok(jitter)
}

/// The longest limit name (the runtime's `scheduler::limits::MAX_NAME_LEN`).
const MAX_LIMIT_NAME: usize = 64;

/// A limit's name: a string literal of 1 to [`MAX_LIMIT_NAME`] ASCII letters, digits, `_`, `.`,
/// `:` and `-` (the runtime's `scheduler::limits::name_problem`).
fn parse_limit(value: &Expr) -> syn::Result<String> {
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    else {
        return Err(syn::Error::new_spanned(
            value,
            "`limit` must be a string literal naming a limit of the config's `limits`, such as \"warehouse-db\"",
        ));
    };
    let name = lit.value();
    let ok = (1..=MAX_LIMIT_NAME).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'));
    if ok {
        Ok(name)
    } else {
        Err(syn::Error::new_spanned(
            value,
            format!(
                "`limit` must be 1 to {MAX_LIMIT_NAME} ASCII letters, digits, `_`, `.`, `:` or `-`, not {:?}",
                name
            ),
        ))
    }
}

/// The number of shards: an integer literal from 1 to [`MAX_SHARDS`], or `"nodes"` (one run on
/// each live node: a broadcast).
fn parse_shards(value: &Expr) -> syn::Result<Shards> {
    let out_of_range = |shown: &dyn Display| {
        syn::Error::new_spanned(
            value,
            format!(
                "`shards` must be between 1 and {MAX_SHARDS}, or \"nodes\" for one run on each live node, not {shown}"
            ),
        )
    };
    let not_an_integer = || {
        syn::Error::new_spanned(
            value,
            format!(
                "`shards` must be an integer literal from 1 to {MAX_SHARDS}, such as `8`, or \"nodes\" for one run on each live node"
            ),
        )
    };
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => match lit.base10_parse::<u32>() {
            Ok(shards) if (1..=MAX_SHARDS).contains(&shards) => Ok(Shards::Count(shards)),
            _ => Err(out_of_range(&lit.base10_digits())),
        },
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => match lit.value().as_str() {
            "nodes" => Ok(Shards::Nodes),
            other => Err(syn::Error::new_spanned(
                value,
                format!(
                    "unknown `shards` value \"{other}\": write \"nodes\" for one run on each live node, or a count from 1 to {MAX_SHARDS}, such as `8`"
                ),
            )),
        },
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match ungroup(expr) {
            Expr::Lit(ExprLit {
                lit: Lit::Int(lit), ..
            }) => Err(out_of_range(&format_args!("-{}", lit.base10_digits()))),
            _ => Err(not_an_integer()),
        },
        _ => Err(not_an_integer()),
    }
}

fn parse_retries(value: &Expr) -> syn::Result<u32> {
    let out_of_range = |shown: &dyn Display| {
        syn::Error::new_spanned(
            value,
            format!("`retries` must be between 0 and {MAX_RETRIES}, not {shown}"),
        )
    };
    let not_an_integer = || {
        syn::Error::new_spanned(
            value,
            format!("`retries` must be an integer literal from 0 to {MAX_RETRIES}, such as `3`"),
        )
    };
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => match lit.base10_parse::<u32>() {
            Ok(retries) if retries <= MAX_RETRIES => Ok(retries),
            _ => Err(out_of_range(&lit.base10_digits())),
        },
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match ungroup(expr) {
            Expr::Lit(ExprLit {
                lit: Lit::Int(lit), ..
            }) => Err(out_of_range(&format_args!("-{}", lit.base10_digits()))),
            _ => Err(not_an_integer()),
        },
        _ => Err(not_an_integer()),
    }
}

/// One of a policy's names as a string literal; returns the runtime enum's variant, spanned at
/// the literal.
fn parse_policy(key: &str, policies: &[(&str, &str)], value: &Expr) -> syn::Result<Ident> {
    let choices = || {
        prose_list(
            policies.iter().map(|(name, _)| format!("`\"{name}\"`")),
            "or",
        )
    };
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{key}` must be a string literal: write {}", choices()),
        ));
    };
    let text = lit.value();
    match policies.iter().find(|(name, _)| *name == text) {
        Some((_, variant)) => Ok(Ident::new(variant, lit.span())),
        None => Err(syn::Error::new(
            lit.span(),
            format!(
                "unknown `{key}` policy `{}`: write {}",
                text.escape_debug(),
                choices()
            ),
        )),
    }
}

/// The `memory_limit`: a size from [`MIN_MEMORY_LIMIT`] to [`MAX_MEMORY_LIMIT`], in bytes.
fn parse_memory_limit(value: &Expr) -> syn::Result<u64> {
    let bytes = parse_size("memory_limit", "512MiB", 0, MAX_MEMORY_LIMIT, value)?;
    if bytes < MIN_MEMORY_LIMIT {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`memory_limit` must be at least {} MiB: the task's process needs part of it \
                 before its handler starts (2 MiB of stack per thread)",
                MIN_MEMORY_LIMIT >> 20
            ),
        ));
    }
    Ok(bytes)
}

/// `max_processes`: an integer literal from [`MIN_PROCESSES`] to [`MAX_PROCESSES`].
fn parse_max_processes(value: &Expr) -> syn::Result<u64> {
    let message = |shown: &dyn Display| {
        format!(
            "`max_processes` must be an integer literal from {MIN_PROCESSES} to {MAX_PROCESSES}, \
             such as `64`, not {shown}: it counts every process and thread of the node's user"
        )
    };
    let shown = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(lit), ..
        }) => match lit.base10_parse::<u64>() {
            Ok(n) if (MIN_PROCESSES..=MAX_PROCESSES).contains(&n) => return Ok(n),
            _ => lit.base10_digits().to_owned(),
        },
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => format!("-{}", expr.to_token_stream()),
        other => format!("`{}`", other.to_token_stream()),
    };
    Err(syn::Error::new_spanned(value, message(&shown)))
}

/// `cpu_limit`: a duration in whole seconds, from [`MIN_CPU_LIMIT`] to [`MAX_CPU_LIMIT`];
/// returns the seconds.
fn parse_cpu_limit(value: &Expr) -> syn::Result<u64> {
    let min = Duration::from_secs(MIN_CPU_LIMIT);
    let limit = parse_duration("cpu_limit", "10m", min, value)?;
    let range = || {
        format!(
            "from {} to {}",
            humantime::format_duration(min),
            humantime::format_duration(Duration::from_secs(MAX_CPU_LIMIT))
        )
    };
    if limit.subsec_nanos() != 0 {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "`cpu_limit` counts whole seconds (the system's CPU limit does): write it like \
                 `90s` or `10m`, {}",
                range()
            ),
        ));
    }
    if limit.as_secs() > MAX_CPU_LIMIT {
        return Err(syn::Error::new_spanned(
            value,
            format!("`cpu_limit` must be {}", range()),
        ));
    }
    Ok(limit.as_secs())
}

/// A size written as a string literal, an integer and a unit (`"512MiB"`, `"2 GiB"`,
/// `"500MB"`), from `min` to `max` bytes; returns it in bytes.
fn parse_size(key: &str, example: &str, min: u64, max: u64, value: &Expr) -> syn::Result<u64> {
    const EXAMPLES: &str = "write it like `512MiB`, `2GiB` or `500MB`";
    let Expr::Lit(ExprLit {
        lit: Lit::Str(lit), ..
    }) = value
    else {
        return Err(syn::Error::new_spanned(
            value,
            format!("`{key}` must be a string literal such as \"{example}\""),
        ));
    };
    let text = lit.value();
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{key}` cannot be empty: {EXAMPLES}"),
        ));
    }
    let digits_end = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(digits_end);
    let unit = unit.trim_start();
    let invalid = |why: &str| {
        syn::Error::new(
            lit.span(),
            format!(
                "invalid `{key}`: `{}` {why}; {EXAMPLES}",
                text.escape_debug()
            ),
        )
    };
    if digits.is_empty() {
        return Err(invalid("does not start with a number"));
    }
    if unit.is_empty() {
        return Err(invalid("has no unit"));
    }
    let Some((_, scale)) = MEMORY_UNITS
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(unit))
    else {
        let ambiguous = matches!(unit.to_ascii_lowercase().as_str(), "k" | "m" | "g" | "t");
        let why = if ambiguous {
            let prefix = unit.to_ascii_uppercase();
            format!(
                "has the ambiguous unit `{unit}` (`{prefix}iB` counts in 1024s, `{prefix}B` in 1000s)"
            )
        } else {
            format!("has the unknown unit `{}`", unit.escape_debug())
        };
        return Err(invalid(&why));
    };
    let bytes = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(*scale))
        .filter(|bytes| *bytes <= max)
        .ok_or_else(|| invalid(&format!("is too large (at most {})", size(max))))?;
    if bytes < min {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{key}` must be at least {}", size(min)),
        ));
    }
    Ok(bytes)
}

/// `64 MiB`, `1024 TiB`, `1000 bytes`: a size in the largest binary unit that divides it.
fn size(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// "a or b", "a, b or c" (or with "and").
fn prose_list(items: impl IntoIterator<Item = String>, conjunction: &str) -> String {
    let items: Vec<String> = items.into_iter().collect();
    match items.split_last() {
        Some((last, rest)) if !rest.is_empty() => {
            format!("{} {conjunction} {last}", rest.join(", "))
        }
        _ => items.concat(),
    }
}

/// Checks the function's signature; returns whether it takes the `TaskContext` parameter.
fn validate_signature(func: &ItemFn, errors: &mut Errors) -> bool {
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token,
            "#[task] requires an `async fn`: add `async` before `fn`",
        );
    }
    if let Some(unsafety) = &sig.unsafety {
        errors.at(
            unsafety,
            "#[task] functions cannot be `unsafe`: remove `unsafe`",
        );
    }
    if let Some(abi) = &sig.abi {
        errors.at(abi, "#[task] functions cannot have an ABI: remove `extern`");
    }
    if !sig.generics.params.is_empty() {
        errors.at(
            &sig.generics,
            "#[task] functions cannot be generic: the scheduler calls them with no type arguments; \
             remove the generic parameters",
        );
    } else if let Some(where_clause) = &sig.generics.where_clause {
        errors.at(
            where_clause,
            "#[task] functions cannot have a `where` clause: remove it",
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.at(variadic, "#[task] functions cannot be variadic");
    }

    let mut typed = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => errors.at(
                receiver,
                "#[task] cannot be used on a method: make it a free `async fn` outside the `impl` block",
            ),
            FnArg::Typed(pat_type) => typed.push(pat_type),
        }
    }
    if let Some(first) = typed.first() {
        check_context_type(&first.ty, errors);
    }
    if typed.len() > 1 {
        let extra = &typed[1..];
        errors.at(
            quote!(#(#extra),*),
            "#[task] functions take at most one parameter, a `TaskContext`: remove the others",
        );
    }
    !typed.is_empty()
}

/// The parameter must name `TaskContext` (any path ending in it, e.g. `scheduler::TaskContext`).
/// rustc then checks that it really is the scheduler's type, since the handler passes one in.
fn check_context_type(ty: &Type, errors: &mut Errors) {
    match ty {
        Type::Paren(inner) => check_context_type(&inner.elem, errors),
        Type::Group(inner) => check_context_type(&inner.elem, errors),
        Type::Path(path) if path.qself.is_none() && is_task_context(&path.path) => {}
        Type::Reference(reference) if matches!(&*reference.elem, Type::Path(p) if is_task_context(&p.path)) =>
        {
            errors.at(
                ty,
                "#[task] functions take `TaskContext` by value: write `ctx: TaskContext`",
            );
        }
        _ => errors.at(
            ty,
            "the parameter of a #[task] function must be a `TaskContext`: write `ctx: TaskContext` \
             or remove the parameter",
        ),
    }
}

fn is_task_context(path: &Path) -> bool {
    path.segments
        .last()
        .is_some_and(|last| last.ident == "TaskContext" && last.arguments.is_none())
}

fn not_a_fn(item: &Item) -> syn::Error {
    fn head(keyword: impl ToTokens, name: impl ToTokens) -> TokenStream {
        quote!(#keyword #name)
    }
    let (head, kind) = match item {
        Item::Struct(i) => (head(i.struct_token, &i.ident), "a struct"),
        Item::Enum(i) => (head(i.enum_token, &i.ident), "an enum"),
        Item::Union(i) => (head(i.union_token, &i.ident), "a union"),
        Item::Trait(i) => (head(i.trait_token, &i.ident), "a trait"),
        Item::Mod(i) => (head(i.mod_token, &i.ident), "a module"),
        Item::Const(i) => (head(i.const_token, &i.ident), "a const"),
        Item::Static(i) => (head(i.static_token, &i.ident), "a static"),
        Item::Type(i) => (head(i.type_token, &i.ident), "a type alias"),
        Item::Impl(i) => (i.impl_token.to_token_stream(), "an impl block"),
        Item::Use(i) => (i.use_token.to_token_stream(), "a `use` item"),
        _ => (TokenStream::new(), "this item"),
    };
    let message = format!("#[task] can only be applied to an `async fn`, not {kind}");
    if head.is_empty() {
        syn::Error::new(Span::call_site(), message)
    } else {
        syn::Error::new_spanned(head, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(tokens: TokenStream) -> (Options, Option<syn::Error>) {
        let args = TaskArgs::parse(tokens).expect("arguments parse");
        let mut errors = Errors::default();
        let options = validate_options(&args, &mut errors);
        (options, errors.0)
    }

    #[test]
    fn every_listed_key_is_accepted() {
        let tokens = quote! {
            name = "t", crate = ::scheduler, timeout = "1ms", retries = 100, backoff = "1ms",
            misfire = "skip", lock_lifetime = "1s", recovery = "never", isolation = "process",
            memory_limit = "64MiB", max_processes = 16, cpu_limit = "1s",
            max_file_size = "1KiB", shards = 1000, jitter = "30s", limit = "db",
        };
        let keys: Vec<String> = TaskArgs::parse(tokens.clone())
            .unwrap()
            .entries
            .iter()
            .map(|entry| entry.key.to_string())
            .collect();
        assert_eq!(keys, KEYS, "the unknown-option message must list every key");

        let (options, errors) = options(tokens);
        assert!(errors.is_none(), "{errors:?}");
        let policy = options.policy;
        assert_eq!(policy.timeout, Some(Duration::from_millis(1)));
        assert_eq!(policy.retries, Some(100));
        assert_eq!(policy.backoff, Some(Duration::from_millis(1)));
        assert_eq!(policy.misfire.unwrap(), "Skip");
        assert_eq!(policy.lock_lifetime, Some(Duration::from_secs(1)));
        assert_eq!(policy.recovery.unwrap(), "Never");
        assert_eq!(policy.isolation.unwrap(), "Process");
        assert_eq!(policy.memory_limit, Some(64 << 20));
        assert_eq!(policy.max_processes, Some(16));
        assert_eq!(policy.cpu_limit, Some(1));
        assert_eq!(policy.max_file_size, Some(1024));
        assert_eq!(policy.shards, Some(Shards::Count(1000)));
        assert_eq!(policy.jitter, Some(Duration::from_secs(30)));
    }

    #[test]
    fn shards_must_be_an_integer_from_1_to_the_maximum() {
        for (tokens, expected) in [
            (
                quote!(name = "t", shards = 0),
                "one run on each live node, not 0",
            ),
            (
                quote!(name = "t", shards = 1001),
                "one run on each live node, not 1001",
            ),
            (
                quote!(name = "t", shards = -2),
                "one run on each live node, not -2",
            ),
            (
                quote!(name = "t", shards = "8"),
                "unknown `shards` value \"8\"",
            ),
            (quote!(name = "t", shards = "all"), "write \"nodes\""),
            (
                quote!(name = "t", shards = 1.5),
                "an integer literal from 1 to 1000",
            ),
        ] {
            let (_, errors) = options(tokens);
            let message = errors.expect("refused").to_string();
            assert!(message.contains(expected), "{message}");
        }
        let (fixed, errors) = options(quote!(name = "t", shards = 8));
        assert!(errors.is_none());
        assert_eq!(fixed.policy.shards, Some(Shards::Count(8)));
        let (nodes, errors) = options(quote!(name = "t", shards = "nodes"));
        assert!(errors.is_none());
        assert_eq!(nodes.policy.shards, Some(Shards::Nodes));
    }

    #[test]
    fn jitter_is_a_duration_up_to_a_day() {
        let (given, errors) = options(quote!(name = "t", jitter = "30s"));
        assert!(errors.is_none());
        assert_eq!(given.policy.jitter, Some(Duration::from_secs(30)));
        let (zero, errors) = options(quote!(name = "t", jitter = "0s"));
        assert!(errors.is_none());
        assert_eq!(zero.policy.jitter, Some(Duration::ZERO));
        for (bad, message) in [
            (
                quote!(name = "t", jitter = "2days"),
                "`jitter` must be at most 1day",
            ),
            (quote!(name = "t", jitter = "soon"), "invalid `jitter`"),
            (
                quote!(name = "t", jitter = 30),
                "`jitter` must be a string literal",
            ),
        ] {
            let (_, errors) = options(bad);
            let errors = errors.expect("refused").to_string();
            assert!(errors.contains(message), "{errors}");
        }
    }

    #[test]
    fn limit_names_a_limit() {
        let (ok, errors) = options(quote!(name = "t", limit = "warehouse-db"));
        assert!(errors.is_none());
        assert_eq!(ok.policy.limit.as_deref(), Some("warehouse-db"));
        for (bad, message) in [
            (quote!(name = "t", limit = ""), "`limit` must be 1 to 64"),
            (quote!(name = "t", limit = "a b"), "`limit` must be 1 to 64"),
            (
                quote!(name = "t", limit = 2),
                "`limit` must be a string literal",
            ),
        ] {
            let (_, errors) = options(bad);
            let errors = errors.expect("refused").to_string();
            assert!(errors.contains(message), "{errors}");
        }
    }

    #[test]
    fn unset_options_stay_unset() {
        let (options, errors) = options(quote!(name = "t"));
        assert!(errors.is_none());
        let Policy {
            timeout,
            retries,
            backoff,
            misfire,
            lock_lifetime,
            recovery,
            isolation,
            memory_limit,
            max_processes,
            cpu_limit,
            max_file_size,
            shards,
            jitter,
            limit,
        } = options.policy;
        assert!(limit.is_none());
        assert!(timeout.is_none() && retries.is_none() && backoff.is_none() && jitter.is_none());
        assert!(misfire.is_none() && lock_lifetime.is_none() && recovery.is_none());
        assert!(isolation.is_none() && memory_limit.is_none() && shards.is_none());
        assert!(max_processes.is_none() && cpu_limit.is_none() && max_file_size.is_none());
    }

    #[test]
    fn memory_limits_take_binary_and_decimal_units() {
        let parse = |text: &str| {
            let lit = LitStr::new(text, Span::call_site());
            parse_memory_limit(&syn::parse_quote!(#lit)).map_err(|e| e.to_string())
        };
        assert_eq!(parse("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse("512 mib").unwrap(), 512 << 20);
        assert_eq!(parse("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse("500MB").unwrap(), 500_000_000);
        assert_eq!(parse("67108864B").unwrap(), 64 << 20);
        assert!(parse("63MiB").unwrap_err().contains("at least 64 MiB"));
        assert!(parse("512M").unwrap_err().contains("`MiB` counts in 1024s"));
        assert!(parse("512").unwrap_err().contains("has no unit"));
        assert!(
            parse("MiB")
                .unwrap_err()
                .contains("does not start with a number")
        );
        assert!(
            parse("1.5GiB")
                .unwrap_err()
                .contains("unknown unit `.5GiB`")
        );
        assert!(parse("99999999999TiB").unwrap_err().contains("too large"));
    }

    #[test]
    fn process_limits_are_checked_against_their_ranges() {
        let error = |tokens: TokenStream| options(tokens).1.map(|e| e.to_string());
        let iso = quote!(name = "t", isolation = "process",);
        for (option, expected) in [
            (
                quote!(max_processes = 15),
                "from 16 to 4194304, such as `64`, not 15",
            ),
            (quote!(max_processes = 4194305), "not 4194305"),
            (quote!(max_processes = -1), "not -1"),
            (quote!(max_processes = "64"), "not `\"64\"`"),
            (
                quote!(cpu_limit = "1500ms"),
                "`cpu_limit` counts whole seconds",
            ),
            (quote!(cpu_limit = "0s"), "`cpu_limit` must be at least 1s"),
            (
                quote!(cpu_limit = "2years"),
                "`cpu_limit` must be from 1s to 1year",
            ),
            (
                quote!(cpu_limit = 60),
                "`cpu_limit` must be a string literal",
            ),
            (
                quote!(max_file_size = "1000B"),
                "`max_file_size` must be at least 1 KiB",
            ),
            (
                quote!(max_file_size = "2048TiB"),
                "is too large (at most 1024 TiB)",
            ),
            (quote!(max_file_size = "1G"), "ambiguous unit `G`"),
            (
                quote!(memory_limit = "2048TiB"),
                "is too large (at most 1024 TiB)",
            ),
        ] {
            let message = error(quote!(#iso #option)).expect("refused");
            assert!(message.contains(expected), "{option}: {message}");
        }
        let (limits, errors) = options(quote!(
            #iso max_processes = 4194304, cpu_limit = "1year", max_file_size = "1024TiB"
        ));
        assert!(errors.is_none(), "{errors:?}");
        assert_eq!(limits.policy.max_processes, Some(MAX_PROCESSES));
        assert_eq!(limits.policy.cpu_limit, Some(MAX_CPU_LIMIT));
        assert_eq!(limits.policy.max_file_size, Some(MAX_FILE_SIZE));
        for option in [
            quote!(max_processes = 64),
            quote!(cpu_limit = "1m"),
            quote!(max_file_size = "1GiB"),
        ] {
            let message = error(quote!(name = "t", #option)).expect("refused");
            assert!(
                message.contains("requires `isolation = \"process\"`"),
                "{message}"
            );
        }
    }

    #[test]
    fn a_memory_limit_needs_process_isolation() {
        let error = |tokens: TokenStream| options(tokens).1.map(|e| e.to_string());
        let needs = "`memory_limit` requires `isolation = \"process\"`";
        assert!(
            error(quote!(name = "t", memory_limit = "1GiB"))
                .unwrap()
                .contains(needs)
        );
        assert!(
            error(quote!(
                name = "t",
                isolation = "in-process",
                memory_limit = "1GiB"
            ))
            .unwrap()
            .contains(needs)
        );
        assert!(
            error(quote!(
                name = "t",
                isolation = "process",
                memory_limit = "1GiB"
            ))
            .is_none()
        );
        // An unknown isolation is reported once, without a second error about the limit.
        let unknown = error(quote!(
            name = "t",
            isolation = "thread",
            memory_limit = "1GiB"
        ))
        .unwrap();
        assert!(unknown.contains("unknown `isolation` policy"), "{unknown}");
    }

    #[test]
    fn durations_use_humantime_syntax() {
        let parse = |text: &str| {
            let lit = LitStr::new(text, Span::call_site());
            parse_duration("timeout", "30m", MIN_TIMEOUT, &syn::parse_quote!(#lit))
        };
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("1500us").unwrap(), Duration::from_micros(1500));
        assert!(parse("999us").is_err());
        assert!(parse("30").is_err());
        assert!(parse(" ").is_err());
    }

    #[test]
    fn retries_range_is_inclusive() {
        let parse = |tokens: TokenStream| parse_retries(&syn::parse2(tokens).unwrap());
        assert_eq!(parse(quote!(0)).unwrap(), 0);
        assert_eq!(parse(quote!(100)).unwrap(), 100);
        assert!(parse(quote!(101)).is_err());
        assert!(parse(quote!(-0)).is_err());
        assert!(parse(quote!(99999999999999999999)).is_err());
    }

    #[test]
    fn lists_read_as_prose() {
        let list = |items: &[&str]| prose_list(items.iter().map(|s| s.to_string()), "or");
        assert_eq!(list(&["a"]), "a");
        assert_eq!(list(&["a", "b"]), "a or b");
        assert_eq!(list(&["a", "b", "c"]), "a, b or c");
    }
}
