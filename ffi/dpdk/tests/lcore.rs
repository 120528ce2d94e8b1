//! Closures on worker lcores: one runs on the lcore asked for and returns its value; a
//! panicking one is reported as an error while the process and the lcore carry on. Also
//! registration of non-EAL threads and the TSC helpers.

mod common;

use dpdk::{current_lcore, launch_on, LcoreError, LcoreId, Mbuf, Mempool, ThreadRegistration};

#[test]
fn lcores() {
    let eal = common::eal("lcore", &["-l", "0,1"]);
    assert_eq!(eal.main_lcore(), LcoreId(0));
    assert_eq!(current_lcore(), Some(LcoreId(0)));
    assert_eq!(eal.lcore_count(), 2);
    let workers = eal.worker_lcores();
    assert_eq!(workers, vec![LcoreId(1)]);

    // `-l 0,1`: lcore N runs on CPU N; an lcore that is not enabled has none. The CPUs at
    // start-up are the process's, taken before EAL pinned this thread (at least one).
    assert_eq!(eal.lcore_cpus(LcoreId(0)), [0]);
    assert_eq!(eal.lcore_cpus(LcoreId(1)), [1]);
    assert!(eal.lcore_cpus(LcoreId(5)).is_empty());
    assert!(eal.lcore_cpus(LcoreId(u32::MAX)).is_empty());
    assert!(!eal.startup_cpus().is_empty());

    // The closure runs on lcore 1 and its value comes back.
    let job = eal
        .launch_on(LcoreId(1), || (current_lcore(), 6 * 7))
        .unwrap();
    assert_eq!(job.lcore(), LcoreId(1));
    assert_eq!(job.join().unwrap(), (Some(LcoreId(1)), 42));

    // A busy lcore refuses a second launch with EBUSY, and the first one still completes.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let blocked = launch_on(&eal, LcoreId(1), move || rx.recv().is_ok()).unwrap();
    let busy = launch_on(&eal, LcoreId(1), || 0).unwrap_err();
    assert_eq!(busy.errno(), Some(16), "{busy}");
    assert!(!blocked.is_finished());
    tx.send(()).unwrap();
    assert!(blocked.join().unwrap());

    // A panic is an error on join, not a crash; the lcore is usable afterwards.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // keep the expected panic out of the test output
    let bad = launch_on(&eal, LcoreId(1), || -> u32 {
        panic!("deliberate failure {}", 7)
    })
    .unwrap();
    let err = bad.join().unwrap_err();
    std::panic::set_hook(hook);
    let LcoreError::Panicked { lcore, message } = &err;
    assert_eq!(*lcore, LcoreId(1));
    assert_eq!(message, "deliberate failure 7");
    assert!(err.to_string().contains("lcore1 panicked"), "{err}");
    assert_eq!(
        launch_on(&eal, LcoreId(1), || "again")
            .unwrap()
            .join()
            .unwrap(),
        "again"
    );

    // Lcores that are not workers are refused before reaching DPDK.
    assert!(launch_on(&eal, LcoreId(0), || ())
        .unwrap_err()
        .to_string()
        .contains("main lcore"));
    assert!(launch_on(&eal, LcoreId(5), || ())
        .unwrap_err()
        .to_string()
        .contains("not an enabled lcore"));
    assert!(launch_on(&eal, LcoreId(100_000), || ()).is_err());

    // Mbufs move between lcores (Mbuf: Send) and are freed on the worker.
    let pool =
        Mempool::new_pktmbuf(&eal, "lcore_pool", 255, 0, dpdk::MBUF_DEFAULT_BUF_SIZE).unwrap();
    let m = Mbuf::from_slice(&pool, b"to the worker").unwrap();
    let len = launch_on(&eal, LcoreId(1), move || m.data().len())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(len, 13);
    assert_eq!(pool.in_use_count(), 0);

    // A plain thread is not an lcore until it registers, and loses the id when it unregisters.
    let eal2 = eal.clone();
    std::thread::spawn(move || {
        assert_eq!(current_lcore(), None);
        let reg = ThreadRegistration::new(&eal2).unwrap();
        let id = reg.lcore();
        assert_eq!(current_lcore(), Some(id));
        assert!(
            id.0 >= 2,
            "registered threads get a free lcore id, got {id:?}"
        );
        assert!(
            ThreadRegistration::new(&eal2).is_err(),
            "double registration"
        );
        drop(reg);
        assert_eq!(current_lcore(), None);
    })
    .join()
    .unwrap();

    // TSC: EAL measured a frequency and the counter moves forward.
    let hz = dpdk::tsc_hz();
    assert!(hz > 1_000_000, "tsc_hz {hz}");
    let a = dpdk::tsc();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let b = dpdk::tsc();
    assert!(b > a && b - a >= hz / 1000, "tsc {a} -> {b} at {hz} Hz");

    // The pool keeps the EAL up after the last Eal handle goes; cleanup follows the pool.
    drop(eal);
    assert!(dpdk::eal::is_initialised());
    assert_eq!(pool.avail_count(), 255);
    drop(pool);
    assert!(
        !dpdk::eal::is_initialised(),
        "rte_eal_cleanup ran with the last handle"
    );
}
