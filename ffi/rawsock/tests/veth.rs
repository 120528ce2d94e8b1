//! Real frames over a veth pair in a throw-away network namespace (needs root; skipped, with a
//! note on stderr, otherwise).

use barrier_testbed::netns::{can_create, VethNetns};
use rawsock::RawSocket;
use std::time::Duration;

const ETHERTYPE: u16 = 0x88B5;

fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, tag: u8) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.resize(60, tag);
    f
}

#[test]
fn frames_cross_the_pair_and_only_our_ethertype_is_received() {
    if !can_create() {
        eprintln!("skipped: needs root and iproute2");
        return;
    }
    let bed = VethNetns::create().expect("netns + veth");
    let a = RawSocket::open_in_netns(&bed.netns, &bed.a, ETHERTYPE).expect("open a");
    let b = RawSocket::open_in_netns(&bed.netns, &bed.b, ETHERTYPE).expect("open b");
    let other = RawSocket::open_in_netns(&bed.netns, &bed.a, 0x88B6).expect("open a, other type");
    assert_ne!(a.mac(), [0; 6]);
    assert_ne!(a.mac(), b.mac());
    assert_eq!(a.ifname(), "veth-a0");

    // Nothing is waiting: a zero timeout returns at once.
    let mut buf = [0u8; 2048];
    assert_eq!(b.recv(&mut buf, Some(Duration::ZERO)).unwrap(), None);

    other.send(&frame([0xff; 6], a.mac(), 0x88B6, 9)).unwrap();
    a.send(&frame(b.mac(), a.mac(), ETHERTYPE, 1)).unwrap();
    a.send(&frame([0xff; 6], a.mac(), ETHERTYPE, 2)).unwrap();

    let n = b
        .recv(&mut buf, Some(Duration::from_secs(2)))
        .unwrap()
        .expect("first frame");
    assert_eq!(n, 60);
    assert_eq!(&buf[..6], &b.mac());
    assert_eq!(&buf[6..12], &a.mac());
    assert_eq!(buf[59], 1);
    let n = b
        .recv(&mut buf, Some(Duration::from_secs(2)))
        .unwrap()
        .expect("second frame");
    assert_eq!((n, buf[59]), (60, 2));
    // The 0x88B6 frame is not delivered to the 0x88B5 socket.
    assert_eq!(
        b.recv(&mut buf, Some(Duration::from_millis(50))).unwrap(),
        None
    );
    // The sender does not see its own frames looped back.
    assert_eq!(
        a.recv(&mut buf, Some(Duration::from_millis(50))).unwrap(),
        None
    );

    // A timed wait really waits, and returns a frame that arrives during it.
    let t0 = rawsock::monotonic_now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            b.send(&frame(a.mac(), b.mac(), ETHERTYPE, 3)).unwrap();
        });
        let n = a
            .recv(&mut buf, Some(Duration::from_secs(5)))
            .unwrap()
            .expect("frame during wait");
        assert_eq!((n, buf[59]), (60, 3));
    });
    assert!(rawsock::monotonic_now() - t0 >= Duration::from_millis(20));
}
