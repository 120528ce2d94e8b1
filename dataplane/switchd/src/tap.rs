//! Exception paths on TAP interfaces (`[[ports]] exception = "tap"`, issue 25): what `check`
//! and `run` refuse before DPDK starts, and the TAP PMD's device argument. The TAP PMD
//! creates the interface in the switch's network namespace and removes it when the port
//! closes (or the process dies: the kernel frees a TAP whose last file is closed).

/// What `check` says about an exception path on `iface`, or why it cannot work here: no
/// `/dev/net/tun`, or an interface of that name already in this network namespace.
pub fn check_tap(iface: &str) -> Result<String, String> {
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(format!(
            "exception path {iface}: no /dev/net/tun (modprobe tun), the TAP PMD needs it"
        ));
    }
    if barrier_bpf::ifindex(iface).is_ok() {
        return Err(format!(
            "exception path {iface}: an interface {iface:?} already exists in this network \
             namespace (another switch's, or give exception_iface)"
        ));
    }
    Ok(format!(
        "exception path: frames that are not barrier frames to TAP interface {iface} (created at start)"
    ))
}

/// The TAP PMD's device argument for DPDK device `name` on interface `iface` with the port's
/// MAC `mac`, so that the kernel answers for the port's address as if it owned the NIC.
pub fn vdev(name: &str, iface: &str, mac: [u8; 6]) -> String {
    let m = mac.map(|b| format!("{b:02x}")).join(":");
    format!("{name},iface={iface},mac={m}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_argument_names_the_interface_and_the_mac() {
        assert_eq!(
            vdev("net_tap_exc1", "nb-d0", [2, 0, 0xab, 0, 0, 1]),
            "net_tap_exc1,iface=nb-d0,mac=02:00:ab:00:00:01"
        );
    }
}
