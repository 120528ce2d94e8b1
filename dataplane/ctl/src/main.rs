//! barrierctl: manage a running barrier-switch's groups over its control socket, plan a
//! group's barrier tree over a topology, and create (`apply`), reset or delete it on every
//! switch of the tree; give a job its own run of a group (`job`, `src/job_cmd.rs`). Exit codes:
//! 0 done, 1 the switch was not reachable or refused, 2 a usage error (clap's, or a file that
//! cannot be read as asked); `job -- CMD` exits with CMD's status.

use barrier_ctl::apply::apply;
use barrier_ctl::client::Client;
use barrier_ctl::group::RoleName;
use barrier_ctl::plan::{plan, Plan, PlanRequest, Topology};
use barrier_ctl::proto::{PhaseName, Reply, Request, DEFAULT_SOCKET};
use barrier_ctl::tree;
use clap::{Parser, Subcommand};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

mod job_cmd;

#[derive(Parser)]
#[command(
    name = "barrierctl",
    version,
    about = "Manage a running barrier-switch's groups; plan a group's barrier tree, apply it, reset or delete it on every switch"
)]
struct Cli {
    /// The switch's control socket (its configuration's [control] socket).
    #[arg(long, global = true, default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Print the answer as JSON (one object), for scripts.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Every configured group, in blocks of consecutive numbers with one configuration.
    Groups,
    /// One group: create, reset, change, delete, show.
    Group {
        #[command(subcommand)]
        cmd: GroupCmd,
    },
    /// Every counter of the switch, per port and in total.
    Stats,
    /// The switch's ports, with their policers.
    Ports,
    /// One port: show it, or set its policer while the switch runs.
    Port {
        #[command(subcommand)]
        cmd: PortCmd,
    },
    /// Write the running groups into the switch's configuration file (other sections kept).
    WriteBack,
    /// Compute a group's barrier tree over a topology file; print each switch's [[groups]]
    /// block (or, with --json, the plan `apply` takes).
    Plan {
        topology: PathBuf,
        #[arg(long)]
        group: u32,
        /// Member hosts, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        members: Vec<String>,
        /// Re-send timeout of every intermediate, µs.
        #[arg(long, default_value_t = 1000)]
        resend_timeout_us: u64,
        /// The group's epoch, written into every switch's block.
        #[arg(long)]
        epoch: Option<u32>,
    },
    /// Create a planned group (`plan --json` output) on every switch of its tree, leaf-most
    /// first, the root last, with one epoch.
    Apply {
        plan: PathBuf,
        /// Each switch's control socket: SWITCH=PATH, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        sockets: Vec<String>,
        /// The group's epoch on every switch (default: the plan's, else the switches' 1).
        #[arg(long)]
        epoch: Option<u32>,
    },
    /// A new run of a planned group: every switch of its tree reset to one new epoch, root
    /// first, once every switch has the group and admits the epoch.
    Reset {
        /// The group's tree: `barrierctl plan --json` output.
        plan: PathBuf,
        /// Each switch's control socket: SWITCH=PATH, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        sockets: Vec<String>,
        /// The new epoch (default: the next after the highest any switch has had).
        #[arg(long)]
        epoch: Option<u32>,
        /// Allow an epoch at or behind the highest a switch has had (never its current one).
        #[arg(long)]
        force: bool,
    },
    /// A job's own run of a group: a number of --groups free on every switch of the tree,
    /// created with a fresh epoch, NETBARRIER_GROUP/EPOCH/IFACE exported to the command after
    /// `--`, deleted when it exits (its exit status is barrierctl's). --start/--stop ID do the
    /// halves for a launcher (a Slurm prolog and epilog); --cleanup removes the runs of a
    /// barrierctl that was killed; --list shows the open runs.
    Job(JobArgs),
    /// Delete a planned group on every switch of its tree, root first, once every switch is
    /// reached; a switch without the group is passed over.
    Delete {
        /// The group's tree: `barrierctl plan --json` output.
        plan: PathBuf,
        /// Each switch's control socket: SWITCH=PATH, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        sockets: Vec<String>,
    },
}

#[derive(clap::Args)]
struct JobArgs {
    /// The topology file (as `plan` takes).
    #[arg(long)]
    topology: Option<PathBuf>,
    /// The job's member hosts (topology names, one per rank's leaf), comma-separated.
    #[arg(long, value_delimiter = ',')]
    members: Vec<String>,
    /// Each switch's control socket: SWITCH=PATH, comma-separated.
    #[arg(long, value_delimiter = ',')]
    sockets: Vec<String>,
    /// Group numbers to allocate from: N or FIRST-LAST (both included).
    #[arg(long)]
    groups: Option<String>,
    /// NETBARRIER_IFACE for the ranks: the leaf's interface, or a comma list indexed by
    /// node-local rank (passed as given).
    #[arg(long)]
    iface: Option<String>,
    /// Re-send timeout of every intermediate, µs.
    #[arg(long, default_value_t = 1000)]
    resend_timeout_us: u64,
    /// The state file: highest epoch given per group number, open runs (locked while used).
    #[arg(long, default_value = barrier_ctl::job::DEFAULT_STATE)]
    state: PathBuf,
    /// Only allocate, for job ID (a Slurm job id): print NETBARRIER_GROUP=... lines.
    #[arg(long, value_name = "ID", conflicts_with_all = ["stop", "cleanup", "list", "command"])]
    start: Option<String>,
    /// Only delete job ID's group on every switch and forget the run.
    #[arg(long, value_name = "ID", conflicts_with_all = ["cleanup", "list", "command"])]
    stop: Option<String>,
    /// Delete the groups of runs whose barrierctl is gone (killed with SIGKILL).
    #[arg(long, conflicts_with_all = ["list", "command"])]
    cleanup: bool,
    /// The open runs.
    #[arg(long, conflicts_with = "command")]
    list: bool,
    /// The command to run (after `--`), e.g. `mpirun -np 4 prog`.
    #[arg(last = true)]
    command: Vec<String>,
}

#[derive(Subcommand)]
enum GroupCmd {
    /// Configuration, epoch, sequence number, phase, arrived children, counters.
    Show { group: u32 },
    /// A new group: root without --parent, intermediate with it.
    Create {
        group: u32,
        /// Child ports, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        children: Vec<String>,
        #[arg(long)]
        parent: Option<String>,
        /// Intermediate re-send timeout, µs (the switch's default: 1000).
        #[arg(long)]
        resend_timeout_us: Option<u64>,
        /// Default 1 for a number new to the switch; one it had before needs an epoch ahead
        /// of the highest it had.
        #[arg(long)]
        epoch: Option<u32>,
        /// Declare a child failed (abort the group) when it has not reported a barrier this
        /// many ms after its first sibling did; 0 or absent: never.
        #[arg(long)]
        fail_after_ms: Option<u64>,
        /// Allow an epoch at or behind the highest the switch had for this number.
        #[arg(long)]
        force: bool,
    },
    /// A new run: state forgotten, a new epoch (unless given, the next after the highest the
    /// switch has had for the group). Never the current epoch; an older one only with --force.
    Reset {
        group: u32,
        #[arg(long)]
        epoch: Option<u32>,
        /// Allow an epoch at or behind the highest the switch has had (not the current one).
        #[arg(long)]
        force: bool,
    },
    /// Change children, parent or timer; what is not given stays.
    Set {
        group: u32,
        #[arg(long, value_delimiter = ',')]
        children: Option<Vec<String>>,
        #[arg(long, conflicts_with = "root")]
        parent: Option<String>,
        /// Make the group's switch the root (no parent).
        #[arg(long)]
        root: bool,
        #[arg(long)]
        resend_timeout_us: Option<u64>,
        /// Failure declaration deadline, ms; 0 turns it off.
        #[arg(long)]
        fail_after_ms: Option<u64>,
    },
    /// Remove the group; its frames are dropped and counted.
    Delete { group: u32 },
    /// Keep a straggler report and per-group Prometheus series for a configured group (up to
    /// the switch's `[stragglers] limit`).
    Watch { group: u32 },
    /// Stop watching a group and drop its report.
    Unwatch { group: u32 },
}

#[derive(Subcommand)]
enum PortCmd {
    /// Device, peer, frames in and out, policer, frames the policer dropped.
    Show { port: String },
    /// Police the port's barrier frames from now on (not written back to the file). Each of
    /// the port's RX queues takes the change at its next received burst, with a full bucket.
    Set {
        port: String,
        /// Barrier frames per second let through; 0 turns the policer off.
        #[arg(long)]
        policer_rate: Option<u64>,
        /// Frames let through back to back (default: rate/100, at least 64). Alone: the burst
        /// of the policer in force changes.
        #[arg(long)]
        policer_burst: Option<u64>,
    },
}

/// A failure: the message and the exit code.
struct Fail(String, u8);

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::Job(args) = cli.cmd {
        return match job_cmd::main(args, cli.json) {
            Ok(code) => code,
            Err(Fail(msg, code)) => {
                eprintln!("barrierctl: {msg}");
                ExitCode::from(code)
            }
        };
    }
    match run(cli) {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(Fail(msg, code)) => {
            eprintln!("barrierctl: {msg}");
            ExitCode::from(code)
        }
    }
}

fn us_to_ns(us: Option<u64>) -> Option<u64> {
    us.map(|u| u.saturating_mul(1000))
}

fn ms_to_ns(ms: Option<u64>) -> Option<u64> {
    ms.map(|m| m.saturating_mul(1_000_000))
}

fn run(cli: Cli) -> Result<String, Fail> {
    let req = match cli.cmd {
        Cmd::Plan {
            topology,
            group,
            members,
            resend_timeout_us,
            epoch,
        } => {
            let req = PlanRequest {
                group,
                epoch,
                members,
                resend_timeout_us,
            };
            return plan_cmd(&topology, &req, cli.json);
        }
        Cmd::Apply {
            plan,
            sockets,
            epoch,
        } => return apply_cmd(&plan, &sockets, epoch, cli.json),
        Cmd::Reset {
            plan,
            sockets,
            epoch,
            force,
        } => {
            let (p, map) = plan_and_sockets(&plan, &sockets, "reset")?;
            return tree_cmd(&tree::reset(&p, &map, epoch, force), cli.json);
        }
        Cmd::Job(_) => unreachable!("barrierctl job is run by job_cmd::main"),
        Cmd::Delete { plan, sockets } => {
            let (p, map) = plan_and_sockets(&plan, &sockets, "delete")?;
            return tree_cmd(&tree::delete(&p, &map), cli.json);
        }
        Cmd::Groups => Request::Groups {},
        Cmd::Stats => Request::Stats {},
        Cmd::Ports => Request::Ports {},
        Cmd::Port { cmd } => match cmd {
            PortCmd::Show { port } => Request::PortShow { port },
            PortCmd::Set {
                port,
                policer_rate,
                policer_burst,
            } => Request::PortSet {
                port,
                policer_rate,
                policer_burst,
            },
        },
        Cmd::WriteBack => Request::WriteBack {},
        Cmd::Group { cmd } => match cmd {
            GroupCmd::Show { group } => Request::GroupShow { group },
            GroupCmd::Create {
                group,
                children,
                parent,
                resend_timeout_us,
                epoch,
                fail_after_ms,
                force,
            } => Request::GroupCreate {
                group,
                children,
                parent,
                resend_timeout_ns: us_to_ns(resend_timeout_us),
                epoch,
                fail_after_ns: ms_to_ns(fail_after_ms),
                force,
            },
            GroupCmd::Reset {
                group,
                epoch,
                force,
            } => Request::GroupReset {
                group,
                epoch,
                force,
            },
            GroupCmd::Set {
                group,
                children,
                parent,
                root,
                resend_timeout_us,
                fail_after_ms,
            } => Request::GroupSet {
                group,
                children,
                parent,
                root,
                resend_timeout_ns: us_to_ns(resend_timeout_us),
                fail_after_ns: ms_to_ns(fail_after_ms),
            },
            GroupCmd::Delete { group } => Request::GroupDelete { group },
            GroupCmd::Watch { group } => Request::GroupWatch { group },
            GroupCmd::Unwatch { group } => Request::GroupUnwatch { group },
        },
    };
    let mut client = Client::connect(&cli.socket).map_err(|e| Fail(e.to_string(), 1))?;
    let reply = client.request(&req).map_err(|e| Fail(e.to_string(), 1))?;
    Ok(if cli.json {
        let mut s = serde_json::to_string_pretty(&reply).expect("replies serialize");
        s.push('\n');
        s
    } else {
        human(&reply)
    })
}

fn plan_cmd(topology: &PathBuf, req: &PlanRequest, json: bool) -> Result<String, Fail> {
    let group = req.group;
    let text = std::fs::read_to_string(topology)
        .map_err(|e| Fail(format!("{}: {e}", topology.display()), 2))?;
    let topo =
        Topology::parse(&text).map_err(|e| Fail(format!("{}: {e}", topology.display()), 2))?;
    let p = plan(&topo, req).map_err(|e| Fail(format!("cannot plan group {group}: {e}"), 1))?;
    Ok(if json {
        let mut s = serde_json::to_string_pretty(&p).expect("plans serialize");
        s.push('\n');
        s
    } else {
        p.to_toml()
    })
}

/// The plan file `apply`, `reset` and `delete` take, and their `--sockets` as a map.
fn plan_and_sockets(
    plan_path: &PathBuf,
    sockets: &[String],
    cmd: &str,
) -> Result<(Plan, BTreeMap<String, PathBuf>), Fail> {
    let text = std::fs::read_to_string(plan_path).map_err(|e| {
        let s = plan_path.to_string_lossy();
        let hint = if cmd != "apply" && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            format!(" (`barrierctl {cmd}` takes a plan file; one switch's group is `barrierctl group {cmd} {s}`)")
        } else {
            String::new()
        };
        Fail(format!("{}: {e}{hint}", plan_path.display()), 2)
    })?;
    let p: Plan = serde_json::from_str(&text).map_err(|e| {
        Fail(
            format!(
                "{}: not a plan (write one with `barrierctl plan --json`): {e}",
                plan_path.display()
            ),
            2,
        )
    })?;
    if p.switches.is_empty() {
        return Err(Fail(
            format!("{}: a plan without switches", plan_path.display()),
            2,
        ));
    }
    Ok((p, socket_map(sockets)?))
}

/// `--sockets SWITCH=PATH,...` as a map.
fn socket_map(sockets: &[String]) -> Result<BTreeMap<String, PathBuf>, Fail> {
    let mut map = BTreeMap::new();
    for s in sockets {
        let Some((name, path)) = s.split_once('=') else {
            return Err(Fail(format!("--sockets {s:?}: want SWITCH=PATH"), 2));
        };
        map.insert(name.to_string(), PathBuf::from(path));
    }
    Ok(map)
}

fn apply_cmd(
    plan_path: &PathBuf,
    sockets: &[String],
    epoch: Option<u32>,
    json: bool,
) -> Result<String, Fail> {
    let (p, map) = plan_and_sockets(plan_path, sockets, "apply")?;
    let order = apply(&p, &map, epoch).map_err(|e| Fail(e.to_string(), 1))?;
    Ok(if json {
        format!(
            "{}\n",
            serde_json::json!({ "group": p.group, "configured": order })
        )
    } else {
        format!(
            "group {}: created on {} (in this order; root {})\n",
            p.group,
            order.join(", "),
            p.root
        )
    })
}

/// A tree reset's or delete's report: per switch what happened, on stdout (as it is the record
/// of what changed, also when it stopped midway); the error on stderr, exit 1.
fn tree_cmd(r: &tree::Report, json: bool) -> Result<String, Fail> {
    let out = if json {
        let v = serde_json::json!({
            "group": r.group,
            "epoch": r.epoch,
            "switches": r.steps,
            "left": r.left,
            "error": r.error.as_ref().map(|e| e.to_string()),
        });
        format!("{v}\n")
    } else {
        let mut s = String::new();
        for st in &r.steps {
            let what = match (st.action.as_str(), st.from, st.epoch) {
                ("reset", Some(f), Some(e)) => format!("reset (epoch {f} -> {e})"),
                ("deleted", Some(f), _) => format!("deleted (epoch {f})"),
                ("absent", _, _) => "absent (the group was not there; nothing to delete)".into(),
                (a, _, _) => a.to_string(),
            };
            let _ = writeln!(s, "{}: {what}", st.switch);
        }
        if r.error.is_none() {
            let n = r.steps.len();
            let changed = r.changed().len();
            let done = match r.epoch {
                Some(e) => format!("reset to epoch {e} on {n} switch(es)"),
                None if changed == n => format!("deleted on {n} switch(es)"),
                None => format!("deleted on {changed} of {n} switch(es), absent on the others"),
            };
            let _ = writeln!(s, "group {}: {done}, root first", r.group);
        }
        s
    };
    let Some(e) = &r.error else {
        return Ok(out);
    };
    print!("{out}");
    let changed = r.changed();
    let what = if r.epoch.is_some() {
        "reset"
    } else {
        "deleted"
    };
    let state = if changed.is_empty() {
        "nothing was changed".to_string()
    } else if r.epoch.is_some() {
        format!(
            "{what} on {}, NOT on {}: the tree is split between two epochs; once that is \
             fixed, run the reset again (without --epoch it puts every switch in a newer epoch)",
            changed.join(", "),
            r.left.join(", ")
        )
    } else {
        format!(
            "{what} on {}, NOT on {}: run the delete again to finish",
            changed.join(", "),
            r.left.join(", ")
        )
    };
    Err(Fail(format!("{e}; {state}"), 1))
}

/// Rows under a header, columns padded to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                l += c;
            } else {
                let _ = write!(l, "{c:<width$}  ", width = w[i]);
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header.to_vec(), &mut out);
    for r in rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

fn timeout(ns: u64, role: RoleName) -> String {
    if role == RoleName::Root {
        "-".into()
    } else if ns.is_multiple_of(1000) {
        format!("{} µs", ns / 1000)
    } else {
        format!("{ns} ns")
    }
}

/// A port's policer in words: `off`, or `RATE/s burst BURST`.
fn policer(p: &barrier_ctl::proto::PortInfo) -> String {
    if p.policer_rate == 0 {
        "off".into()
    } else {
        format!("{}/s burst {}", p.policer_rate, p.policer_burst)
    }
}

fn human(reply: &Reply) -> String {
    match reply {
        Reply::Groups { capacity, blocks } => {
            let rows: Vec<Vec<String>> = blocks
                .iter()
                .map(|b| {
                    let r = &b.registers;
                    vec![
                        if b.first == b.last {
                            b.first.to_string()
                        } else {
                            format!("{}..={}", b.first, b.last)
                        },
                        r.role.to_string(),
                        r.epoch.to_string(),
                        r.children.join(","),
                        r.parent.clone().unwrap_or_else(|| "-".into()),
                        timeout(r.resend_timeout_ns, r.role),
                    ]
                })
                .collect();
            let n: u64 = blocks.iter().map(|b| u64::from(b.last - b.first) + 1).sum();
            let mut s = table(
                &["GROUPS", "ROLE", "EPOCH", "CHILDREN", "PARENT", "RESEND"],
                &rows,
            );
            let _ = writeln!(s, "{n} group(s) configured; table capacity {capacity}");
            s
        }
        Reply::Group { group: g } => {
            let r = &g.registers;
            let missing: Vec<&str> = r
                .children
                .iter()
                .filter(|c| !g.arrived.contains(c))
                .map(String::as_str)
                .collect();
            let epoch = match g.highest_epoch {
                Some(h) => format!("{} (the highest this switch has had: {h})", r.epoch),
                None => r.epoch.to_string(),
            };
            let mut rows: Vec<(&str, String)> = vec![
                ("role", r.role.to_string()),
                ("epoch", epoch),
                ("children", r.children.join(", ")),
            ];
            if let Some(p) = &r.parent {
                rows.push(("parent", p.clone()));
                rows.push(("resend", timeout(r.resend_timeout_ns, r.role)));
            }
            if r.fail_after_ns != 0 {
                rows.push(("fail after", format!("{} ms", r.fail_after_ns as f64 / 1e6)));
            }
            rows.push(("phase", g.phase.as_str().to_string()));
            if let Some(f) = &g.failed {
                rows.push(("failed", format!("{f} (reset the group to recover)")));
            }
            rows.push(("seq", g.seq.map_or("-".to_string(), |q| q.to_string())));
            rows.push((
                "arrived",
                format!(
                    "{} of {}: [{}]{}",
                    g.arrived.len(),
                    r.children.len(),
                    g.arrived.join(", "),
                    if g.phase == PhaseName::Collecting && !missing.is_empty() {
                        format!(" (waiting for {})", missing.join(", "))
                    } else {
                        String::new()
                    }
                ),
            ));
            if g.uncounted {
                const NOT_COUNTED: &str =
                    "not counted per group by this dataplane: see barrierctl stats";
                rows.push(("completions", NOT_COUNTED.to_string()));
                rows.push(("re-sends", NOT_COUNTED.to_string()));
            } else {
                rows.push(("completions", g.completions.to_string()));
                rows.push(("re-sends", g.resends.to_string()));
            }
            if let Some(st) = &g.stragglers {
                if let Some(w) = st.waiting_ns {
                    rows.push((
                        "waiting",
                        format!("{:.3} ms since the first reduce", w as f64 / 1e6),
                    ));
                }
                for b in &st.recent {
                    rows.push((
                        "barrier",
                        format!(
                            "seq {}: last {}, spread {:.1} µs{}",
                            b.seq,
                            b.last,
                            b.spread_ns as f64 / 1e3,
                            b.latency_ns
                                .map(|l| format!(", latency {:.1} µs", l as f64 / 1e3))
                                .unwrap_or_default()
                        ),
                    ));
                }
            }
            let mut s = format!("group {}\n", g.group);
            for (k, v) in rows {
                let _ = writeln!(s, "  {:<13}{v}", format!("{k}:"));
            }
            s
        }
        Reply::Changed {
            group,
            action,
            epoch,
        } => format!("group {group}: {action} (epoch {epoch})\n"),
        Reply::Stats { sets } => {
            let mut s = String::new();
            for set in sets {
                let nz: Vec<String> = set
                    .counters
                    .iter()
                    .filter(|(_, v)| **v != 0)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                if !nz.is_empty() {
                    let _ = writeln!(s, "{}: {}", set.scope, nz.join(" "));
                }
            }
            if s.is_empty() {
                s = "every counter is 0\n".into();
            }
            s
        }
        Reply::Ports { ports } => {
            let rows: Vec<Vec<String>> = ports
                .iter()
                .map(|p| {
                    vec![
                        p.index.to_string(),
                        p.name.clone(),
                        p.device.clone(),
                        p.peer_mac.clone(),
                        p.rx_frames.to_string(),
                        p.tx_frames.to_string(),
                        policer(p),
                        p.drop_policed.to_string(),
                    ]
                })
                .collect();
            table(
                &[
                    "PORT",
                    "NAME",
                    "DEVICE",
                    "PEER MAC",
                    "RX FRAMES",
                    "TX FRAMES",
                    "POLICER",
                    "POLICED",
                ],
                &rows,
            )
        }
        Reply::Port { port: p } => {
            let mut s = format!(
                "port {}
",
                p.name
            );
            for (k, v) in [
                ("index", p.index.to_string()),
                ("device", p.device.clone()),
                ("peer mac", p.peer_mac.clone()),
                ("rx frames", p.rx_frames.to_string()),
                ("tx frames", p.tx_frames.to_string()),
                ("policer", policer(p)),
                ("policed", p.drop_policed.to_string()),
            ] {
                let _ = writeln!(s, "  {:<13}{v}", format!("{k}:"));
            }
            s
        }
        Reply::WrittenBack { path, groups } => {
            format!("{path}: written back, {groups} group(s)\n")
        }
    }
}
