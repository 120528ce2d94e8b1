//! Wrong requests against a working EAL get clear errors and leave it working: a second EAL
//! init, ports that do not exist, impossible mempools, unknown run-time vdevs, bad queue use.
//! Also checks the `app [EAL args] -- [app args]` split.

mod common;

use dpdk::{DpdkError, Eal, Mempool, Port, PortId, QueueId};

#[test]
fn bad_input_gets_clear_errors() {
    let mut args = dpdk::test_args("bad_input", &["--vdev=net_ring0"]);
    let prefix = args[args.iter().position(|a| a == "--file-prefix").unwrap() + 1].clone();
    args.extend(["--", "-p", "3", "--verbose"].map(String::from));
    let (eal, app) = Eal::init(args).unwrap();
    assert_eq!(app, ["-p", "3", "--verbose"]);
    assert!(dpdk::eal::is_initialised());

    // A second EAL in the same process.
    let err = Eal::init(dpdk::test_args("bad_input", &[])).unwrap_err();
    assert_eq!(err, DpdkError::EalAlreadyInitialized);
    assert!(err.to_string().contains("already initialised"), "{err}");

    // Ports that do not exist.
    let err = Port::open(&eal, PortId(9)).unwrap_err().to_string();
    assert!(err.contains("port9 does not exist"), "{err}");
    let err = Port::open(&eal, PortId(5000)).unwrap_err().to_string();
    assert!(err.contains("beyond RTE_MAX_ETHPORTS"), "{err}");
    let err = Port::id_by_name(&eal, "net_ring9").unwrap_err().to_string();
    assert!(
        err.contains("rte_eth_dev_get_port_by_name failed") && err.contains("net_ring9"),
        "{err}"
    );
    let err = Port::attach_vdev(&eal, "net_nosuchdriver0")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("rte_vdev_init failed") && err.contains("net_nosuchdriver0"),
        "{err}"
    );

    // A port has one owner.
    let mut port = Port::open_by_name(&eal, "net_ring0").unwrap();
    let err = Port::open(&eal, port.id()).unwrap_err().to_string();
    assert!(err.contains("already owned"), "{err}");

    // Impossible mempools.
    let err = Mempool::new_pktmbuf(&eal, "huge", u32::MAX, 0, 2176).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("rte_pktmbuf_pool_create failed"),
        "{err}"
    );
    assert_eq!(err.errno(), Some(12), "ENOMEM: {err}");
    let err = Mempool::new_pktmbuf(&eal, "empty", 0, 0, 2176)
        .unwrap_err()
        .to_string();
    assert!(err.contains("at least one mbuf"), "{err}");
    let err = Mempool::new_pktmbuf(&eal, "tiny", 63, 0, 16)
        .unwrap_err()
        .to_string();
    assert!(err.contains("smaller than the headroom"), "{err}");
    let err = Mempool::new_pktmbuf(&eal, "bigcache", 1023, 100_000, 2176).unwrap_err();
    assert_eq!(err.errno(), Some(22), "EINVAL: {err}");
    let pool = Mempool::new_pktmbuf(&eal, "dup", 63, 0, 2176).unwrap();
    let err = Mempool::new_pktmbuf(&eal, "dup", 63, 0, 2176).unwrap_err();
    assert_eq!(err.errno(), Some(17), "EEXIST: {err}");

    // Port misuse: start before configure, too many queues, queues that do not exist.
    assert!(port
        .start()
        .unwrap_err()
        .to_string()
        .contains("not configured"));
    let err = port.configure(64, 1, 256, 256, &pool).unwrap_err();
    assert!(
        err.to_string().starts_with("rte_eth_dev_configure failed"),
        "{err}"
    );
    port.configure(1, 1, 256, 256, &pool).unwrap();
    assert!(port.rx_queue(QueueId(1)).is_err());
    assert!(port.tx_queue(QueueId(3)).is_err());
    port.start().unwrap();
    assert!(port
        .configure(1, 1, 256, 256, &pool)
        .unwrap_err()
        .to_string()
        .contains("stop it first"));
    let r = common::expect_panic(|| {
        let mut b: dpdk::MbufBatch<4> = dpdk::MbufBatch::new();
        port.rx_burst(QueueId(2), &mut b)
    });
    assert!(
        r.is_err(),
        "rx_burst on an unconfigured queue panics instead of touching DPDK"
    );
    port.close().unwrap();

    // Everything still works after the refusals.
    let mut port = Port::open_by_name(&eal, "net_ring0");
    assert!(port.is_err(), "closed port stays closed");
    port = Port::attach_vdev(&eal, "net_ring1");
    let mut port = port.unwrap();
    port.configure(1, 1, 256, 256, &pool).unwrap();
    port.start().unwrap();
    let mut b: dpdk::MbufBatch<4> = dpdk::MbufBatch::new();
    b.push(common::mbuf(&pool, &common::barrier_frame(1)))
        .unwrap();
    assert_eq!(port.tx_burst(QueueId(0), &mut b), 1);
    assert_eq!(port.rx_burst(QueueId(0), &mut b), 1);
    assert_eq!(b.as_slice()[0].data(), &common::barrier_frame(1)[..]);
    drop(b);
    drop(port);
    drop(pool);

    // Dropping a pool while one of its mbufs lives leaks the pool (and keeps the EAL up)
    // instead of freeing memory under the mbuf.
    let leaky = Mempool::new_pktmbuf(&eal, "leaky", 63, 0, 2176).unwrap();
    let m = common::mbuf(&leaky, b"still mine");
    drop(leaky);
    drop(eal);
    assert!(dpdk::eal::is_initialised(), "the leaked pool holds the EAL");
    assert_eq!(m.data(), b"still mine");
    drop(m);
    // The leaked pool keeps the EAL up to the end of the process, so its cleanup (which removes
    // the runtime folder) never runs: the test removes its own (empty: --no-shconf).
    std::fs::remove_dir(std::path::Path::new("/var/run/dpdk").join(prefix)).unwrap();
}
