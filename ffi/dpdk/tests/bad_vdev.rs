//! A `--vdev` naming a driver that does not exist fails `Eal::init` with a clear error.

use dpdk::{DpdkError, Eal};

#[test]
fn missing_vdev_driver_is_a_clear_error() {
    let err = Eal::init(dpdk::test_args("bad_vdev", &["--vdev=net_nosuchdriver0"])).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("rte_eal_init failed: "), "{text}");
    assert!(
        matches!(
            err,
            DpdkError::Call {
                op: "rte_eal_init",
                errno: 19,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(text.contains("No such device"), "{text}");
}
