//! A `--vdev` naming a driver that does not exist fails `Eal::init` with a clear error, and
//! leaves no runtime folder behind.

use dpdk::{DpdkError, Eal};

#[test]
fn missing_vdev_driver_is_a_clear_error() {
    let args = dpdk::test_args("bad_vdev", &["--vdev=net_nosuchdriver0"]);
    let prefix = args[args.iter().position(|a| a == "--file-prefix").unwrap() + 1].clone();
    let dir = std::path::Path::new("/var/run/dpdk").join(prefix);
    let err = Eal::init(args).unwrap_err();
    assert!(!dir.exists(), "{} left by the failed init", dir.display());
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
