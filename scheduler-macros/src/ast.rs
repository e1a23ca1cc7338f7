//! Parse pass: the attribute's arguments as written, `key = value, ...`.
//!
//! This module owns only the syntax. It keeps every key and value as syn nodes so that later
//! passes can point errors at the exact token; it does not know which keys exist or what their
//! values mean (that is [`crate::valid`]).

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, LitStr, Token};

/// The arguments of one `#[task(...)]`, in source order, duplicates included.
pub struct TaskArgs {
    pub entries: Vec<ArgEntry>,
}

/// One `key = value` argument.
pub struct ArgEntry {
    /// The key; `crate` is accepted although it is a keyword.
    pub key: Ident,
    /// The value, kept as an expression so a wrong kind of value (`name = 5`) can be reported
    /// at its own span by the validation pass.
    pub value: Expr,
}

impl TaskArgs {
    /// Parses the tokens between the attribute's parentheses.
    pub fn parse(tokens: TokenStream) -> syn::Result<Self> {
        Self::parse_stream.parse2(tokens)
    }

    fn parse_stream(input: ParseStream) -> syn::Result<Self> {
        let mut entries = Vec::new();
        while !input.is_empty() {
            if input.peek(LitStr) {
                let lit: LitStr = input.parse()?;
                return Err(syn::Error::new(
                    lit.span(),
                    format!(
                        "expected `name = ...`: write #[task(name = {})]",
                        lit.token()
                    ),
                ));
            }
            let key = input.call(Ident::parse_any).map_err(|e| {
                syn::Error::new(e.span(), "expected an option such as `name = \"...\"`")
            })?;
            if !input.peek(Token![=]) {
                return Err(syn::Error::new(
                    key.span(),
                    format!("expected `=` after `{key}`: write `{key} = ...`"),
                ));
            }
            input.parse::<Token![=]>()?;
            let value: Expr = input.parse()?;
            entries.push(ArgEntry { key, value });
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(Self { entries })
    }
}
