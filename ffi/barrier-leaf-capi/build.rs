//! Gives `libbarrier.so` a SONAME, `libbarrier.so.<major>` (the workspace version's major
//! number), so that a program linked against it records that name and keeps working across
//! compatible updates; `scripts/install.sh` installs the file as `libbarrier.so.<version>` with
//! the `libbarrier.so.<major>` and `libbarrier.so` links (and runs `ldconfig` on system
//! prefixes).
//!
//! A program linked against `target/<profile>/libbarrier.so` asks the loader for
//! `libbarrier.so.<major>`, so this script also puts that name next to the library as a
//! symbolic link (`libbarrier.so.<major> -> libbarrier.so`): `LD_LIBRARY_PATH=target/release` or
//! an rpath to the target folder then works as before. That is the one thing it writes outside
//! `OUT_DIR` (which is `target/<profile>/build/<crate>-<hash>/out`).

fn main() {
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let soname = format!("libbarrier.so.{major}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    println!("cargo:rerun-if-changed=build.rs");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Some(profile_dir) = out.ancestors().nth(3) {
        let link = profile_dir.join(&soname);
        if std::fs::symlink_metadata(&link).is_err() {
            // Another build of the same profile may create it at the same moment: a lost race
            // leaves the same link, so the error is not worth failing the build for.
            let _ = std::os::unix::fs::symlink("libbarrier.so", &link);
        }
    }
}
