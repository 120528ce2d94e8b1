//! An unknown EAL flag makes `Eal::init` fail with DPDK's reason, and the process refuses any
//! later init clearly (a failed rte_eal_init can leave state behind, hence its own process).

use dpdk::{DpdkError, Eal};

#[test]
fn unknown_eal_flag_is_a_clear_error() {
    let err = Eal::init(dpdk::test_args("bad_flag", &["--no-such-eal-flag"])).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("rte_eal_init failed: "), "{text}");
    assert!(
        matches!(
            err,
            DpdkError::Call {
                op: "rte_eal_init",
                errno: 22,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(!dpdk::eal::is_initialised());

    let again = Eal::init(dpdk::test_args("bad_flag", &[])).unwrap_err();
    assert_eq!(again, DpdkError::EalAlreadyInitialized);

    // Nothing reaches DPDK for an empty or NUL-bearing argument list.
    assert!(Eal::init(Vec::<String>::new())
        .unwrap_err()
        .to_string()
        .contains("program name"));
    assert!(Eal::init(vec!["p".to_string(), "a\0b".to_string()]).is_err());
}
