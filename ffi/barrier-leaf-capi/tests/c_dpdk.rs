//! `barrier_leaf_open_dpdk` from C (cargo feature `dpdk`): a C program opens a leaf on a DPDK
//! `net_af_packet` port on one end of a veth pair in a throw-away network namespace, with a root
//! switch (the protocol's switch logic, played by the test on a raw socket) on the other end, and
//! runs barriers through it: each is released, and its records file holds each, in order. The
//! same program then checks the EAL rules: a second open with other EAL arguments is refused
//! with BARRIER_EINVAL, an unknown port is an error naming it. Needs root; built and run only
//! with `--features dpdk` (`cargo nextest run -p barrier-leaf-capi --features dpdk`).
#![cfg(feature = "dpdk")]

mod common;

use barrier_protocol::wire::{MacAddr, ETHERTYPE};
use barrier_testbed::mini_root::{MiniRoot, StopOnDrop};
use barrier_testbed::netns::{can_create, VethNetns};
use common::{check, lib_dir, run, scratch, CRATE};
use rawsock::RawSocket;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

const PROGRAM: &str = r#"#include <barrier.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* usage: prog "EAL ARGS" PORT GROUP COUNT RECORDS */
int main(int argc, char **argv)
{
    if (argc != 6)
        return 2;
    barrier_leaf_options o;
    barrier_leaf_options_init(&o);
    o.resend_timeout_us = 2000;
    o.wait_timeout_us = 2000000;
    barrier_leaf *leaf = NULL;
    int rc = barrier_leaf_open_dpdk(argv[1], argv[2], &o, &leaf);
    if (rc != BARRIER_OK) {
        fprintf(stderr, "open_dpdk: %s: %s\n", barrier_strerror(rc), barrier_leaf_last_error());
        return 2;
    }
    uint32_t group = (uint32_t)strtoul(argv[3], NULL, 0);
    unsigned long count = strtoul(argv[4], NULL, 0);
    if (barrier_leaf_add_group(leaf, group) != BARRIER_OK || barrier_leaf_records_to(leaf, argv[5]) != BARRIER_OK)
        return 2;
    for (unsigned long i = 0; i < count; i++) {
        barrier_record rec;
        rc = barrier_leaf_wait(leaf, group, 0, &rec);
        if (rc != BARRIER_OK) {
            fprintf(stderr, "barrier %lu: %s: %s\n", i, barrier_strerror(rc), barrier_leaf_last_error());
            return 1;
        }
        printf("barrier group=%" PRIu32 " seq=%" PRIu32 " latency_ns=%" PRIu64 "\n", rec.group, rec.seq,
               rec.release_ns - rec.first_reduce_ns);
    }
    barrier_leaf *other = NULL;
    rc = barrier_leaf_open_dpdk("--no-huge -m 64", argv[2], NULL, &other);
    printf("other eal args: %d %s\n", rc, barrier_leaf_last_error());
    rc = barrier_leaf_open_dpdk(NULL, "net_nbl_no_such_port", NULL, &other);
    printf("no such port: %d %s\n", rc, barrier_leaf_last_error());
    barrier_stats st;
    barrier_leaf_stats(leaf, &st);
    printf("done: %" PRIu64 " releases\n", st.releases);
    barrier_leaf_close(leaf);
    return 0;
}
"#;

#[test]
fn a_c_program_runs_barriers_on_a_dpdk_port() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let dir = scratch("dpdk");
    let src = dir.join("dpdk_leaf.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("dpdk_leaf");
    let lib = lib_dir();
    check(
        Command::new("cc")
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{CRATE}/include"))
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", lib.display()))
            .arg("-lbarrier")
            .arg(format!("-Wl,-rpath,{}", lib.display())),
    );
    let bed = VethNetns::create().expect("netns + veth");
    let records = dir.join("records.csv");
    let prefix = format!("nbl-capi-{}", std::process::id());
    let eal = format!(
        "-l 0 --no-huge -m 256 --no-shconf --file-prefix {prefix} --no-pci --iova-mode=va \
         --no-telemetry --log-level=*:warning --vdev=net_af_packet0,iface={}",
        bed.a
    );
    let sock = RawSocket::open_in_netns(&bed.netns, &bed.b, ETHERTYPE).expect("switch socket");
    let mut root = MiniRoot::new(MacAddr(sock.mac()));
    root.add_group(7, &[0]);
    let stop = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        let (root, sock, stop) = (&mut root, &sock, &stop);
        s.spawn(move || {
            root.serve_sockets(std::slice::from_ref(sock), stop)
                .unwrap()
        });
        let _stop_guard = StopOnDrop(stop);
        let out = run(bed
            .command(exe.to_str().unwrap())
            .args([eal.as_str(), "net_af_packet0", "7", "50"])
            .arg(&records));
        stop.store(true, Ordering::Relaxed);
        out
    });
    // The EAL stays up until the program exits, without a cleanup: its runtime folder stays.
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        common::example_seqs(&stdout, 7),
        (0..50).collect::<Vec<_>>(),
        "{stdout}"
    );
    assert!(stdout.contains("done: 50 releases"), "{stdout}");
    assert!(
        stdout.contains("other eal args: -1 eal_args \"--no-huge -m 64\": the EAL of this process was started with"),
        "{stdout}"
    );
    let no_port = stdout
        .lines()
        .find(|l| l.starts_with("no such port: "))
        .unwrap();
    // BARRIER_ENODEV, the port named.
    assert!(
        no_port.starts_with("no such port: -7 ") && no_port.contains("net_nbl_no_such_port"),
        "{no_port}"
    );
    let recs =
        barrier_leaf::records::parse_records(&std::fs::read_to_string(&records).unwrap()).unwrap();
    assert_eq!(
        recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
        (0..50).collect::<Vec<_>>()
    );
    assert!(recs
        .iter()
        .all(|r| r.released && r.release_ns > r.first_reduce_ns));
    drop(bed);
    let _ = std::fs::remove_dir_all(dir);
}
