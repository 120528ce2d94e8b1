//! A one-switch barrier tree on real interfaces, for trying `barrier-leaf` without
//! `barrier-switch`: a root whose child port i is interface i, running the protocol's switch
//! logic (`barrier_testbed::mini_root::MiniRoot`). Runs until killed.
//!
//!   mini_root GROUP IFACE [IFACE...]

use barrier_protocol::wire::{MacAddr, ETHERTYPE};
use barrier_testbed::mini_root::MiniRoot;
use rawsock::RawSocket;
use std::sync::atomic::AtomicBool;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: mini_root GROUP IFACE [IFACE...]");
        std::process::exit(2);
    }
    let group: u32 = args[0].parse().expect("GROUP is a number");
    let socks: Vec<RawSocket> = args[1..]
        .iter()
        .map(|i| RawSocket::open(i, ETHERTYPE).unwrap_or_else(|e| panic!("{i}: {e}")))
        .collect();
    let mut root = MiniRoot::new(MacAddr(socks[0].mac()));
    root.add_group(group, &(0..socks.len() as u8).collect::<Vec<_>>());
    eprintln!("mini_root: group {group} on {}", args[1..].join(", "));
    root.serve_sockets(&socks, &AtomicBool::new(false))
        .expect("serving");
}
