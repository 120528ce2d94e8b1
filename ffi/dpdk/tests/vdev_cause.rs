//! A virtual device whose driver cannot create it (net_af_packet on an interface that does not
//! exist): EAL starts without it, and the error for the missing port carries the cause
//! ("No such device" for the interface), not only "no port named". The runtime folder EAL made
//! is gone once the EAL is dropped.

use dpdk::{Eal, Port};
use std::path::Path;

#[test]
fn a_missing_interface_is_named_with_its_os_error() {
    let args = dpdk::test_args("vdev_cause", &["--vdev=net_af_packet0,iface=nbnosuchif0"]);
    let prefix = args[args.iter().position(|a| a == "--file-prefix").unwrap() + 1].clone();
    let (eal, _) = Eal::init(args).expect("EAL starts without the device it could not create");
    let err = Port::id_by_name(&eal, "net_af_packet0")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no port named \"net_af_packet0\""), "{err}");
    assert!(
        err.contains("--vdev \"net_af_packet0,iface=nbnosuchif0\""),
        "{err}"
    );
    assert!(
        err.contains("interface \"nbnosuchif0\": No such device"),
        "{err}"
    );
    // attaching it at run time says the same
    let err = Port::attach_vdev(&eal, "net_af_packet1,iface=nbnosuchif1")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("interface \"nbnosuchif1\": No such device"),
        "{err}"
    );
    // a device that is not a vdev at all keeps the short message
    let err = Port::id_by_name(&eal, "net_ring7").unwrap_err().to_string();
    assert!(
        err.contains("no port named \"net_ring7\"") && !err.contains("--vdev"),
        "{err}"
    );

    let dir = Path::new("/var/run/dpdk").join(&prefix);
    assert!(dir.is_dir(), "EAL made {}", dir.display());
    drop(eal);
    assert!(!dir.exists(), "{} left after cleanup", dir.display());
}
