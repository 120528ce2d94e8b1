//! barrier-ctl: managing the groups of running `barrier-switch`es, and planning them.
//!
//! | module | role |
//! | --- | --- |
//! | `proto` | the control socket's requests and answers (one JSON object per line) |
//! | `client` | a blocking client of one switch's control socket |
//! | `plan` | the tree planner: a group's barrier tree over a topology file |
//! | `apply` | a plan created on every switch of its tree, leaf-most first |
//! | `tree` | a plan's group reset to a new epoch, or deleted, on every switch of its tree, root first |
//! | `group` | one group's specification (file, socket, write-back) and its one check, `resolve` |
//! | `job` | `barrierctl job`: a job's own run of a group (number free on the tree, fresh epoch), the state file |
//! | `epoch` | the epoch rules of a group's runs, shared by the switch and `tree` |
//!
//! The program is `barrierctl` (`src/main.rs`); the server side is `barrier_mgmt::control`.
#![forbid(unsafe_code)]

pub mod apply;
pub mod client;
pub mod epoch;
pub mod group;
pub mod job;
pub mod plan;
pub mod proto;
pub mod tree;
