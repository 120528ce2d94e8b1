//! Compiles `bpf/switch.bpf.c` with `clang -O2 -g -target bpf` into `OUT_DIR`: the program
//! (`switch.bpf.o`) and a deliberately broken variant for the differential test's self-check
//! (`switch_broken_epoch.bpf.o`, `-DNB_BROKEN_NO_EPOCH_CHECK`) and one for the concurrency
//! test's (`switch_broken_lock.bpf.o`, `-DNB_BROKEN_NO_LOCK`) and one whose timer entry point
//! acts on timers of another barrier (`switch_broken_timer.bpf.o`, `-DNB_BROKEN_STALE_TIMER`); and
//! `bpf/reflector.bpf.c` (`reflector.bpf.o`: the baseline and leaves of `barrier-perf xdp`); and
//! `bpf/steer.bpf.c` (`steer.bpf.o`: barrier-switch's AF_XDP ports' steering program). Needs clang and the libbpf
//! headers (Debian: clang, libbpf-dev; `scripts/setup.sh` installs both).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let src = "bpf/switch.bpf.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-changed=bpf/reflector.bpf.c");
    println!("cargo:rerun-if-changed=bpf/steer.bpf.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_owned());

    match Command::new(&clang).arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => fail(&format!(
            "`{clang} --version` did not run: the XDP program is built with clang \
             (Debian: apt-get install clang, or run scripts/setup.sh; CLANG=path picks another)"
        )),
    }
    let mut includes = Vec::new();
    for dir in ["/usr/include", "/usr/local/include"] {
        if Path::new(dir).join("bpf/bpf_helpers.h").exists() {
            includes.push(dir.to_owned());
        }
    }
    if includes.is_empty() {
        fail(
            "no bpf/bpf_helpers.h under /usr/include or /usr/local/include: the XDP program needs \
             the libbpf headers (Debian: apt-get install libbpf-dev, or run scripts/setup.sh)",
        );
    }
    // <linux/bpf.h> includes <asm/types.h>, which Debian keeps under the multiarch directory;
    // `-target bpf` does not look there by itself.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        other => other,
    };
    let asm = format!("/usr/include/{multiarch}");
    if Path::new(&asm).join("asm/types.h").exists() {
        includes.push(asm);
    }

    compile(&clang, src, &includes, &[], &out.join("switch.bpf.o"));
    compile(
        &clang,
        src,
        &includes,
        &["-DNB_BROKEN_NO_EPOCH_CHECK"],
        &out.join("switch_broken_epoch.bpf.o"),
    );
    compile(
        &clang,
        src,
        &includes,
        &["-DNB_BROKEN_NO_LOCK"],
        &out.join("switch_broken_lock.bpf.o"),
    );
    compile(
        &clang,
        src,
        &includes,
        &["-DNB_BROKEN_STALE_TIMER"],
        &out.join("switch_broken_timer.bpf.o"),
    );
    compile(
        &clang,
        "bpf/reflector.bpf.c",
        &includes,
        &[],
        &out.join("reflector.bpf.o"),
    );
    compile(
        &clang,
        "bpf/steer.bpf.c",
        &includes,
        &[],
        &out.join("steer.bpf.o"),
    );
}

fn compile(clang: &str, src: &str, includes: &[String], defines: &[&str], obj: &Path) {
    let mut cmd = Command::new(clang);
    cmd.args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
        .args(includes.iter().map(|d| format!("-I{d}")))
        .args(defines)
        .args(["-c", src, "-o"])
        .arg(obj);
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("{cmd:?}: {e}")));
    if !status.success() {
        fail(&format!("{cmd:?} failed ({status})"));
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("barrier-xdp: {msg}");
    panic!("barrier-xdp: {msg}");
}
