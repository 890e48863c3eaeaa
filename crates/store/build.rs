//! The migrations are embedded at compile time (`embed_migrations!`): rebuild the crate when one
//! is added or changed, as diesel_migrations asks (a new migration folder changes no Rust file).
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
