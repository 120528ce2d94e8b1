//! The C side of libbarrier: barrier.h's structs match the Rust ones, the C example compiles
//! against the built library (shared, static, and through the pkg-config file that scripts/install.sh
//! writes) and completes barriers through a switch over a veth pair in a throw-away network
//! namespace. The switch is played by the test: a root running the protocol's switch logic on
//! the other end of the pair (tests/c_example_switch.rs runs it against the real barrier-switch
//! process). Tests that need root skip themselves otherwise, saying so.

mod common;

use barrier_protocol::wire::{MacAddr, ETHERTYPE};
use barrier_testbed::mini_root::{MiniRoot, StopOnDrop};
use barrier_testbed::netns::{can_create, VethNetns};
use common::{build_example_shared, check, example_seqs, lib_dir, run, scratch, CRATE};
use rawsock::RawSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn header_structs_match_the_rust_layout() {
    use barrier::{BarrierLeafOptions, BarrierRecord, BarrierStats};
    use std::mem::{offset_of, size_of};
    let dir = scratch("layout");
    let src = dir.join("layout.c");
    std::fs::write(
        &src,
        r#"#include <barrier.h>
#include <stddef.h>
#include <stdio.h>
#define P(x) printf("%zu\n", (size_t)(x))
int main(void) {
    P(sizeof(barrier_leaf_options)); P(offsetof(barrier_leaf_options, wait_timeout_us));
    P(offsetof(barrier_leaf_options, dst_mac)); P(offsetof(barrier_leaf_options, timestamps));
    P(offsetof(barrier_leaf_options, first_seq)); P(offsetof(barrier_leaf_options, epoch));
    P(sizeof(barrier_record)); P(offsetof(barrier_record, first_reduce_ns));
    P(offsetof(barrier_record, release_ns)); P(offsetof(barrier_record, resends));
    P(sizeof(barrier_stats)); P(offsetof(barrier_stats, bad_frames));
    barrier_leaf_options o; barrier_leaf_options_init(&o);
    P(o.resend_timeout_us); P(o.wait_timeout_us); P(o.dst_mac[0]); P(o.first_seq); P(o.epoch);
    P(BARRIER_ETIMEDOUT == -3); P(BARRIER_EINTERNAL == -8); P(BARRIER_EABORTED == -9);
    P(BARRIER_EEPOCHINUSE == -10); P(BARRIER_ENOTSUP == -11);
    P(barrier_leaf_set_busy_poll(NULL, 5) == BARRIER_EINVAL);
    return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.join("layout");
    let lib = lib_dir();
    check(
        Command::new("cc")
            .arg(format!("-I{CRATE}/include"))
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", lib.display()))
            .arg("-lbarrier")
            .arg(format!("-Wl,-rpath,{}", lib.display())),
    );
    let out = check(&mut Command::new(&exe));
    let got: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    let d = BarrierLeafOptions::defaults();
    let want = vec![
        size_of::<BarrierLeafOptions>(),
        offset_of!(BarrierLeafOptions, wait_timeout_us),
        offset_of!(BarrierLeafOptions, dst_mac),
        offset_of!(BarrierLeafOptions, timestamps),
        offset_of!(BarrierLeafOptions, first_seq),
        offset_of!(BarrierLeafOptions, epoch),
        size_of::<BarrierRecord>(),
        offset_of!(BarrierRecord, first_reduce_ns),
        offset_of!(BarrierRecord, release_ns),
        offset_of!(BarrierRecord, resends),
        size_of::<BarrierStats>(),
        offset_of!(BarrierStats, bad_frames),
        d.resend_timeout_us as usize,
        d.wait_timeout_us as usize,
        0xff,
        0,
        1,
        1,
        1,
        1,
        1,
        1,
        1,
    ];
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn static_and_pkg_config_builds_link_and_run() {
    if Command::new("pkg-config")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: needs pkg-config");
        return;
    }
    let dir = scratch("pc");
    let prefix = dir.join("prefix");
    check(
        Command::new("bash")
            .arg(format!("{CRATE}/../../scripts/install.sh"))
            .arg("--prefix")
            .arg(&prefix)
            .arg("--build-dir")
            .arg(lib_dir())
            .arg("--lib-only")
            // no MPI pieces: install.sh would link coll/netbarrier into Open MPI's folder (outside
            // the prefix, on the machine), pointing at this scratch folder
            .arg("--no-mpi")
            .arg("--no-ldconfig"),
    );
    for pc in ["barrier.pc", "barrier-libs.pc"] {
        let text = std::fs::read_to_string(prefix.join("lib/pkgconfig").join(pc)).unwrap();
        assert!(!text.contains('@'), "unfilled template: {text}");
    }
    let pkg = |args: &[&str]| -> Vec<String> {
        let out = check(
            Command::new("pkg-config")
                .args(args)
                .arg("barrier")
                .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")),
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let cflags = pkg(&["--cflags"]);
    let libs = pkg(&["--libs"]);
    assert!(libs.contains(&"-lbarrier".to_string()), "{libs:?}");
    let example = format!("{CRATE}/examples/c/barrier_example.c");

    // Shared, from the pkg-config flags alone (plus an rpath to the prefix, which the loader
    // does not search: scripts/tests/install.sh checks the same without an rpath, installed
    // to /usr/local).
    let shared = dir.join("example_shared");
    check(
        Command::new("cc")
            .args(&cflags)
            .arg(&example)
            .arg("-o")
            .arg(&shared)
            .args(&libs)
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display())),
    );
    // Static: exactly what `pkg-config --static --libs` says (libbarrier.a first).
    let static_exe = dir.join("example_static");
    let static_libs = pkg(&["--static", "--libs"]);
    assert!(
        static_libs.contains(&"-l:libbarrier.a".to_string()),
        "{static_libs:?}"
    );
    check(
        Command::new("cc")
            .args(&cflags)
            .arg(&example)
            .arg("-o")
            .arg(&static_exe)
            .args(&static_libs),
    );
    let ldd = run(Command::new("ldd").arg(&static_exe));
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("libbarrier"),
        "static build depends on libbarrier.so"
    );

    // Both run: on an interface that does not exist they report a setup error through
    // barrier_strerror/barrier_leaf_last_error and exit 2.
    for exe in [&shared, &static_exe] {
        let out = run(Command::new(exe).args(["nbnosuchif0", "7", "1"]));
        assert_eq!(out.status.code(), Some(2), "{exe:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("no such network interface") || err.contains("not permitted"),
            "{exe:?}: {err}"
        );
        assert!(err.contains("nbnosuchif0"), "{err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A root switch for group 7 with one child, on socket `sock`, until `stop`.
fn serve_switch(sock: &RawSocket, stop: &AtomicBool, drop_first_release: bool) {
    let mut root = MiniRoot::new(MacAddr(sock.mac()));
    root.add_group(7, &[0]);
    if drop_first_release {
        let mut n = 0;
        root.set_release_filter(Box::new(move |_| {
            n += 1;
            n > 1
        }));
    }
    root.serve_sockets(std::slice::from_ref(sock), stop)
        .expect("switch loop");
}

#[test]
fn c_example_completes_barriers_through_a_switch() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let dir = scratch("veth");
    let exe = build_example_shared(&dir);
    let bed = VethNetns::create().expect("netns + veth");
    let records = dir.join("records.csv");
    let stop = AtomicBool::new(false);
    // Bound before the example starts, so its first reduce reaches the switch.
    let sock = RawSocket::open_in_netns(&bed.netns, &bed.b, ETHERTYPE).expect("switch socket");
    let out = std::thread::scope(|s| {
        s.spawn(|| serve_switch(&sock, &stop, true));
        let _stop_guard = StopOnDrop(&stop);
        let out = run(bed
            .command(exe.to_str().unwrap())
            .args([&bed.a, "7", "25"])
            .arg(&records));
        stop.store(true, Ordering::Relaxed);
        out
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let seqs = example_seqs(&stdout, 7);
    assert_eq!(seqs, (0..25).collect::<Vec<_>>(), "{stdout}");
    // The first release was dropped: the leaf re-sent its reduce and the switch re-released.
    assert!(
        stdout.lines().next().unwrap().ends_with("resends=1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("25 releases") && stdout.contains("next seq 25"),
        "{stdout}"
    );
    let recs =
        barrier_leaf::records::parse_records(&std::fs::read_to_string(&records).unwrap()).unwrap();
    assert_eq!(recs.len(), 25);
    assert!(recs
        .iter()
        .all(|r| r.group == 7 && r.release_ns > r.first_reduce_ns));
    drop(bed);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn c_example_reports_a_timeout_naming_group_and_seq() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let dir = scratch("timeout");
    let exe = build_example_shared(&dir);
    let bed = VethNetns::create().expect("netns + veth");
    // No switch: the example's 2 s wait timeout ends the first barrier.
    let out = run(bed.command(exe.to_str().unwrap()).args([&bed.a, "7", "3"]));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("barrier not released within the timeout"),
        "{err}"
    );
    assert!(err.contains("group 7") && err.contains("seq 0"), "{err}");
    drop(bed);
    let _ = std::fs::remove_dir_all(dir);
}
