//! Expansion pass: the code generated for a validated [`Task`].
//!
//! This module owns the shape of the generated code and nothing else: the user's function is
//! emitted unchanged, and everything the macro adds lives inside `const _: () = { ... };` so no
//! name leaks into the user's module. Generated code names the runtime only through
//! `<crate>::__private`, the hidden path the `scheduler` crate keeps for it.
//!
//! Type checks that only rustc can do are placed at the user's tokens: the `Send + 'static`
//! bound on the future at the function's name, the `IntoTaskResult` bound at the return type.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::{Ident, ReturnType};

use crate::valid::Task;

/// The generated code for one task: the function, then its registration.
pub fn expand(task: &Task) -> TokenStream {
    let Task {
        func,
        name,
        krate,
        takes_context,
    } = task;
    let private = quote!(#krate::__private);
    let fn_name = &func.sig.ident;

    // Hygienic (mixed-site) local, so a user fn that happens to be called `ctx` still resolves.
    let ctx = Ident::new("ctx", Span::mixed_site());
    let ctx_arg = takes_context.then(|| quote!(#ctx));

    // The call is spanned at the function's name so that "future cannot be sent between threads
    // safely" points at the user's function, not at generated code.
    let fn_span = fn_name.span();
    let future = quote_spanned!(fn_span=> #private::assert_send(#fn_name(#ctx_arg)));

    // The conversion is spanned at the return type so that an error type that does not convert
    // into `TaskError` is reported there.
    let output_span = match &func.sig.output {
        ReturnType::Default => fn_span,
        ReturnType::Type(_, ty) => first_span(ty),
    };
    let into_task_result =
        quote_spanned!(output_span=> #private::IntoTaskResult::into_task_result);

    quote! {
        #func

        const _: () = {
            fn __scheduler_task_handler(#ctx: #private::TaskContext) -> #private::TaskFuture {
                #private::task_future(#future, #into_task_result)
            }

            #private::inventory::submit! {
                #private::TaskDescriptor {
                    name: #name,
                    file: ::core::file!(),
                    line: ::core::line!(),
                    module_path: ::core::module_path!(),
                    options: #private::TaskOptions::DEFAULT,
                    handler: __scheduler_task_handler,
                }
            }
        };
    }
}

/// The span of a node's first token (spans cannot be joined on stable).
fn first_span(node: &impl ToTokens) -> Span {
    node.to_token_stream()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |token| token.span())
}
