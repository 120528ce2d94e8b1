//! Shared by the tests of the `barrier-switch` program: the real binary over net_af_packet on
//! veth pairs (`afp`), the shared-link tests' helpers (`hosts`), and a small pcap reader/writer for the golden test (`pcap`).
#![allow(dead_code)]

pub mod afp;
pub mod hosts;
pub mod pcap;
