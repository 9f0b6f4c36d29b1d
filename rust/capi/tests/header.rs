//! `include/rosetree.h` is what cbindgen generates from the crate today.

use std::path::Path;

#[test]
fn the_header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::generate_with_config(dir, config)
        .expect("cbindgen parses the crate")
        .write(&mut generated);
    let path = dir.join("include").join("rosetree.h");
    if std::env::var_os("ROSETREE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("writable include/rosetree.h");
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/rosetree.h is out of date: run `ROSETREE_BLESS=1 cargo test -p rosetree-capi \
         --test header` and commit it"
    );
}
