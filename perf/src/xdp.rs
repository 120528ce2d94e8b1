//! `barrier-perf xdp` (issue 24): the XDP switch's frames/s on one CPU against an XDP reflector
//! (swap MACs, `XDP_TX`), both on the same veth pair, alternated; and the group slot's size.
//!
//! Load: `BPF_PROG_RUN` in live-frames mode (`barrier_bpf::Program::run_xdp_live`, what
//! xdp-trafficgen does). The kernel runs the program under test on frames in its page pool as
//! if they arrived on `veth-a0`, in batches, on the calling thread's CPU (pinned), and
//! transmits what it sends (`XDP_TX`, the switch's broadcast redirect over its children's
//! devmap) out of `veth-a0`; the far end `veth-b0` runs `nb_leaf`, which rewrites every frame
//! it receives into the leaves' next reduce and drops it. A page's bytes are copied from the
//! input only on the page's first use in a run (net/bpf/test_run.c, `xdp_test_run_init_page`:
//! a recycled page keeps its bytes, only the data pointers are reset), so the next repetition
//! on that page sees the reduce `nb_leaf` wrote: a reduce of group `c mod G`, barrier
//! `c / G`. The switch holds `G` root groups with one child (`veth-a0`), so every such reduce
//! completes its group's barrier and the release goes out to the child: the completion path.
//! The switch's counters, read around each run, say which path the frames took.
//!
//! No traffic generator sits between: there is no copy from userspace per frame and no second
//! CPU, so frames/s = repetitions / elapsed is the programs' per-core cost plus what both pay
//! alike (page recycling, the veth transmit, `nb_leaf` on the far end, which runs in the same
//! CPU's softirq).
//!
//! The switch is loaded as the daemon loads it (`XdpSwitch::load`: no `nb_last` record).
//! `NB_XDP_RECORD_LAST=1` in the environment loads it with the tests' record instead
//! (`LoadOptions::RECORDING`: one more per-CPU map write per frame, the program as it was before
//! the record became opt-in), for a before/after comparison in one sitting (perf/README.md,
//! step 3d); `xdp.json` says which (`switch_records_last_decision`).
//!
//! Then, on the same veth pair, barrier-switch (DPDK) with its port on `veth-a0` through
//! `net_af_packet`, one lcore spinning on the same CPU, the same groups (`dpdk_af_packet` in
//! `xdp.json`, when `barrier-switch` is beside this program, as `perf/run.sh` builds it). Its
//! load cannot be live frames (they would not reach its packet socket in a loop), so it is a
//! closed loop: `nb_kick` (live frames on `veth-b0`) sends one reduce per group, `nb_pong` on
//! `veth-b0` turns each release into the group's next reduce and sends it back. frames/s =
//! releases `nb_pong` counted / wall time; every one is a completion at the switch. Not
//! alternated with the reflector: its ratio is to the reflector's median of the runs before.

use barrier_bpf::{Object, XdpMode};
use barrier_protocol::switch::GroupConfig;
use barrier_protocol::wire::{Flags, FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, PortIdx, PortSet, Seq};
use barrier_testbed::netns::VethNetns;
use barrier_testbed::switch_process::counter;
use barrier_xdp::{
    LoadOptions, XdpSwitch, GROUP_COUNTS_BYTES, GROUP_SLOT_BYTES, GROUP_STATE_BYTES, KICK_PROGRAM,
    LEAF_PROGRAM, PONG_PROGRAM, REFLECTOR_OBJECT, REFLECTOR_PROGRAM,
};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Instant;

const SWITCH_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xaa]);
const LEAF_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x11]);

/// What `barrier-perf xdp` is asked for.
pub struct XdpArgs {
    /// Seconds per timed run (each program, each repetition).
    pub secs: f64,
    /// Repetitions, the two programs alternating (ABBA).
    pub reps: usize,
    /// Groups = 2^shift.
    pub groups_shift: u32,
    /// Frames per batch of `BPF_PROG_RUN` (the kernel's default is 64, NAPI's budget).
    pub batch: u32,
    /// The CPU the measuring thread is pinned to.
    pub cpu: usize,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The switch counters that say which path the frames took.
const PATH_COUNTERS: [&str; 12] = [
    "frames",
    "reduce_in",
    "completions",
    "recorded",
    "duplicates",
    "stale_reduce",
    "ahead_reduce",
    "drop_not_a_child",
    "drop_bad_checksum",
    "drop_unknown_group",
    "drop_other_epoch",
    "tx_failed",
];

fn path_counts(sw: &XdpSwitch) -> Result<Vec<u64>, String> {
    let c = sw.counters().map_err(|e| e.to_string())?;
    Ok(PATH_COUNTERS
        .iter()
        .map(|n| c.get(n).unwrap_or(0))
        .collect())
}

/// Runs the measurement in a throw-away namespace; the JSON of `xdp.json`.
pub fn xdp(a: &XdpArgs) -> Result<Value, String> {
    let bed = VethNetns::with_pairs(1).map_err(|e| format!("namespace with a veth pair: {e}"))?;
    let netns = bed.netns.clone();
    let (a_if, b_if) = (bed.a.clone(), bed.b.clone());
    let mut v = barrier_bpf::in_netns(&netns, || measure(a, &a_if, &b_if))
        .map_err(|e| format!("enter {netns}: {e}"))??;
    let reflector = v["reflector_fps"].as_f64().unwrap_or(0.0);
    v["dpdk_af_packet"] = match dpdk_af_packet(a, &bed, reflector) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("barrier-perf xdp: barrier-switch on net_af_packet: {e}");
            json!({"error": e})
        }
    };
    drop(bed);
    Ok(v)
}

/// barrier-switch on `net_af_packet` on the bed's veth pair (module docs): its frames/s and
/// their ratio to `reflector_fps`.
fn dpdk_af_packet(a: &XdpArgs, bed: &VethNetns, reflector_fps: f64) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let binary = exe.with_file_name("barrier-switch");
    if !binary.exists() {
        return Ok(json!({"skipped": format!("{} not built", binary.display())}));
    }
    let groups = 1u32 << a.groups_shift;
    let epoch = GroupConfig::root(PortSet::single(PortIdx::new(0).expect("port 0"))).epoch;
    let prefix = format!("nb-perf-xdp-{}", std::process::id());
    let config = std::env::temp_dir().join(format!("{prefix}.toml"));
    let text = format!(
        r#"[eal]
args = ["--lcores", "0@{cpu}", "--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "{prefix}", "--no-pci", "--iova-mode=va", "--no-telemetry", "--log-level=*:warning"]

[[ports]]
name = "c0"
vdev = "net_af_packet0,iface={iface},qdisc_bypass=0"

[lcores]
scheduler = 0
shared = true
rx = [ {{ lcore = 0, poll = ["c0"] }} ]

[[groups]]
numbers = "0..{groups}"
role = "root"
children = ["c0"]
epoch = {epoch}
"#,
        cpu = a.cpu,
        iface = bed.a,
        epoch = epoch.0,
    );
    std::fs::write(&config, text).map_err(|e| format!("write {}: {e}", config.display()))?;
    let started = Switch::start(bed, &binary, &config, &prefix);
    let _ = std::fs::remove_file(&config);
    let mut sw = started?;
    let (a_if, b_if) = (bed.a.clone(), bed.b.clone());
    let runs = barrier_bpf::in_netns(&bed.netns, || -> Result<Vec<(f64, u64)>, String> {
        let a_idx = barrier_bpf::ifindex(&a_if).map_err(|e| e.to_string())?;
        let b_idx = barrier_bpf::ifindex(&b_if).map_err(|e| e.to_string())?;
        // veth-a0 needs an XDP receive path for nb_pong's XDP_TX to reach it (then the
        // kernel, then the packet socket): the pass program.
        let pass = XdpSwitch::load(1).map_err(|e| e.to_string())?;
        let _pass = pass.attach_pass(a_idx).map_err(|e| e.to_string())?;
        let mut obj =
            Object::open(REFLECTOR_OBJECT, "barrier_xdp_pong").map_err(|e| e.to_string())?;
        obj.load().map_err(|e| format!("load the pong: {e}"))?;
        let mut leaf_cfg = [0u8; 16];
        leaf_cfg[..4].copy_from_slice(&a.groups_shift.to_ne_bytes());
        leaf_cfg[4..8].copy_from_slice(&epoch.0.to_ne_bytes());
        leaf_cfg[8..14].copy_from_slice(&LEAF_MAC.0);
        obj.map("nb_leaf_cfg")
            .and_then(|m| m.update(&0u32.to_ne_bytes(), &leaf_cfg, barrier_bpf::flags::ANY))
            .map_err(|e| e.to_string())?;
        let pong = obj.program(PONG_PROGRAM).map_err(|e| e.to_string())?;
        let _pong = pong
            .attach_xdp(b_idx, XdpMode::Native)
            .map_err(|e| format!("attach nb_pong to {b_if}: {e}"))?;
        let pongs = obj.map("nb_pong_count").map_err(|e| e.to_string())?;
        let count = || -> Result<u64, String> {
            Ok(pongs
                .lookup_percpu(&0u32.to_ne_bytes())
                .map_err(|e| e.to_string())?
                .unwrap_or_default()
                .iter()
                .map(|b| u64::from_ne_bytes(b[..8].try_into().expect("8 bytes")))
                .sum())
        };
        // One reduce of barrier 0 per group, sent out of veth-b0 toward the switch.
        let kick = obj.program(KICK_PROGRAM).map_err(|e| e.to_string())?;
        let frame = [0u8; FRAME_LEN];
        kick.run_xdp_live(&frame, b_idx, groups, a.batch.min(groups))
            .map_err(|e| format!("kick: {e}"))?;
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut runs = Vec::new();
        for _ in 0..a.reps {
            let (c0, t) = (count()?, Instant::now());
            std::thread::sleep(std::time::Duration::from_secs_f64(a.secs));
            let (c1, secs) = (count()?, t.elapsed().as_secs_f64());
            runs.push(((c1 - c0) as f64 / secs, c1 - c0));
        }
        Ok(runs)
    })
    .map_err(|e| format!("enter {}: {e}", bed.netns))??;
    let (status, report) = sw.stop()?;
    let completions = counter(&report, "rx total:", "completions");
    let mut fps: Vec<f64> = runs.iter().map(|r| r.0).collect();
    let range = json!([
        fps.iter().copied().fold(f64::INFINITY, f64::min),
        fps.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    ]);
    let med = median(&mut fps);
    eprintln!(
        "barrier-perf xdp: barrier-switch on net_af_packet {:.2} Mfps (median of {}), {:.3} of the reflector",
        med / 1e6,
        runs.len(),
        med / reflector_fps.max(1.0)
    );
    if med == 0.0 {
        return Err(format!(
            "no release came back ({status}); the switch's report:\n{report}"
        ));
    }
    Ok(json!({
        "device": "the same veth pair: barrier-switch's port c0 is net_af_packet on veth-a0 (qdisc_bypass=0; nb_pass on veth-a0 for XDP_TX into it), nb_pong on veth-b0",
        "load": "closed loop: nb_kick sends one reduce of barrier 0 per group (BPF_PROG_RUN live frames on veth-b0), nb_pong turns each release into the group's next reduce (XDP_TX); frames/s = releases counted by nb_pong / wall time",
        "switch_config": "root groups with one child (c0), one lcore (reduced mode: RX and scheduler) spinning, pinned to the CPU of the XDP runs",
        "cpu": a.cpu,
        "groups": groups,
        "runs_fps": runs.iter().map(|r| r.0).collect::<Vec<_>>(),
        "fps": med,
        "fps_range": range,
        "ratio_to_reflector": med / reflector_fps.max(1.0),
        "switch_completions": completions,
        "switch_exit": status.to_string(),
    }))
}

fn measure(a: &XdpArgs, a_if: &str, b_if: &str) -> Result<Value, String> {
    let pinned = barrier_runtime::affinity::pin_current(a.cpu);
    let groups = 1u32 << a.groups_shift;
    let a_idx = barrier_bpf::ifindex(a_if).map_err(|e| e.to_string())?;
    let b_idx = barrier_bpf::ifindex(b_if).map_err(|e| e.to_string())?;

    // The switch: G root groups, one child each: veth-a0 (port 0).
    let record = std::env::var("NB_XDP_RECORD_LAST").is_ok_and(|v| v == "1");
    let opts = LoadOptions {
        record_last_decision: record,
    };
    let mut sw = XdpSwitch::load_object(barrier_xdp::SWITCH_OBJECT, groups, opts)
        .map_err(|e| format!("load the XDP switch: {e}"))?;
    sw.set_switch_mac(SWITCH_MAC).map_err(|e| e.to_string())?;
    let port = PortIdx::new(0).expect("port 0");
    sw.add_port(port, a_idx).map_err(|e| e.to_string())?;
    let cfg = GroupConfig::root(PortSet::single(port));
    for g in 0..groups {
        sw.configure(GroupId(g), &cfg)
            .map_err(|e| format!("configure group {g}: {e}"))?;
    }

    // The reflector and the leaves (nb_leaf on the far end).
    let mut obj =
        Object::open(REFLECTOR_OBJECT, "barrier_xdp_reflector").map_err(|e| e.to_string())?;
    obj.load().map_err(|e| format!("load the reflector: {e}"))?;
    let mut leaf_cfg = [0u8; 16];
    leaf_cfg[..4].copy_from_slice(&a.groups_shift.to_ne_bytes());
    leaf_cfg[4..8].copy_from_slice(&cfg.epoch.0.to_ne_bytes());
    leaf_cfg[8..14].copy_from_slice(&LEAF_MAC.0);
    obj.map("nb_leaf_cfg")
        .and_then(|m| m.update(&0u32.to_ne_bytes(), &leaf_cfg, barrier_bpf::flags::ANY))
        .map_err(|e| e.to_string())?;
    let leaf = obj.program(LEAF_PROGRAM).map_err(|e| e.to_string())?;
    let _leaf_attached = leaf
        .attach_xdp(b_idx, XdpMode::Native)
        .map_err(|e| format!("attach nb_leaf to {b_if}: {e}"))?;
    let refl = obj.program(REFLECTOR_PROGRAM).map_err(|e| e.to_string())?;
    let swp = sw.program().map_err(|e| e.to_string())?;
    let count_map = obj.map("nb_leaf_count").map_err(|e| e.to_string())?;
    let cpus = barrier_bpf::possible_cpus().map_err(|e| e.to_string())?;

    // The input a page holds on its first use in a run: group 0's reduce of barrier 0.
    let mut frame = [0u8; FRAME_LEN];
    FrameRepr {
        dst: MacAddr::BROADCAST,
        src: LEAF_MAC,
        kind: Kind::Reduce,
        flags: Flags::empty(),
        group: GroupId(0),
        epoch: cfg.epoch,
        seq: Seq(0),
        tx_timestamp: None,
    }
    .emit(&mut frame);

    // The leaves' count, kept for the switch's runs only: the reflector's runs move it too,
    // and the switch's groups must see the barrier after the one they completed.
    let zero = vec![0u8; 8 * cpus];
    let read_count = || -> Result<Vec<u8>, String> {
        Ok(count_map
            .lookup_percpu(&0u32.to_ne_bytes())
            .map_err(|e| e.to_string())?
            .unwrap_or_default()
            .concat())
    };
    let write_count = |v: &[u8]| -> Result<(), String> {
        count_map
            .update_percpu(&0u32.to_ne_bytes(), v)
            .map_err(|e| e.to_string())
    };

    struct RunOut {
        frames: u32,
        secs: f64,
        kernel_ns: u32,
    }
    let run = |which: &barrier_bpf::Program<'_>, repeat: u32| -> Result<RunOut, String> {
        let t = Instant::now();
        let ns = which
            .run_xdp_live(&frame, a_idx, repeat, a.batch)
            .map_err(|e| e.to_string())?;
        Ok(RunOut {
            frames: repeat,
            secs: t.elapsed().as_secs_f64(),
            kernel_ns: ns,
        })
    };

    // Calibration: frames per second of each, for runs of about `secs`.
    write_count(&zero)?;
    let cal_s = run(&swp, 200_000)?;
    let mut switch_count = read_count()?;
    let cal_r = run(&refl, 200_000)?;
    let repeat_for =
        |c: &RunOut| -> u32 { ((c.frames as f64 / c.secs) * a.secs).clamp(100_000.0, 2e9) as u32 };
    let (rep_s, rep_r) = (repeat_for(&cal_s), repeat_for(&cal_r));
    eprintln!(
        "barrier-perf xdp: calibration: switch {:.2} Mfps, reflector {:.2} Mfps; runs of {} and {} frames",
        cal_s.frames as f64 / cal_s.secs / 1e6,
        cal_r.frames as f64 / cal_r.secs / 1e6,
        rep_s,
        rep_r
    );

    let mut reps = Vec::new();
    let before_all = path_counts(&sw)?;
    for i in 0..a.reps {
        // ABBA: the reflector first on even repetitions, the switch first on odd ones.
        let order: [bool; 2] = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut r_out = None;
        let mut s_out = None;
        let mut s_path = Vec::new();
        for is_switch in order {
            if is_switch {
                write_count(&switch_count)?;
                let c0 = path_counts(&sw)?;
                let o = run(&swp, rep_s)?;
                let c1 = path_counts(&sw)?;
                switch_count = read_count()?;
                s_path = c0.iter().zip(&c1).map(|(x, y)| y - x).collect();
                s_out = Some(o);
            } else {
                r_out = Some(run(&refl, rep_r)?);
            }
        }
        let (r, s) = (r_out.expect("ran"), s_out.expect("ran"));
        let (rf, sf) = (r.frames as f64 / r.secs, s.frames as f64 / s.secs);
        eprintln!(
            "  rep {i}: reflector {:.2} Mfps ({} ns/frame in the kernel), switch {:.2} Mfps ({} ns), ratio {:.3}; switch completions {} of {} frames",
            rf / 1e6,
            r.kernel_ns,
            sf / 1e6,
            s.kernel_ns,
            sf / rf,
            s_path[2],
            s_path[0]
        );
        let path: serde_json::Map<String, Value> = PATH_COUNTERS
            .iter()
            .zip(&s_path)
            .map(|(n, v)| (n.to_string(), json!(v)))
            .collect();
        reps.push(json!({
            "reflector": {"frames": r.frames, "secs": r.secs, "fps": rf, "kernel_ns_per_frame": r.kernel_ns},
            "switch": {"frames": s.frames, "secs": s.secs, "fps": sf, "kernel_ns_per_frame": s.kernel_ns, "counters": path},
            "ratio": sf / rf,
        }));
    }
    let after_all = path_counts(&sw)?;
    let total: Vec<u64> = before_all
        .iter()
        .zip(&after_all)
        .map(|(x, y)| y - x)
        .collect();
    let f = |k: &str| {
        reps.iter()
            .map(|r| r[k].as_f64().unwrap_or(0.0))
            .collect::<Vec<_>>()
    };
    let g = |p: &str, k: &str| {
        reps.iter()
            .map(|r| r[p][k].as_f64().unwrap_or(0.0))
            .collect::<Vec<_>>()
    };
    let (mut rf, mut sf, mut ratios) = (g("reflector", "fps"), g("switch", "fps"), f("ratio"));
    let (rk, sk) = (
        median(&mut g("reflector", "kernel_ns_per_frame")),
        median(&mut g("switch", "kernel_ns_per_frame")),
    );
    let spread = |v: &[f64]| -> Value {
        json!([
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        ])
    };
    let (rf_sp, sf_sp, ra_sp) = (spread(&rf), spread(&sf), spread(&ratios));
    let (rfm, sfm, ram) = (median(&mut rf), median(&mut sf), median(&mut ratios));
    let totals: serde_json::Map<String, Value> = PATH_COUNTERS
        .iter()
        .zip(&total)
        .map(|(n, v)| (n.to_string(), json!(v)))
        .collect();
    let frames = total[0].max(1) as f64;
    let info = |p: &barrier_bpf::Program<'_>| -> Value {
        p.info().map_or(Value::Null, |i| {
            json!({"verified_insns": i.verified_insns, "xlated_bytes": i.xlated_len, "jited_bytes": i.jited_len})
        })
    };
    Ok(json!({
        "device": "one veth pair in a throw-away network namespace: veth-a0 (the programs' ingress and egress), veth-b0 (nb_leaf, native XDP)",
        "load": "BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: the kernel runs the program on frames of its page pool as arriving on veth-a0 and transmits what it sends; one CPU",
        "cpu": a.cpu,
        "pinned": pinned,
        "batch_size": a.batch,
        "groups": groups,
        "switch_records_last_decision": record,
        "switch_config": "root groups with one child (veth-a0), fail_after 0 (no deadline armed)",
        "path": "every repeated frame is a reduce that nb_leaf wrote: group c mod G, barrier c / G; at the switch, a completion and the release broadcast over the children's devmap (one port)",
        "reps": reps,
        "reflector_fps": rfm,
        "switch_fps": sfm,
        "reflector_fps_range": rf_sp,
        "switch_fps_range": sf_sp,
        "ratio": ram,
        "ratio_range": ra_sp,
        "ratio_of_medians": sfm / rfm,
        "reflector_kernel_ns_per_frame": rk,
        "switch_kernel_ns_per_frame": sk,
        "switch_counters": totals,
        "completions_per_frame": total[2] as f64 / frames,
        "programs": {"switch": info(&swp), "reflector": info(&refl), "leaf": info(&leaf)},
        "state_bytes_per_group": GROUP_STATE_BYTES,
        "slot_bytes_per_group": GROUP_SLOT_BYTES,
        "counts_bytes_per_group": GROUP_COUNTS_BYTES,
        "map_bytes_at_2_20_groups": (GROUP_SLOT_BYTES + GROUP_COUNTS_BYTES) << 20,
    }))
}

/// `barrier-switch run` in the bed's namespace; killed (and EAL's runtime folder removed) when
/// dropped unless stopped.
struct Switch {
    child: Option<Child>,
    prefix: String,
}

impl Switch {
    /// Starts it and waits up to 30 s for its ready line.
    fn start(
        bed: &VethNetns,
        binary: &std::path::Path,
        config: &std::path::Path,
        prefix: &str,
    ) -> Result<Switch, String> {
        let mut child = bed
            .command(&binary.to_string_lossy())
            .args(["run", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("start {}: {e}", binary.display()))?;
        let err = child.stderr.take().expect("piped stderr");
        let sw = Switch {
            child: Some(child),
            prefix: prefix.to_string(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) if l.starts_with("barrier-switch: ready") => return Ok(sw),
                Ok(l) => seen.push(l),
                Err(_) => {
                    return Err(format!(
                        "barrier-switch not ready within 30 s; its stderr:\n{}",
                        seen.join("\n")
                    ))
                }
            }
        }
    }

    /// SIGTERM, then its exit status and stdout (its counters).
    fn stop(&mut self) -> Result<(std::process::ExitStatus, String), String> {
        let pid = self.child.as_ref().expect("running").id().to_string();
        // On an error here the child stays in self: Drop kills and waits for it.
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .map_err(|e| format!("kill -TERM {pid}: {e}"))?;
        let child = self.child.take().expect("running");
        let out = child
            .wait_with_output()
            .map_err(|e| format!("wait for barrier-switch: {e}"))?;
        Ok((
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ))
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(std::path::Path::new("/var/run/dpdk").join(&self.prefix));
    }
}
