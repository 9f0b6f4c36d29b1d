//! The shared library's own name, so that a program linked against it finds it through its
//! rpath wherever it was built: ELF `SONAME` `librosetree_c.so`, Mach-O install name
//! `@rpath/librosetree_c.dylib` (the linker's default would be the absolute path of the
//! file in `target/`, which is wrong once the library is copied into a wheel).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly" | "illumos") => {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librosetree_c.so");
        }
        Ok("macos" | "ios") => {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/librosetree_c.dylib");
        }
        _ => {}
    }
}
