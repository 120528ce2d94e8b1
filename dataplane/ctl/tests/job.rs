//! `barrierctl job` end to end: the three switches of `tests/tree.rs` in process (a root and
//! two intermediates, four leaves played by this test; `tests/common`), and the `barrierctl`
//! program wrapping commands. A job gets a
//! number of its range that no switch of the tree has, in an epoch no earlier run of the
//! number used (also after every switch restarted, which makes the switches forget: the
//! reused-number case, kept by the state file), its command sees NETBARRIER_GROUP/EPOCH/IFACE
//! and its barriers complete in that epoch; whatever way the command ends (exit status,
//! signal forwarded from barrierctl, a command that cannot run) the group is deleted from
//! every switch and barrierctl returns the command's status; a barrierctl killed with SIGKILL
//! leaves a run that `--cleanup` removes; `--start`/`--stop ID` are the halves a Slurm prolog
//! and epilog call; two starts at once take two numbers; a stop that cannot reach a switch keeps
//! the run.

mod common;

use common::*;
use std::collections::HashMap;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A job's files: the topology, the state file and a scratch folder, outside the switches'
/// (they restart; these stay).
struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("topo.toml"), TOPOLOGY).unwrap();
        Site { dir }
    }
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }
    /// `barrierctl job` with the site's flags, then `extra` (a mode, or `--` and a command).
    fn job_args(&self, t: &Tree, groups: &str, extra: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = [
            "job",
            "--topology",
            &self.path("topo.toml"),
            "--members",
            "h1,h2,h3,h4",
            "--sockets",
            &t.all_sockets(),
            "--groups",
            groups,
            "--iface",
            "eth0,eth1",
            "--state",
            &self.path("state.json"),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    }
    fn spawn(&self, t: &Tree, groups: &str, cmd: &[&str]) -> Child {
        let mut args = self.job_args(t, groups, &["--"]);
        args.extend(cmd.iter().map(|s| s.to_string()));
        Command::new(env!("CARGO_BIN_EXE_barrierctl"))
            .args(&args)
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap()
    }
    fn state(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(self.path("state.json")).unwrap()).unwrap()
    }
}

/// Waits for a file the command of `child` writes, returns its text.
fn wait_file(path: &str, child: &mut Child) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(s) = std::fs::read_to_string(path) {
            if s.ends_with('\n') {
                return s;
            }
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("barrierctl job ended ({st}) before its command wrote {path}");
        }
        assert!(Instant::now() < deadline, "{path} not written");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(Instant::now() < deadline, "barrierctl job did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A command that writes its environment to `env`, waits for `go` and exits with `code`.
fn waiting_command(site: &Site, code: u32) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo \"$NETBARRIER_GROUP $NETBARRIER_EPOCH $NETBARRIER_IFACE $$\" > {env}.tmp && mv {env}.tmp {env}; \
             while [ ! -e {go} ]; do sleep 0.01; done; exit {code}",
            env = site.path("env"),
            go = site.path("go"),
        ),
    ]
}

/// The (group, epoch, iface, pid) the command saw.
fn read_env(site: &Site, child: &mut Child) -> (u32, u32, String, u32) {
    let s = wait_file(&site.path("env"), child);
    let f: Vec<&str> = s.split_whitespace().collect();
    assert_eq!(f.len(), 4, "{s:?}");
    (
        f[0].parse().unwrap(),
        f[1].parse().unwrap(),
        f[2].to_string(),
        f[3].parse().unwrap(),
    )
}

fn reset_files(site: &Site) {
    let _ = std::fs::remove_file(site.path("env"));
    let _ = std::fs::remove_file(site.path("go"));
}

/// One job: the command sees its run, its barriers complete in the run's epoch, it exits with
/// `code`; barrierctl returns `code` and the group is gone from every switch. Returns the
/// group and the epoch.
fn one_job(t: &mut Tree, site: &Site, groups: &str, code: u32) -> (u32, u32) {
    reset_files(site);
    let cmd = waiting_command(site, code);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let mut child = site.spawn(t, groups, &cmd);
    let (group, epoch, iface, _) = read_env(site, &mut child);
    assert_eq!(iface, "eth0,eth1");
    assert_eq!(
        t.epochs(group),
        [Some(epoch); 3],
        "group {group} on every switch"
    );
    t.barrier(group, epoch, 0);
    t.barrier(group, epoch, 1);
    // The run is in the state file while the command runs.
    let st = site.state();
    assert_eq!(st["runs"][format!("job-{}", child.id())]["group"], group);
    std::fs::write(site.path("go"), "").unwrap();
    let status = wait_exit(&mut child);
    assert_eq!(
        status.code(),
        Some(code as i32),
        "the command's exit status"
    );
    assert_eq!(
        t.epochs(group),
        [None; 3],
        "group {group} deleted everywhere"
    );
    assert_eq!(site.state()["runs"], serde_json::json!({}));
    (group, epoch)
}

#[test]
fn a_job_gets_a_number_free_on_the_tree_and_a_fresh_epoch_and_leaves_nothing() {
    let mut t = start();
    let site = Site::new();
    // Group 100 is taken on s2 (by someone else): the job passes over it.
    ctl_ok(&[
        "--socket",
        t.socket("s2"),
        "group",
        "create",
        "100",
        "--children",
        "d0",
        "--parent",
        "up",
    ]);
    let (g1, e1) = one_job(&mut t, &site, "100-102", 0);
    assert_eq!(g1, 101);
    assert!(e1 >= 1_700_000_000, "the clock's floor: {e1}");
    // The next job: the same number (free again), a new epoch; a failing command's status.
    let (g2, e2) = one_job(&mut t, &site, "100-102", 3);
    assert_eq!(g2, 101);
    assert!(e2 > e1, "epoch {e2} after {e1}");
    assert_eq!(site.state()["epochs"]["101"], e2);
    // Untouched: the other user's group.
    assert_eq!(t.epochs(100)[2], Some(1));
    // No number free: said, nothing created.
    let out = ctl(&site
        .job_args(&t, "100", &["--", "true"])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(
            "no group of 100-100 is free on every switch of the tree (100: configured on s2)"
        ),
        "{e}"
    );
}

/// The reused group number: every switch restarts between two jobs of the same number, so no
/// switch remembers the first job's epoch. Without the state file's memory the second job
/// took the first one's epoch again (two jobs within one second: the clock alone gives both
/// the same); with it, the second run's epoch is after the first's.
#[test]
fn a_reused_number_after_the_switches_restart_gets_a_new_epoch() {
    let site = Site::new();
    let mut t = start();
    let (g1, e1) = one_job(&mut t, &site, "7", 0);
    drop(t);
    let mut t = start();
    let (g2, e2) = one_job(&mut t, &site, "7", 0);
    assert_eq!((g1, g2), (7, 7));
    assert!(
        e2 > e1,
        "the second run of group 7 took epoch {e2}, the first {e1}"
    );
    // A switch that remembers a later epoch than the state file (an operator's run): the
    // job takes the next after it.
    ctl_ok(&[
        "--socket",
        t.socket("s1"),
        "group",
        "create",
        "7",
        "--children",
        "d0,d1",
        "--parent",
        "up",
        "--epoch",
        &(e2 + 1000).to_string(),
    ]);
    ctl_ok(&["--socket", t.socket("s1"), "group", "delete", "7"]);
    let (_, e3) = one_job(&mut t, &site, "7", 0);
    assert_eq!(e3, e2 + 1001);
}

#[test]
fn a_signal_to_barrierctl_goes_to_the_command_and_the_group_is_deleted() {
    let t = start();
    let site = Site::new();
    for (sig, name) in [(15, "TERM"), (2, "INT")] {
        reset_files(&site);
        // The command: its environment written, then sleep in its place (a shell waiting for
        // a child may outlive a SIGINT; sleep dies of it).
        let cmd = format!(
            "echo \"$NETBARRIER_GROUP $NETBARRIER_EPOCH $NETBARRIER_IFACE $$\" > {env}.tmp && mv {env}.tmp {env}; exec sleep 30",
            env = site.path("env")
        );
        let mut child = site.spawn(&t, "50-59", &["sh", "-c", &cmd]);
        let (group, epoch, _, _) = read_env(&site, &mut child);
        assert_eq!(t.epochs(group), [Some(epoch); 3]);
        Command::new("kill")
            .args([&format!("-{name}"), &child.id().to_string()])
            .status()
            .unwrap();
        let status = wait_exit(&mut child);
        // The command dies of the signal: barrierctl returns 128 + N, as a shell would.
        assert_eq!(status.code(), Some(128 + sig), "SIG{name}");
        assert_eq!(t.epochs(group), [None; 3]);
    }
    // A command that cannot run: 127, nothing left.
    let out = ctl(&site
        .job_args(&t, "50-59", &["--", "/nonexistent/prog"])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(127));
    for g in 50..60 {
        assert_eq!(t.epochs(g), [None; 3]);
    }
    assert_eq!(site.state()["runs"], serde_json::json!({}));
}

#[test]
fn a_barrierctl_killed_with_sigkill_leaves_a_run_that_cleanup_removes() {
    let t = start();
    let site = Site::new();
    let cmd = waiting_command(&site, 0);
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let mut child = site.spawn(&t, "60", &cmd);
    let (group, epoch, _, _) = read_env(&site, &mut child);
    child.kill().unwrap();
    child.wait().unwrap();
    // The command outlives it (SIGKILL cannot be forwarded); the group stays.
    std::fs::write(site.path("go"), "").unwrap();
    assert_eq!(t.epochs(group), [Some(epoch); 3]);
    let state = site.path("state.json");
    let list = ctl_ok(&["job", "--state", &state, "--list"]);
    assert!(
        list.contains(&format!("group {group}  epoch {epoch}")),
        "{list}"
    );
    assert!(list.contains("(gone: --cleanup removes it)"), "{list}");
    let out = ctl_ok(&["job", "--state", &state, "--cleanup"]);
    assert!(
        out.contains(&format!(
            "group {group} (epoch {epoch}) deleted: its barrierctl is gone"
        )),
        "{out}"
    );
    assert!(
        out.ends_with("1 leftover run(s) cleaned up, 0 failed\n"),
        "{out}"
    );
    assert_eq!(t.epochs(group), [None; 3]);
    // Nothing more to do.
    let out = ctl_ok(&["job", "--state", &state, "--cleanup"]);
    assert_eq!(out, "0 leftover run(s) cleaned up, 0 failed\n");
}

#[test]
fn start_and_stop_by_id_are_the_launcher_halves() {
    let mut t = start();
    let site = Site::new();
    let args = site.job_args(&t, "200-201", &["--start", "4242"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ctl_ok(&args);
    let mut env = HashMap::new();
    for l in out.lines() {
        let (k, v) = l.split_once('=').unwrap();
        env.insert(k.to_string(), v.to_string());
    }
    assert_eq!(env["NETBARRIER_GROUP"], "200");
    assert_eq!(env["NETBARRIER_IFACE"], "eth0,eth1");
    let epoch: u32 = env["NETBARRIER_EPOCH"].parse().unwrap();
    assert_eq!(t.epochs(200), [Some(epoch); 3]);
    t.barrier(200, epoch, 0);
    // The same id twice: refused, nothing created.
    let out = ctl(&args);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("job \"4242\" has a group already (group 200)"));
    assert_eq!(t.epochs(201), [None; 3]);
    // Another job meanwhile takes the next number.
    let args2 = site.job_args(&t, "200-201", &["--start", "4243"]);
    let out = ctl_ok(&args2.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.starts_with("NETBARRIER_GROUP=201\n"), "{out}");
    let state = site.path("state.json");
    let out = ctl_ok(&["job", "--state", &state, "--stop", "4242"]);
    assert!(
        out.ends_with(&format!(
            "job 4242: group 200 (epoch {epoch}) deleted on every switch of its tree\n"
        )),
        "{out}"
    );
    assert!(
        out.starts_with(&format!("root: deleted (epoch {epoch})\n")),
        "{out}"
    );
    assert_eq!(t.epochs(200), [None; 3]);
    let out = ctl(&["job", "--state", &state, "--stop", "4242"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no open run of job \"4242\""));
    // A run stopped by id is never "stale".
    let out = ctl_ok(&["job", "--state", &state, "--cleanup"]);
    assert_eq!(out, "0 leftover run(s) cleaned up, 0 failed\n");
    ctl_ok(&["job", "--state", &state, "--stop", "4243"]);
    assert_eq!(t.epochs(201), [None; 3]);
    // --json: one object with the environment.
    let mut args = site.job_args(&t, "200-201", &["--start", "4244"]);
    args.insert(0, "--json".into());
    let out = ctl_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let epoch = v["epoch"].as_u64().unwrap() as u32;
    assert_eq!(v["group"], 200);
    assert_eq!(v["env"]["NETBARRIER_GROUP"], "200");
    assert_eq!(v["env"]["NETBARRIER_EPOCH"], epoch.to_string());
    assert_eq!(v["switches"], serde_json::json!(["s1", "s2", "root"]));
    assert_eq!(t.epochs(200), [Some(epoch); 3]);
    let out = ctl_ok(&["--json", "job", "--state", &state, "--stop", "4244"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["switches"][0]["action"], "deleted");
    assert_eq!(t.epochs(200), [None; 3]);
}

#[test]
fn usage_errors_name_the_flag() {
    let t = start();
    let site = Site::new();
    let state = site.path("state.json");
    let out = ctl(&["job", "--state", &state, "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--topology is required"));
    let args = site.job_args(&t, "9-3", &["--", "true"]);
    let out = ctl(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--groups \"9-3\": the range ends before it starts"));
    let out = ctl(&["job", "--state", &state]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give the command after `--`"));
    let mut args = site.job_args(&t, "1", &["--", "true"]);
    let i = args.iter().position(|a| a == "--iface").unwrap();
    args.drain(i..i + 2);
    let out = ctl(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--iface is required"));
    let mut args = site.job_args(&t, "1", &["--", "true"]);
    let i = args.iter().position(|a| a == "h1,h2,h3,h4").unwrap();
    args[i] = "h1,h9".into();
    let out = ctl(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown member \"h9\""));
}

/// Two launchers at once on one range (the state file's lock): two numbers, never one twice.
#[test]
fn concurrent_starts_take_different_numbers() {
    let t = start();
    let site = Site::new();
    let spawn = |id: &str| {
        Command::new(env!("CARGO_BIN_EXE_barrierctl"))
            .args(site.job_args(&t, "200-201", &["--start", id]))
            .output()
            .unwrap()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| spawn("1"));
        let b = s.spawn(|| spawn("2"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let group = |o: &Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .next()
            .unwrap()
            .to_string()
    };
    let mut got = [group(&a), group(&b)];
    got.sort();
    assert_eq!(got, ["NETBARRIER_GROUP=200", "NETBARRIER_GROUP=201"]);
    assert!(t.epochs(200)[0].is_some() && t.epochs(201)[0].is_some());
}

/// A stop that cannot reach a switch says so and keeps the run, so that it can be finished.
#[test]
fn a_stop_that_fails_keeps_the_run() {
    let t = start();
    let site = Site::new();
    let args = site.job_args(&t, "5", &["--start", "77"]);
    ctl_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    drop(t);
    let state = site.path("state.json");
    let out = ctl(&["job", "--state", &state, "--stop", "77"]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("job \"77\" (group 5): switch \"root\": ")
            && e.contains("no switch is running there"),
        "{e}"
    );
    assert!(
        e.contains("the run stays in the state file: run `barrierctl job --stop 77` again"),
        "{e}"
    );
    let list = ctl_ok(&["job", "--state", &state, "--list"]);
    assert!(
        list.starts_with("77  group 5  epoch ") && list.ends_with("1 open run(s)\n"),
        "{list}"
    );
}
