//! The `#[task]` attribute of the `scheduler` crate. Use it through `scheduler::task`.
//!
//! This file only wires the three passes together; each owns one concern:
//!
//! - `ast` parses the attribute arguments into a typed view that keeps the syn nodes for spans;
//! - `valid` checks the arguments and the function signature, collecting every error at once;
//! - `expand` turns a validated task into the generated registration code.
//!
//! When anything fails, the user's item is emitted unchanged next to the `compile_error!`s, so
//! one mistake does not cascade into "cannot find function" errors at every call site.

mod ast;
mod expand;
mod valid;

use proc_macro::TokenStream;

/// Registers an `async fn` as a scheduler task.
///
/// ```ignore
/// use scheduler::{task, TaskContext};
///
/// #[task(name = "syncAdvertiserReport")]
/// async fn sync_advertiser_report(ctx: TaskContext) -> anyhow::Result<()> {
///     Ok(())
/// }
/// ```
///
/// Options:
///
/// - `name = "..."` (required): the stable task name stored in the database and used in config;
///   1 to 128 ASCII letters, digits, `_`, `.`, `:` or `-`.
/// - `crate = path`: where the `scheduler` crate is, for a renamed dependency (default
///   `::scheduler`).
///
/// The function takes no parameter or one `TaskContext`, and returns `()` or `Result<(), E>`
/// for any `E` that converts into `Box<dyn std::error::Error + Send + Sync>`. Its future must
/// be `Send + 'static`. It must be a free function (in a module or a block): a registration
/// cannot be emitted inside an `impl` block.
#[proc_macro_attribute]
pub fn task(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    let args = ast::TaskArgs::parse(args.into());
    match valid::validate(args, item.clone()) {
        Ok(task) => expand::expand(&task).into(),
        Err(errors) => {
            let mut out = item;
            out.extend(errors.into_compile_error());
            out.into()
        }
    }
}
