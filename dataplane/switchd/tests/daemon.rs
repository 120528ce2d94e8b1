//! barrier-switch run as a daemon is run (docs/operations.md, "Running as a service"): stderr to
//! a file gets no colour and a timestamp on every log record; under systemd's `Type=notify`,
//! `READY=1` reaches `$NOTIFY_SOCKET` (a path, or an abstract `@name`) once the ready line is
//! out, and `STOPPING=1` at the stop; the refusals a new user meets say what is wrong (EAL
//! arguments without `--`, a misspelt driver, no permission for a packet socket). Real
//! processes on net_ring ports (DPDK without hugepages: root not needed for those).

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_barrier-switch");

/// A one-switch root on two net_ring ports; `port_b` is the second port's vdev spec.
fn config(dir: &Path, tag: &str, port_b: &str) -> PathBuf {
    let path = dir.join(format!("{tag}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[eal]
args = ["--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "nb-daemon-{pid}-{tag}",
        "--no-pci", "--iova-mode=va", "--no-telemetry", "-l", "0,1"]

[[ports]]
name = "a"
vdev = "net_ring0"

[[ports]]
name = "b"
vdev = "{port_b}"

[lcores]
scheduler = 1
rx = [ {{ lcore = 0, poll = ["a", "b"] }} ]
idle = "sleep"

[[groups]]
number = 5
role = "root"
children = ["a", "b"]

[control]
socket = "{sock}"
"#,
            pid = std::process::id(),
            sock = dir
                .join("run/netbarrier")
                .join(format!("{tag}.sock"))
                .display(),
        ),
    )
    .unwrap();
    path
}

/// `barrier-switch run --config CFG` with stderr to the file `err` (not a terminal).
fn spawn(cfg: &Path, err: &Path, notify: Option<&str>) -> Child {
    let mut c = Command::new(BIN);
    c.args(["run", "--config"])
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).unwrap())
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM");
    if let Some(n) = notify {
        c.env("NOTIFY_SOCKET", n);
    }
    c.spawn().unwrap()
}

fn wait_for(file: &Path, what: &str, child: &mut Child) -> String {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.contains(what) {
            return text;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the switch exited ({st}) before {what:?}:\n{text}");
        }
        assert!(Instant::now() < until, "no {what:?} in:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop(mut child: Child) {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}");
}

/// `2026-12-04T17:12:42.258269Z  INFO ...`
fn stamped(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 28
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && line[..27].ends_with('Z')
        && line[..4].bytes().all(|c| c.is_ascii_digit())
}

#[test]
fn a_log_file_gets_timestamps_and_no_colour() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "log", "net_ring1");
    let err = dir.path().join("stderr.log");
    let mut child = spawn(&cfg, &err, None);
    wait_for(&err, "barrier-switch: ready", &mut child);
    stop(child);
    let text = std::fs::read(&err).unwrap();
    assert!(
        !text.contains(&0x1b),
        "ESC in a log file:\n{}",
        String::from_utf8_lossy(&text)
    );
    let text = String::from_utf8(text).unwrap();
    // Every log record (tracing's; EAL's own lines and the ready line are not records) starts
    // with its time.
    let records: Vec<&str> = text
        .lines()
        .filter(|l| {
            [" INFO ", " WARN ", " ERROR "]
                .iter()
                .any(|k| l.contains(k))
        })
        .collect();
    assert!(
        records.len() >= 3,
        "the switch's info records are missing:\n{text}"
    );
    for r in &records {
        assert!(stamped(r), "a record without its time: {r:?}\n{text}");
    }
}

/// Waits for one datagram on `rx`.
fn recv(rx: &UnixDatagram) -> String {
    rx.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut buf = [0u8; 256];
    let n = rx.recv(&mut buf).expect("no datagram on the notify socket");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn ready_then_stopping(rx: &UnixDatagram, notify: &str, tag: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), tag, "net_ring1");
    let err = dir.path().join("stderr.log");
    let child = spawn(&cfg, &err, Some(notify));
    let msg = recv(rx);
    assert_eq!(msg, "READY=1");
    let text = std::fs::read_to_string(&err).unwrap();
    assert!(
        text.contains("barrier-switch: ready"),
        "READY=1 came before the ready line:\n{text}"
    );
    stop(child);
    assert_eq!(recv(rx), "STOPPING=1");
}

#[test]
fn ready_reaches_notify_socket_after_the_ready_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let rx = UnixDatagram::bind(&path).unwrap();
    ready_then_stopping(&rx, path.to_str().unwrap(), "notify-path");
}

#[cfg(target_os = "linux")]
#[test]
fn ready_reaches_an_abstract_notify_socket() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("nb-daemon-test-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let rx = UnixDatagram::bind_addr(&addr).unwrap();
    ready_then_stopping(&rx, &format!("@{name}"), "notify-abstract");
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

#[test]
fn eal_arguments_without_dashes_are_shown_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "usage", "net_ring1");
    let cfg = cfg.to_str().unwrap();
    let out = run(&["run", "-l", "0,1", "--config", cfg]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unexpected argument '-l'"), "{err}");
    assert!(
        err.contains("barrier-switch run [EAL args] -- --config <FILE>"),
        "{err}"
    );
    assert!(err.contains("EAL arguments come first"), "{err}");
    // The usage of `run --help` shows the EAL form too.
    let out = run(&["run", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("Usage: barrier-switch run [EAL args] -- --config <FILE>"),
        "{help}"
    );
    // The program's options before `--`, EAL's after: refused with the right order.
    let out = run(&["run", "--config", cfg, "--", "-l", "0,1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("EAL arguments come first, `barrier-switch run [EAL args] -- --config"),
        "{err}"
    );
    // The demo is not a subcommand (it is the test bed's barrier-demo): refused, and named.
    let out = run(&["demo", "--no-huge"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("barrier-demo [OPTIONS]"), "{err}");
}

#[test]
fn a_misspelt_driver_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "typo", "net_rnig1");
    let out = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no DPDK driver is called like \"net_rnig1\" (misspelt?"),
        "{err}"
    );
    assert!(!err.contains("log above"), "{err}");
}

/// Without CAP_NET_RAW (what a user who is not root lacks; here root with the capability
/// taken out of its bounding set, `setpriv`, so that nothing else differs) a packet port says
/// permission, not only "No such device".
#[test]
fn a_packet_port_without_cap_net_raw_says_permission() {
    if !nix_root() || Command::new("setpriv").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("NB_REQUIRE_ROOT").is_none_or(|v| v != "1"),
            "NB_REQUIRE_ROOT=1 but this test needs root and setpriv (util-linux)"
        );
        eprintln!("SKIP: needs root and setpriv (util-linux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "perm", "net_af_packet1,iface=lo");
    let out = Command::new("setpriv")
        .args([
            "--bounding-set=-net_raw",
            "--inh-caps=-net_raw",
            BIN,
            "run",
            "--config",
        ])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rte_vdev_init failed: Operation not permitted"),
        "{err}"
    );
    assert!(
        err.contains("no permission: interface \"lo\" exists")
            && err.contains("lacks CAP_NET_RAW (it is not root)"),
        "{err}"
    );
}

fn nix_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|v| v.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}

/// The CPUs thread `name` of process `pid` may run on (`Cpus_allowed_list` in /proc).
fn thread_cpus(pid: u32, name: &str) -> Option<String> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let status = std::fs::read_to_string(task.path().join("status")).ok()?;
            return status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string());
        }
    }
    None
}

/// `[management] cpus` puts the threads that are not lcores (the management thread with the
/// control socket, the metrics endpoint) on those CPUs, as the kernel sees them.
#[test]
fn management_threads_run_on_the_configured_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "cpus", "net_ring1");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text += "\n[management]\ncpus = [1]\n\n[metrics]\nlisten = \"127.0.0.1:0\"\n";
    std::fs::write(&cfg, text).unwrap();
    let err = dir.path().join("cpus.err");
    let mut child = spawn(&cfg, &err, None);
    let log = wait_for(&err, "barrier-switch: ready", &mut child);
    for thread in ["management", "metrics"] {
        assert!(
            log.contains(&format!("thread \"{thread}\" placed on CPU 1")),
            "{thread}:\n{log}"
        );
        assert_eq!(
            thread_cpus(child.id(), thread).as_deref(),
            Some("1"),
            "{thread}:\n{log}"
        );
    }
    // CPU 1 is also lcore 1's (the scheduler): the switch says so.
    assert!(log.contains("are polled by an lcore"), "{log}");
    stop(child);
}
