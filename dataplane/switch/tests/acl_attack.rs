//! Access lists under attack (issue 12, item 5): the child and parent registers of each group
//! are an access list, and frames that break it must change no group's state, be counted in
//! their class, and not stop the member groups from completing barriers.
//!
//! The bed is a real two-level tree of the library's switches on in-memory wires (the RX pollers,
//! the lock-free group table and the scheduler exactly as `barrier-switch run` assembles them),
//! every poller driven from this one thread with a simulated clock, so every count is exact:
//!
//! ```text
//!                 root  (port "down")
//!                   |
//!   mid: "up" (parent of groups 0..4)
//!        "c0", "c1" (children of groups 0..4: two emulated leaves, barrier_testbed::leafhost)
//!        "c2"       (child of group OTHER only, with c1; OTHER waits for c1 for good)
//!        "x"        (no group's child or parent: a non-member port)
//! ```
//!
//! An attacker shares the wire of each of mid's ports with its legitimate sender (frames of the
//! two interleave one by one, as on a shared link), and injects: on `x` reduces and releases of
//! member groups; on `c0` releases (a child port), reduces for OTHER (not a child of it),
//! reduces of member groups in another epoch, reduces of an unconfigured group, malformed
//! frames; on `up` reduces (the parent port is no child); and on all three ordinary IPv4 and
//! IPv6 frames carrying a barrier frame's bytes (a data flood, issue 25). The group table's
//! state of every group is compared with a control run without the attacker.

#[path = "common/acl_bed.rs"]
mod acl_bed;

use acl_bed::*;
use barrier_protocol::PortSet;
use barrier_runtime::io::BURST;
use barrier_switch::policer::PolicerSpec;
use barrier_testbed::leafhost::LeafReport;

fn assert_members_completed(r: &LeafReport, barriers: u64) {
    assert_eq!(r.early_releases, 0);
    assert_eq!(r.completed, vec![barriers; 4]);
    assert_eq!(r.releases_per_leaf, vec![barriers * 4; 2]);
}

#[test]
fn each_class_alone_changes_no_state_and_is_counted_in_its_class() {
    // The tree at rest after 20 barriers (OTHER half-way through its first), then each attack
    // frame, once per class and port, with several sequence numbers; the whole table of both
    // switches must be what it was.
    let cfg = BedConfig::small(20);
    let (r, mut bed) = run(cfg.clone(), |_, _| {});
    assert_members_completed(&r, 20);
    let mid_before = snapshot(&bed.mid.table);
    let root_before = snapshot(&bed.root.table);
    let other = mid_before[cfg.other() as usize].expect("OTHER configured");
    assert_eq!(other.arrived, PortSet::single(p(C2)), "OTHER waits for c1");
    let sent_before = bed.mid.tx_sum(|c| &c.frames_out) + bed.root.tx_sum(|c| &c.frames_out);
    for seq in [0u32, 19, 20, 21, 1 << 20] {
        for a in attacks(&cfg, seq % 4, seq) {
            assert!(bed.inject(&a));
        }
    }
    bed.flush_attacks();
    for _ in 0..10 {
        bed.pass();
    }
    assert_eq!(snapshot(&bed.mid.table), mid_before, "mid's table changed");
    assert_eq!(
        snapshot(&bed.root.table),
        root_before,
        "root's table changed"
    );
    bed.assert_counted();
    // Nothing was sent because of them.
    assert_eq!(
        bed.mid.tx_sum(|c| &c.frames_out) + bed.root.tx_sum(|c| &c.frames_out),
        sent_before
    );
    let classes: std::collections::BTreeSet<_> = bed.injected.iter().map(|e| e.1).collect();
    assert_eq!(classes.len(), 7, "{classes:?}");
}

#[test]
fn a_flood_of_every_class_changes_no_state_and_member_groups_keep_completing() {
    const BARRIERS: u64 = 300;
    // Control: no attacker.
    let cfg = BedConfig::small(BARRIERS);
    let (control, control_bed) = run(cfg.clone(), |_, _| {});
    assert_members_completed(&control, BARRIERS);
    let control_out = control_bed.mid.tx_sum(|c| &c.frames_out);
    // Flood: on every pass, a full burst of attack frames per attacked port (as fast as the RX
    // poller takes frames), the classes mixed.
    let mut set = Vec::new();
    let (flooded, bed) = run(cfg.clone(), |bed, pass| {
        if pass % 64 == 0 {
            let seq = pass as u32 / 64;
            set = attacks(&cfg, seq % 4, seq);
        }
        for port in [X, C0, UP] {
            let mine: Vec<&Attack> = set.iter().filter(|a| a.port == port).collect();
            for k in 0..BURST {
                if !bed.inject(mine[k % mine.len()]) {
                    break;
                }
            }
        }
    });
    assert_members_completed(&flooded, BARRIERS);
    bed.assert_counted();
    let injected: u64 = bed.injected.iter().map(|e| e.2).sum();
    assert!(injected > 50_000, "the flood was {injected} frames");
    // The flood changed nothing: the same table as the control run at the end, in both
    // switches (OTHER still waiting for c1, member groups released at the same barrier).
    assert_eq!(snapshot(&bed.mid.table), snapshot(&control_bed.mid.table));
    assert_eq!(snapshot(&bed.root.table), snapshot(&control_bed.root.table));
    // And no frame was sent for it: the switch sent what the control run sent.
    assert_eq!(bed.mid.tx_sum(|c| &c.frames_out), control_out);
    assert_eq!(flooded.resends, control.resends);
}

#[test]
fn a_policer_on_the_non_member_port_drops_the_flood_over_its_rate_and_counts_it() {
    const BARRIERS: u64 = 200;
    let spec = PolicerSpec {
        rate: 10_000,
        burst: 50,
    };
    let mut cfg = BedConfig::small(BARRIERS);
    cfg.policers = vec![None; NAMES.len()];
    cfg.policers[X] = Some(spec);
    // Exactly one burst of the two classes of x per pass.
    let set: Vec<Attack> = attacks(&cfg, 3, 3)
        .into_iter()
        .filter(|a| a.port == X)
        .collect();
    let mut first_ns = None;
    let mut last_ns = 0;
    let (r, bed) = run(cfg, |bed, _| {
        for k in 0..BURST {
            assert!(bed.inject(&set[k % 2]));
        }
        // The frames are polled in the coming pass, at this time.
        last_ns = bed.now + TICK_NS;
        first_ns.get_or_insert(last_ns);
    });
    assert_members_completed(&r, BARRIERS);
    let offered: u64 = bed.injected.iter().map(|e| e.2).sum();
    let policed = bed.rx(X, "drop_policed");
    let passed = bed.rx(X, "drop_not_a_child") + bed.rx(X, "drop_not_the_parent");
    assert_eq!(policed + passed, offered, "every frame counted once");
    // The bucket started full (the burst, all taken on the first pass), then earned the rate.
    let elapsed = last_ns - first_ns.unwrap();
    assert_eq!(passed, spec.burst + spec.rate * elapsed / 1_000_000_000);
    assert!(policed > offered / 2, "{policed} of {offered}");
    // The other ports have no policer: nothing policed there.
    for port in [C0, C1, C2, UP] {
        assert_eq!(bed.rx(port, "drop_policed"), 0);
    }
    // The per-port counter reaches the report, telemetry's JSON and the metrics.
    let report = bed.mid.report();
    assert!(
        report.contains("port x rx:") && report.contains(&format!("drop_policed={policed}")),
        "{report}"
    );
    let json = barrier_mgmt::telemetry::stats_json(&bed.mid);
    assert_eq!(json["ports"]["x"]["rx"]["drop_policed"], policed, "{json}");
    assert_eq!(json["ports"]["c0"]["rx"]["drop_policed"], 0, "{json}");
    let metrics = barrier_mgmt::metrics::render(&bed.mid, &Default::default(), &[]);
    for (port, n) in [("x", policed), ("c0", 0)] {
        let line = format!("barrier_frames_policed_total{{port=\"{port}\"}} {n}\n");
        assert!(metrics.contains(&line), "{line} not in\n{metrics}");
    }
    let line = format!("barrier_frames_dropped_total{{reason=\"policed\"}} {policed}\n");
    assert!(metrics.contains(&line), "{metrics}");
}

#[test]
fn a_policer_on_a_member_port_under_flood_costs_that_port_re_sends_but_never_an_early_release() {
    const BARRIERS: u64 = 3;
    let mut cfg = BedConfig::small(BARRIERS);
    // Re-send after 50 passes, so that the policed port's leaf retries often.
    cfg.leaf_timeout_ns = 50 * TICK_NS;
    cfg.policers = vec![None; NAMES.len()];
    cfg.policers[C0] = Some(PolicerSpec {
        rate: 20_000,
        burst: 64,
    });
    let set: Vec<Attack> = attacks(&cfg, 1, 5)
        .into_iter()
        .filter(|a| a.port == C0)
        .collect();
    let (r, bed) = run(cfg, |bed, pass| {
        for k in 0..BURST {
            bed.inject(&set[(pass as usize + k) % set.len()]);
        }
    });
    // The leaves' reduces on c0 compete with the flood for the port's budget: some are policed
    // and re-sent after the leaf timeout, and every barrier still completes, none early.
    assert_members_completed(&r, BARRIERS);
    assert!(bed.rx(C0, "drop_policed") > 0);
    assert!(r.resends > 0, "the policed port's leaf re-sent");
    for port in [C1, C2, UP, X] {
        assert_eq!(bed.rx(port, "drop_policed"), 0);
    }
}
