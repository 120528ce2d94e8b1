//! Spreading by group over RX queues (issue 13; docs/configuration.md, "Spreading frames over
//! RX queues"): barrier-gen sends on two TX queues per port, each frame on queue
//! `group % 2`; the in-process switch polls both RX queues of every port (one RX poller each).
//! Every barrier completes, and each queue carried exactly the frames of its groups.

mod common;

fn queue_frames(report: &str, queue: usize) -> Vec<u64> {
    report
        .lines()
        .filter(|l| l.contains(&format!(" rx queue {queue}:")))
        .map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("frames="))
                .unwrap_or_else(|| panic!("no frames= in {l:?}"))
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn two_queues_carry_their_groups_and_every_barrier_completes() {
    let (groups, count, ports) = (64u64, 40u64, 2usize);
    let out = common::gen(
        None,
        &common::eal("queues", "0"),
        &[
            "--inproc-switch",
            "--ports",
            "2",
            "--queues",
            "2",
            "--groups",
            "64",
            "--count",
            "40",
            "--duration",
            "120",
            "--resend-timeout-us",
            "2000000",
            "--deadline-ms",
            "60000",
            "--json",
            "--quiet",
        ],
    );
    let text = common::stdout(&out);
    assert!(out.status.success(), "exit {:?}\n{text}", out.status);
    let v: serde_json::Value = serde_json::from_str(&text).expect("stdout is one JSON document");
    assert_eq!(v["config"]["queues"].as_u64(), Some(2));
    let b = &v["report"]["barriers"];
    assert_eq!(b["completed"].as_u64(), Some(groups * count), "{text}");
    assert_eq!(b["early_releases"].as_u64(), Some(0));
    let sw = v["switch"]
        .as_str()
        .expect("the in-process switch's report");
    let resends = v["report"]["frames"]["tx_resend"].as_u64().unwrap();
    for q in 0..2 {
        let frames = queue_frames(sw, q);
        assert_eq!(frames.len(), ports, "a line per port for queue {q}:\n{sw}");
        // Half the groups (g % 2 == q), one reduce per barrier, plus any re-sends.
        let share = groups / 2 * count;
        for f in frames {
            if resends == 0 {
                assert_eq!(f, share, "queue {q}:\n{sw}");
            } else {
                assert!(
                    (share..=share + resends).contains(&f),
                    "queue {q}: {f}\n{sw}"
                );
            }
        }
    }
}

#[test]
fn a_queue_count_out_of_range_is_refused() {
    for q in ["0", "17"] {
        let out = common::gen(
            None,
            &common::eal("queues-bad", "0"),
            &["--inproc-switch", "--queues", q, "--count", "1"],
        );
        assert_eq!(out.status.code(), Some(2), "--queues {q}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--queues"), "{err}");
    }
}
