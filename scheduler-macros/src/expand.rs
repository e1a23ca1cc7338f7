//! Expansion pass: the code generated for a validated [`Task`].
//!
//! This module owns the shape of the generated code and nothing else: the user's function is
//! emitted unchanged, and everything the macro adds lives inside `const _: () = { ... };` so no
//! name leaks into the user's module. Generated code names the runtime only through
//! `<crate>::__private`, the hidden path the `scheduler` crate keeps for it.
//!
//! Type checks that only rustc can do are placed at the user's tokens: the `Send + 'static`
//! bound on the future at the function's name, the `IntoTaskResult` bound at the return type.

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::{Ident, Path, ReturnType};

use crate::valid::{Policy, Shards, Task};

/// The generated code for one task: the function, then its registration.
pub fn expand(task: &Task) -> TokenStream {
    let Task {
        func,
        name,
        krate,
        takes_context,
        policy,
    } = task;
    let private = quote!(#krate::__private);
    let options = task_options(&private, policy);
    let fn_name = &func.sig.ident;

    // Hygienic (mixed-site) local, so a user fn that happens to be called `ctx` still resolves.
    let ctx = Ident::new("ctx", Span::mixed_site());
    let ctx_arg = takes_context.then(|| quote!(#ctx));

    // The call is spanned at the function's name so that "future cannot be sent between threads
    // safely" points at the user's function, not at generated code. Every token of the
    // expression carries that span, since rustc spans an expression from its first token to its
    // last.
    let fn_span = fn_name.span();
    let private_at_fn = private_at(krate, fn_span);
    let future = quote_spanned!(fn_span=> #private_at_fn::assert_send(#fn_name(#ctx_arg)));

    // The conversion is spanned over the return type so that an unsupported return type, or an
    // error type that does not convert into `TaskError`, is reported there: the path starts at
    // the type's first token and ends at its last.
    let (output_first, output_last) = match &func.sig.output {
        ReturnType::Default => (fn_span, fn_span),
        ReturnType::Type(_, ty) => token_spans(ty),
    };
    let private_at_output = private_at(krate, output_first);
    let convert = Ident::new("into_task_result", output_last);
    let into_task_result =
        quote_spanned!(output_first=> #private_at_output::IntoTaskResult::#convert);
    let task_future =
        quote_spanned!(fn_span=> #private_at_fn::task_future(#future, #into_task_result));

    quote! {
        #func

        const _: () = {
            fn __scheduler_task_handler(#ctx: #private::TaskContext) -> #private::TaskFuture {
                #task_future
            }

            #private::inventory::submit! {
                #private::TaskDescriptor {
                    name: #name,
                    file: ::core::file!(),
                    line: ::core::line!(),
                    module_path: ::core::module_path!(),
                    options: #options,
                    handler: __scheduler_task_handler,
                }
            }
        };
    }
}

/// The `TaskOptions` constant: `DEFAULT` with one setter call per option given. It must stay a
/// const expression, since `inventory::submit!` places it in a static.
fn task_options(private: &TokenStream, policy: &Policy) -> TokenStream {
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
    } = policy;
    let timeout = timeout.map(|d| {
        let d = duration(d);
        quote!(.timeout(#d))
    });
    let retries = retries.map(|n| {
        let n = Literal::u32_unsuffixed(n);
        quote!(.retries(#n))
    });
    let backoff = backoff.map(|d| {
        let d = duration(d);
        quote!(.backoff(#d))
    });
    let misfire = misfire
        .as_ref()
        .map(|variant| quote!(.misfire(#private::Misfire::#variant)));
    let lock_lifetime = lock_lifetime.map(|d| {
        let d = duration(d);
        quote!(.lock_lifetime(#d))
    });
    let recovery = recovery
        .as_ref()
        .map(|variant| quote!(.recovery(#private::Recovery::#variant)));
    let isolation = isolation
        .as_ref()
        .map(|variant| quote!(.isolation(#private::Isolation::#variant)));
    let memory_limit = memory_limit.map(|bytes| {
        let bytes = Literal::u64_unsuffixed(bytes);
        quote!(.memory_limit(#bytes))
    });
    let max_processes = max_processes.map(|n| {
        let n = Literal::u64_unsuffixed(n);
        quote!(.max_processes(#n))
    });
    let cpu_limit = cpu_limit.map(|secs| {
        let d = duration(Duration::from_secs(secs));
        quote!(.cpu_limit(#d))
    });
    let max_file_size = max_file_size.map(|bytes| {
        let bytes = Literal::u64_unsuffixed(bytes);
        quote!(.max_file_size(#bytes))
    });
    let shards = shards.map(|shards| match shards {
        Shards::Count(n) => {
            let n = Literal::u32_unsuffixed(n);
            quote!(.shards(#n))
        }
        Shards::Nodes => quote!(.broadcast()),
    });
    let jitter = jitter.map(|d| {
        let d = duration(d);
        quote!(.jitter(#d))
    });
    let limit = limit.as_ref().map(|name| quote!(.limit(#name)));
    quote! {
        #private::TaskOptions::DEFAULT
            #timeout #retries #backoff #misfire #lock_lifetime #recovery #isolation #memory_limit
            #max_processes #cpu_limit #max_file_size #shards #jitter #limit
    }
}

/// A `Duration` constant equal to `d` to the nanosecond (`from_millis` would round `"1500us"`).
fn duration(d: Duration) -> TokenStream {
    let secs = Literal::u64_unsuffixed(d.as_secs());
    let nanos = Literal::u32_unsuffixed(d.subsec_nanos());
    quote!(::core::time::Duration::new(#secs, #nanos))
}

/// The spans of a node's first and last tokens (spans cannot be joined on stable).
fn token_spans(node: &impl ToTokens) -> (Span, Span) {
    let mut tokens = node.to_token_stream().into_iter();
    let first = tokens
        .next()
        .map_or_else(Span::call_site, |token| token.span());
    let last = tokens.last().map_or(first, |token| token.span());
    (first, last)
}

/// `<krate>::__private` with every token at `span`, for expressions whose errors must land there.
fn private_at(krate: &Path, span: Span) -> TokenStream {
    quote!(#krate::__private)
        .into_iter()
        .map(|mut token| {
            token.set_span(span);
            token
        })
        .collect()
}
