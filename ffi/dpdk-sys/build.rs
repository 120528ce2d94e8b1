//! Generates the raw DPDK bindings at build time against the system DPDK found by pkg-config.
//! The same cflags (`-include rte_config.h -march=...` and include dirs) go to bindgen and to the C
//! compiler, so the generated Rust layouts and the compiled static-inline wrappers agree.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Functions the safe layer calls. Static inline ones among them get C wrappers from bindgen's
/// `wrap_static_fns`; the rest link against the shared libraries.
const FUNCTIONS: &[&str] = &[
    // EAL, lcores, launch, time
    "rte_eal_init",
    "rte_eal_cleanup",
    "rte_eal_get_runtime_dir",
    "rte_eal_mp_wait_lcore",
    "rte_eal_remote_launch",
    "rte_eal_wait_lcore",
    "rte_eal_get_lcore_state",
    "rte_eal_process_type",
    "rte_strerror",
    "rte_lcore_id",
    "rte_get_main_lcore",
    "rte_get_next_lcore",
    "rte_lcore_count",
    "rte_lcore_is_enabled",
    "rte_lcore_to_socket_id",
    "rte_socket_id",
    "rte_thread_register",
    "rte_thread_unregister",
    "rte_rdtsc",
    "rte_rdtsc_precise",
    "rte_get_tsc_hz",
    "rte_get_tsc_cycles",
    // mempool
    "rte_pktmbuf_pool_create",
    "rte_mempool_free",
    "rte_mempool_lookup",
    "rte_mempool_avail_count",
    "rte_mempool_in_use_count",
    "rte_mempool_obj_iter",
    // mbuf
    "rte_pktmbuf_alloc",
    "rte_pktmbuf_alloc_bulk",
    "rte_pktmbuf_free",
    "rte_pktmbuf_free_bulk",
    "rte_pktmbuf_append",
    "rte_pktmbuf_prepend",
    "rte_pktmbuf_trim",
    "rte_pktmbuf_adj",
    "rte_pktmbuf_clone",
    "rte_pktmbuf_copy",
    "rte_pktmbuf_headroom",
    "rte_pktmbuf_tailroom",
    "rte_pktmbuf_is_contiguous",
    "rte_pktmbuf_data_room_size",
    "rte_mbuf_refcnt_read",
    "rte_mbuf_refcnt_update",
    "rte_mbuf_refcnt_set",
    "rte_pktmbuf_refcnt_update",
    // ethdev
    "rte_eth_dev_count_avail",
    "rte_eth_find_next",
    "rte_eth_dev_is_valid_port",
    "rte_eth_dev_get_port_by_name",
    "rte_eth_dev_get_name_by_port",
    "rte_eth_dev_socket_id",
    "rte_eth_dev_info_get",
    "rte_eth_dev_configure",
    "rte_eth_dev_adjust_nb_rx_tx_desc",
    "rte_eth_rx_queue_setup",
    "rte_eth_tx_queue_setup",
    "rte_eth_dev_start",
    "rte_eth_dev_stop",
    "rte_eth_dev_close",
    "rte_eth_macaddr_get",
    "rte_eth_promiscuous_enable",
    "rte_eth_promiscuous_disable",
    "rte_eth_promiscuous_get",
    "rte_eth_dev_set_link_up",
    "rte_eth_link_get_nowait",
    "rte_eth_stats_get",
    "rte_eth_stats_reset",
    "rte_eth_xstats_get",
    "rte_eth_xstats_get_names",
    "rte_eth_xstats_reset",
    "rte_eth_rx_burst",
    "rte_eth_tx_burst",
    // net_ring PMD and rings (ports wired to each other inside one process)
    "rte_eth_from_rings",
    "rte_ring_create",
    "rte_ring_free",
    "rte_ring_count",
    "rte_ring_dequeue_burst",
    "rte_ring_enqueue_burst",
    // virtual devices at run time
    "rte_vdev_init",
    "rte_vdev_uninit",
    // telemetry and capture hooks
    "rte_telemetry_register_cmd",
    "rte_tel_data_start_dict",
    "rte_tel_data_add_dict_u64",
    "rte_tel_data_add_dict_string",
    "rte_pdump_init",
    "rte_pdump_uninit",
    // hand-written shim (csrc/shim.c)
    "dpdk_sys_.*",
];

/// Types named directly by the safe layer; everything they reference comes along.
const TYPES: &[&str] = &[
    "rte_mbuf",
    "rte_mempool",
    "rte_ring",
    "rte_eth_conf",
    "rte_eth_rxconf",
    "rte_eth_txconf",
    "rte_eth_dev_info",
    "rte_eth_stats",
    "rte_eth_link",
    "rte_eth_xstat",
    "rte_eth_xstat_name",
    "rte_ether_addr",
    "rte_lcore_state_t",
    "rte_rmt_call_main_t",
    "rte_proc_type_t",
    "rte_tel_data",
    "telemetry_cb",
];

/// Constants (macros and enum values).
const VARS: &[&str] = &[
    "RTE_MAX_LCORE",
    "RTE_MAX_ETHPORTS",
    "RTE_MAX_QUEUES_PER_PORT",
    "RTE_PKTMBUF_HEADROOM",
    "RTE_MBUF_DEFAULT_DATAROOM",
    "RTE_MBUF_DEFAULT_BUF_SIZE",
    "RTE_MEMPOOL_CACHE_MAX_SIZE",
    "RTE_ETH_NAME_MAX_LEN",
    "RTE_ETH_XSTATS_NAME_SIZE",
    "RTE_ETH_LINK_.*",
    "RTE_ETH_SPEED_NUM_.*",
    "RTE_ETHER_ADDR_LEN",
    "RTE_ETHER_MIN_LEN",
    "RTE_ETHER_MAX_LEN",
    "RTE_ETHER_HDR_LEN",
    "RTE_ETHER_CRC_LEN",
    "RING_F_.*",
    "RTE_TEL_MAX_.*",
    "SOCKET_ID_ANY",
    "LCORE_ID_ANY",
];

fn main() {
    let dpdk = pkg_config::Config::new()
        .atleast_version("22.11")
        .probe("libdpdk")
        .expect("DPDK >= 22.11 development files (pkg-config libdpdk); run scripts/setup.sh");

    // pkg-config's crate keeps include paths and defines but drops `-include rte_config.h` and
    // `-march=...`, which change struct layouts and inline code: take the raw cflags instead.
    let cflags = raw_cflags();

    // Not in `pkg-config --libs libdpdk` (driver libraries), but exported symbols we call:
    // rte_vdev_init lives in the vdev bus driver, rte_eth_from_rings in the ring PMD.
    println!("cargo:rustc-link-lib=dylib=rte_bus_vdev");
    println!("cargo:rustc-link-lib=dylib=rte_net_ring");

    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    // The wrapper C file bindgen writes `#include`s the header by the path given here, and it is
    // compiled from another directory: give an absolute path.
    let header = manifest_dir.join("csrc/wrapper.h");
    let shim = manifest_dir.join("csrc/shim.c");
    let wrappers = out_dir.join("static_fns");

    for f in ["csrc/wrapper.h", "csrc/shim.h", "csrc/shim.c"] {
        println!("cargo:rerun-if-changed={f}");
    }

    let mut builder = bindgen::Builder::default()
        .header(header.to_str().unwrap())
        .clang_args(&cflags)
        .clang_arg(format!("-I{}", manifest_dir.join("csrc").display()))
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrappers)
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(true)
        .impl_debug(false)
        .generate_comments(true)
        .merge_extern_blocks(true)
        .prepend_enum_name(false)
        // Packed-inside-packed structs that Rust cannot lay out; nothing here reads their fields.
        .opaque_type("rte_arp_hdr")
        .opaque_type("rte_arp_ipv4")
        .opaque_type("rte_l2tpv2_combined_msg_hdr")
        .opaque_type("rte_gtp_psc_generic_hdr")
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for f in FUNCTIONS {
        builder = builder.allowlist_function(f);
    }
    for t in TYPES {
        builder = builder.allowlist_type(t);
    }
    for v in VARS {
        builder = builder.allowlist_var(v);
    }
    let bindings = builder
        .generate()
        .expect("bindgen over csrc/wrapper.h failed");
    bindings
        .write_to_file(out_dir.join("bindings.rs"))
        .expect("writing bindings.rs");

    // Compile bindgen's static-inline wrappers and the hand-written shim with the same flags.
    let mut build = cc::Build::new();
    build
        .file(wrappers.with_extension("c"))
        .file(&shim)
        .include(manifest_dir.join("csrc"))
        .include(&manifest_dir)
        .warnings(false)
        // A call without a prototype (a header not included) returns a truncated int: an
        // error, not a crash at run time.
        .flag("-Werror=implicit-function-declaration")
        .opt_level(2);
    for f in &cflags {
        build.flag(f);
    }
    for p in &dpdk.include_paths {
        build.include(p);
    }
    build.compile("dpdk_sys_inline");
}

fn raw_cflags() -> Vec<String> {
    let out = Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(["--cflags", "libdpdk"])
        .output()
        .expect("running pkg-config --cflags libdpdk");
    assert!(out.status.success(), "pkg-config --cflags libdpdk failed");
    let text = String::from_utf8(out.stdout).expect("pkg-config output is UTF-8");
    // `-include rte_config.h` is two words that must stay together in order; split on
    // whitespace keeps them adjacent, which is all clang and gcc need.
    text.split_whitespace().map(str::to_owned).collect()
}
