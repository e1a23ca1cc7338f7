//! The `#[task]` attribute. (Stub.)

use proc_macro::TokenStream;

/// Registers an `async fn` as a scheduler task.
#[proc_macro_attribute]
pub fn task(_args: TokenStream, item: TokenStream) -> TokenStream {
    item
}
