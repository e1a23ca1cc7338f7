//! Validation pass: decides whether a `#[task]` is well formed and, if so, builds the [`Task`]
//! that [`crate::expand`] turns into code.
//!
//! This module owns every rule of the attribute: which options exist and what values they take,
//! what a task name may contain, and which function signatures the scheduler can call. It reports
//! every violation at once, each at the offending token, in rustc's voice. It does not check types
//! that only rustc can judge (whether the error type converts, whether the future is `Send`): the
//! expansion leaves those to trait bounds placed at the right spans.

use std::fmt::Display;

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote};
use syn::{Expr, ExprLit, ExprPath, FnArg, Item, ItemFn, Lit, LitStr, Path, Type};

use crate::ast::{ArgEntry, TaskArgs};

/// The longest task name accepted; names are stored in a database column and shown in config.
const MAX_NAME_LEN: usize = 128;

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
            }),
            Some(func),
        ) => Ok(Task {
            func,
            name,
            krate: krate.unwrap_or_else(|| syn::parse_quote!(::scheduler)),
            takes_context,
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
        // Adding an option is one arm here plus a field in `Options`.
        let result = match key_name.as_str() {
            "name" => parse_name(value).map(|name| options.name = Some(name)),
            "crate" => parse_crate(value).map(|krate| options.krate = Some(krate)),
            _ => {
                errors.push(syn::Error::new(
                    key.span(),
                    format!("unknown #[task] option `{key}`: the options are `name` and `crate`"),
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
