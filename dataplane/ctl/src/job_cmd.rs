//! `barrierctl job`: the command line over `barrier_ctl::job` (allocate, run, delete).

use crate::{socket_map, Fail, JobArgs};
use barrier_ctl::job::{self, GroupRange, JobRequest, Owner, Run};
use barrier_ctl::plan::Topology;
use barrier_ctl::tree;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering::SeqCst};
use std::sync::Arc;

pub fn main(a: JobArgs, json: bool) -> Result<ExitCode, Fail> {
    if let Some(id) = &a.stop {
        print!("{}", stop(&a.state, id, json)?);
        return Ok(ExitCode::SUCCESS);
    }
    if a.cleanup {
        return cleanup(&a.state, json);
    }
    if a.list {
        print!("{}", list(&a.state, json)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(id) = &a.start {
        let run = start(&a, id.clone(), None)?;
        print!("{}", env_text(&run, a.iface.as_deref(), json));
        return Ok(ExitCode::SUCCESS);
    }
    if a.command.is_empty() {
        return Err(Fail(
            "job: give the command after `--` (or --start ID, --stop ID, --cleanup, --list)".into(),
            2,
        ));
    }
    required(&a)?;
    if a.iface.is_none() {
        return Err(Fail(
            "job: --iface is required (NETBARRIER_IFACE for the ranks: the leaf's interface, or a comma list indexed by node-local rank)".into(),
            2,
        ));
    }
    run_command(&a, json)
}

/// The flags a start needs; a missing one is a usage error naming it.
fn required(a: &JobArgs) -> Result<(), Fail> {
    let need = |ok: bool, flag: &str, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(Fail(format!("job: {flag} is required ({what})"), 2))
        }
    };
    need(
        a.topology.is_some(),
        "--topology",
        "the topology file `plan` takes",
    )?;
    need(
        !a.members.is_empty(),
        "--members",
        "the member hosts, h1,h2,...",
    )?;
    need(
        !a.sockets.is_empty(),
        "--sockets",
        "SWITCH=PATH,... for every switch of the tree",
    )?;
    need(
        a.groups.is_some(),
        "--groups",
        "N or FIRST-LAST to allocate from",
    )
}

/// The job's request from the flags, allocated.
fn start(a: &JobArgs, id: String, owner: Option<Owner>) -> Result<Run, Fail> {
    required(a)?;
    let topology = a.topology.as_ref().expect("checked");
    let text = std::fs::read_to_string(topology)
        .map_err(|e| Fail(format!("{}: {e}", topology.display()), 2))?;
    let topo =
        Topology::parse(&text).map_err(|e| Fail(format!("{}: {e}", topology.display()), 2))?;
    let groups =
        GroupRange::parse(a.groups.as_deref().expect("checked")).map_err(|e| Fail(e, 2))?;
    let req = JobRequest {
        id,
        members: a.members.clone(),
        groups,
        resend_timeout_us: a.resend_timeout_us,
        sockets: socket_map(&a.sockets)?,
        owner,
    };
    job::start(&a.state, &topo, &req).map_err(|e| Fail(e.to_string(), 1))
}

fn env_text(run: &Run, iface: Option<&str>, json: bool) -> String {
    if json {
        let env: serde_json::Map<String, serde_json::Value> = job::env(run, iface)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        let v = serde_json::json!({
            "id": run.id, "group": run.group, "epoch": run.epoch,
            "switches": run.plan.switches.iter().map(|s| s.switch.clone()).collect::<Vec<_>>(),
            "env": env,
        });
        format!("{v}\n")
    } else {
        let mut s = String::new();
        for (k, v) in job::env(run, iface) {
            let _ = writeln!(s, "{k}={v}");
        }
        s
    }
}

fn report_text(r: &tree::Report) -> String {
    let mut s = String::new();
    for st in &r.steps {
        match (st.action.as_str(), st.from) {
            ("deleted", Some(f)) => {
                let _ = writeln!(s, "{}: deleted (epoch {f})", st.switch);
            }
            (a, _) => {
                let _ = writeln!(s, "{}: {a}", st.switch);
            }
        }
    }
    s
}

fn stop(state: &Path, id: &str, json: bool) -> Result<String, Fail> {
    let (run, report) = job::stop(state, id).map_err(|e| Fail(e.to_string(), 1))?;
    Ok(if json {
        format!(
            "{}\n",
            serde_json::json!({ "id": run.id, "group": run.group, "epoch": run.epoch, "switches": report.steps })
        )
    } else {
        format!(
            "{}job {}: group {} (epoch {}) deleted on every switch of its tree\n",
            report_text(&report),
            run.id,
            run.group,
            run.epoch
        )
    })
}

fn cleanup(state: &Path, json: bool) -> Result<ExitCode, Fail> {
    let stale = job::stale(state).map_err(|e| Fail(e.to_string(), 1))?;
    let mut failed = 0;
    let mut done = Vec::new();
    for r in &stale {
        match job::stop(state, &r.id) {
            Ok(_) => done.push(serde_json::json!({"id": r.id, "group": r.group, "epoch": r.epoch})),
            Err(e) => {
                failed += 1;
                eprintln!("barrierctl: {e}");
            }
        }
    }
    if json {
        println!(
            "{}",
            serde_json::json!({ "cleaned": done, "failed": failed })
        );
    } else {
        for d in &done {
            println!(
                "job {}: group {} (epoch {}) deleted: its barrierctl is gone",
                d["id"].as_str().unwrap_or(""),
                d["group"],
                d["epoch"]
            );
        }
        println!("{} leftover run(s) cleaned up, {failed} failed", done.len());
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn list(state: &Path, json: bool) -> Result<String, Fail> {
    let runs = job::runs(state).map_err(|e| Fail(e.to_string(), 1))?;
    if json {
        return Ok(format!(
            "{}\n",
            serde_json::to_string(&runs).expect("runs serialize")
        ));
    }
    let mut s = String::new();
    for r in &runs {
        let owner = match r.owner {
            Some(o) if o.alive() => format!("barrierctl pid {}", o.pid),
            Some(o) => format!("barrierctl pid {} (gone: --cleanup removes it)", o.pid),
            None => "stopped by id (--stop)".into(),
        };
        let _ = writeln!(
            s,
            "{}  group {}  epoch {}  switches {}  {owner}",
            r.id,
            r.group,
            r.epoch,
            r.plan
                .switches
                .iter()
                .map(|s| s.switch.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    let _ = writeln!(s, "{} open run(s)", runs.len());
    Ok(s)
}

/// Sends `sig` to `pid` through kill(1): this crate makes no system calls of its own (no
/// libc), and a signal is forwarded a few times in a job's life at most.
fn forward(sig: i32, pid: u32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// The wrap: allocate, run the command with the environment, forward SIGINT/SIGTERM/SIGHUP
/// to it, delete the group whatever its end, return its exit status (128+N for a signal N).
fn run_command(a: &JobArgs, json: bool) -> Result<ExitCode, Fail> {
    // Signals from here on are ours to handle: before the command runs they stop the start
    // (the group is deleted again), while it runs they go to it, after it they are ignored
    // (the delete finishes).
    let child_pid = Arc::new(AtomicU32::new(0));
    let pending = Arc::new(AtomicI32::new(0));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| Fail(format!("cannot handle signals: {e}"), 1))?;
    let handle = signals.handle();
    let forwarder = {
        let (child_pid, pending) = (child_pid.clone(), pending.clone());
        std::thread::spawn(move || {
            for sig in signals.forever() {
                match child_pid.load(SeqCst) {
                    0 => pending.store(sig, SeqCst),
                    // The command has ended: the delete is under way, nothing to forward to.
                    u32::MAX => {}
                    pid => forward(sig, pid),
                }
            }
        })
    };
    let finish = |code: u8| {
        handle.close();
        let _ = forwarder.join();
        ExitCode::from(code)
    };
    let id = format!("job-{}", std::process::id());
    let run = match start(a, id, Owner::me()) {
        Ok(r) => r,
        Err(f) => {
            handle.close();
            return Err(f);
        }
    };
    eprintln!(
        "barrierctl job: group {} epoch {} on {} switch(es) (root {})",
        run.group,
        run.epoch,
        run.plan.switches.len(),
        run.plan.root
    );
    if json {
        print!("{}", env_text(&run, a.iface.as_deref(), true));
    }
    let status = match pending.load(SeqCst) {
        0 => {
            let mut cmd = Command::new(&a.command[0]);
            cmd.args(&a.command[1..]);
            for (k, v) in job::env(&run, a.iface.as_deref()) {
                cmd.env(k, v);
            }
            match cmd.spawn() {
                Ok(mut child) => {
                    child_pid.store(child.id(), SeqCst);
                    // A signal that came between the check and the store is forwarded now.
                    let sig = pending.swap(0, SeqCst);
                    if sig != 0 {
                        forward(sig, child.id());
                    }
                    let st = child.wait();
                    child_pid.store(u32::MAX, SeqCst);
                    match st {
                        Ok(st) => match (st.code(), st.signal()) {
                            (Some(c), _) => (c & 0xff) as u8,
                            (None, Some(s)) => (128 + s) as u8,
                            _ => 1,
                        },
                        Err(e) => {
                            eprintln!("barrierctl job: waiting for {:?}: {e}", a.command[0]);
                            1
                        }
                    }
                }
                Err(e) => {
                    eprintln!("barrierctl job: cannot run {:?}: {e}", a.command[0]);
                    127
                }
            }
        }
        sig => (128 + sig) as u8,
    };
    // No command (any more): signals are dropped from here on, the delete finishes.
    child_pid.store(u32::MAX, SeqCst);
    match job::stop(&a.state, &run.id) {
        Ok((_, report)) => {
            eprint!("{}", report_text(&report));
            eprintln!(
                "barrierctl job: group {} (epoch {}) deleted; the command's exit status: {status}",
                run.group, run.epoch
            );
            Ok(finish(status))
        }
        Err(e) => {
            eprintln!("barrierctl job: {e}");
            Ok(finish(if status == 0 { 1 } else { status }))
        }
    }
}
