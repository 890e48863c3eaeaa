//! `#[on_both_backends]`: a test is written once, as a plain function that takes its fixture,
//! and runs on both stores.
//!
//! ```ignore
//! #[on_both_backends]
//! async fn a_slug_is_unique(db: Db) {
//!     // ...
//! }
//! ```
//!
//! keeps the function as it is (so rustfmt and the reader see ordinary code) and adds beside
//! it a module of the same name with two tests, `a_slug_is_unique::postgres` and
//! `a_slug_is_unique::sqlite`, each calling it with `Db::postgres().await` and
//! `Db::sqlite().await`: the fixture type says how a backend is set up, by its two associated
//! functions `postgres()` and `sqlite()`. An `async fn` runs on tokio's multi-threaded runtime
//! with `worker_threads` (2 unless the attribute says `#[on_both_backends(worker_threads = 4)]`);
//! a plain `fn` is a plain `#[test]` and its fixture's functions are not `async`.

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, spanned::Spanned, FnArg, ItemFn, LitInt, Pat, Type};

/// Runs the test function once per backend, as `<name>::postgres` and `<name>::sqlite` (see
/// the crate's documentation).
#[proc_macro_attribute]
pub fn on_both_backends(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut worker_threads = 2usize;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("worker_threads") {
            worker_threads = meta.value()?.parse::<LitInt>()?.base10_parse()?;
            Ok(())
        } else {
            Err(meta.error("the one setting is `worker_threads = N`"))
        }
    });
    parse_macro_input!(args with parser);
    let test = parse_macro_input!(item as ItemFn);
    match expand(&test, worker_threads) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

fn expand(test: &ItemFn, worker_threads: usize) -> syn::Result<proc_macro2::TokenStream> {
    let name = &test.sig.ident;
    let fixture = fixture_type(test)?;
    let tests = if test.sig.asyncness.is_some() {
        quote! {
            #[tokio::test(flavor = "multi_thread", worker_threads = #worker_threads)]
            async fn postgres() {
                super::#name(<#fixture>::postgres().await).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = #worker_threads)]
            async fn sqlite() {
                super::#name(<#fixture>::sqlite().await).await
            }
        }
    } else {
        quote! {
            #[test]
            fn postgres() {
                super::#name(<#fixture>::postgres())
            }

            #[test]
            fn sqlite() {
                super::#name(<#fixture>::sqlite())
            }
        }
    };
    Ok(quote! {
        #test

        mod #name {
            #[allow(unused_imports)]
            use super::*;

            #tests
        }
    })
}

/// The type of the function's one parameter: the fixture.
fn fixture_type(test: &ItemFn) -> syn::Result<&Type> {
    let mut inputs = test.sig.inputs.iter();
    match (inputs.next(), inputs.next()) {
        (Some(FnArg::Typed(typed)), None) if matches!(*typed.pat, Pat::Ident(_)) => Ok(&typed.ty),
        _ => Err(syn::Error::new(
            test.sig.span(),
            "#[on_both_backends] takes a function of one parameter, its fixture (`db: Db`)",
        )),
    }
}
