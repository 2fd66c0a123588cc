//! Links the gateway's hot functions next to each other.
//!
//! A proxied call runs some 60,000 instructions spread over a few hundred functions of
//! seawall and its dependencies, each run about once: the call is bound by fetching its
//! code, not by executing it. `deploy/link-order.txt` lists those functions, hottest
//! first (`scripts/link-order` writes it from a profile of proxied calls), and the linker
//! places them in that order, so that the call's code sits in a few hundred kilobytes of
//! pages instead of being scattered over the whole program.
//!
//! Only the `production` profile's build of the `seawall` binary for x86-64 Linux (GNU)
//! uses it: the list names functions as that profile's build names them (the profile's
//! settings are part of every generic function's name), and there the linker is LLD
//! (Rust's default since 1.90), which takes the list. A name the build does not have is
//! skipped without a word, so a stale list costs nothing but the gain.
//! `SEAWALL_LINK_ORDER=0` builds without it (for a toolchain set up with another linker).

use std::path::Path;

fn main() {
    const ORDER: &str = "deploy/link-order.txt";
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=SEAWALL_LINK_ORDER");
    let env = |key: &str| std::env::var(key).unwrap_or_default();
    let wanted = env("SEAWALL_LINK_ORDER") != "0";
    let lld_target = env("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && env("CARGO_CFG_TARGET_OS") == "linux"
        && env("CARGO_CFG_TARGET_ENV") == "gnu";
    // OUT_DIR is <target>/<profile>/build/<package>-<hash>/out.
    let out_dir = env("OUT_DIR");
    let profile = Path::new(&out_dir).ancestors().nth(3).and_then(Path::file_name);
    let production = profile.is_some_and(|name| name == "production");
    let order = Path::new(&env("CARGO_MANIFEST_DIR")).join(ORDER);
    if wanted && lld_target && production && order.is_file() {
        println!("cargo:rustc-link-arg-bin=seawall=-Wl,--symbol-ordering-file={}", order.display());
        println!("cargo:rustc-link-arg-bin=seawall=-Wl,--no-warn-symbol-ordering");
    }
}
