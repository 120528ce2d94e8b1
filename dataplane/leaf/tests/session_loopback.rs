//! `Session` against a one-switch tree (`barrier_testbed::mini_root`) on the in-memory loopback
//! transport: barriers in order, lost reduces and releases recovered, timeouts, interrupts,
//! several groups on one event loop, foreign frames ignored.

use barrier_leaf::transport::loopback::{self, Hub, Port};
use barrier_leaf::Transport;
use barrier_leaf::{now, Config, Error, Record, RecordFormat, RecordSink, Session, Stats};
use barrier_protocol::wire::Flags;
use barrier_protocol::wire::{FrameRepr, Kind, MacAddr, FRAME_LEN};
use barrier_protocol::{GroupId, Seq, MAX_GROUPS};
use barrier_testbed::mini_root::{MiniRoot, StopOnDrop};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type LeafFn<'a, R> = Box<dyn FnOnce() -> R + Send + 'a>;

fn cfg() -> Config {
    Config {
        resend_timeout: Duration::from_micros(500),
        wait_timeout: Duration::from_secs(5),
        ..Config::default()
    }
}

/// Runs `leaves` with a root serving `hub` on another thread; returns their results.
fn with_root<R: Send>(
    mut root: MiniRoot,
    hub: Hub,
    leaves: Vec<LeafFn<'_, R>>,
) -> (Vec<R>, MiniRoot) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop = &stop;
        let server = s.spawn(move || {
            root.serve_hub(&hub, stop);
            root
        });
        let _stop_guard = StopOnDrop(stop);
        let handles: Vec<_> = leaves.into_iter().map(|f| s.spawn(f)).collect();
        let out = handles
            .into_iter()
            .map(|h| h.join().expect("leaf thread"))
            .collect();
        stop.store(true, Ordering::Relaxed);
        (out, server.join().expect("root thread"))
    })
}

fn root_for(group: u32, n: u8) -> MiniRoot {
    let mut root = MiniRoot::new(MacAddr([2, 0, 0, 0, 0, 0xee]));
    root.add_group(group, &(0..n).collect::<Vec<_>>());
    root
}

fn run_leaf(port: Port, group: u32, count: usize, cfg: Config) -> (Vec<Record>, Stats) {
    let mut leaf = Session::new(port, cfg, &[group]).unwrap();
    let recs = (0..count).map(|_| leaf.wait(group).unwrap()).collect();
    (recs, leaf.stats())
}

/// No leaf's release of a barrier comes before any leaf's first reduce of it.
fn assert_no_early_release(all: &[Vec<Record>]) {
    let n = all[0].len();
    for i in 0..n {
        let last_arrival = all.iter().map(|r| r[i].first_reduce_ns).max().unwrap();
        for r in all {
            assert!(
                r[i].release_ns >= last_arrival,
                "barrier {i}: released at {} before an arrival at {last_arrival}",
                r[i].release_ns
            );
        }
    }
}

#[test]
fn three_leaves_complete_barriers_in_order() {
    let (ports, hub) = loopback::star(3);
    let leaves = ports
        .into_iter()
        .map(|p| Box::new(move || run_leaf(p, 7, 50, cfg())) as LeafFn<'_, (Vec<Record>, Stats)>)
        .collect();
    let (out, root) = with_root(root_for(7, 3), hub, leaves);
    let recs: Vec<Vec<Record>> = out.iter().map(|(r, _)| r.clone()).collect();
    for (r, stats) in &out {
        assert_eq!(
            r.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (0..50).collect::<Vec<_>>()
        );
        assert!(r
            .iter()
            .all(|r| r.group == 7 && r.release_ns >= r.first_reduce_ns));
        assert_eq!((stats.reduces, stats.releases), (50, 50));
    }
    assert_no_early_release(&recs);
    assert_eq!(root.completed, 50);
}

#[test]
fn lost_reduces_are_re_sent_until_released() {
    let (mut ports, hub) = loopback::star(2);
    // Leaf 0 loses the first copy of every reduce: only re-sends get through.
    ports[0].set_filter(Box::new(|f| {
        FrameRepr::parse(f).is_ok_and(|r| r.flags.contains(Flags::RETRANSMIT))
    }));
    let leaves = ports
        .into_iter()
        .map(|p| Box::new(move || run_leaf(p, 1, 20, cfg())) as LeafFn<'_, (Vec<Record>, Stats)>)
        .collect();
    let (out, _) = with_root(root_for(1, 2), hub, leaves);
    let (lossy, stats) = &out[0];
    assert!(lossy.iter().all(|r| r.resends >= 1), "{lossy:?}");
    assert!(stats.resends >= 20);
    assert_eq!(stats.releases, 20);
    assert_no_early_release(&[out[0].0.clone(), out[1].0.clone()]);
}

#[test]
fn lost_releases_are_recovered_by_the_re_sent_reduce() {
    let (ports, hub) = loopback::star(2);
    let mut root = root_for(3, 2);
    // The first release of every even barrier is lost on the way to every leaf: only the
    // release the root re-sends when a stale reduce comes in gets through.
    root.set_release_filter(Box::new(|f| {
        let r = FrameRepr::parse(f).unwrap();
        r.seq.0 % 2 == 1 || r.flags.contains(Flags::RETRANSMIT)
    }));
    let leaves = ports
        .into_iter()
        .map(|p| Box::new(move || run_leaf(p, 3, 10, cfg())) as LeafFn<'_, (Vec<Record>, Stats)>)
        .collect();
    let (out, root) = with_root(root, hub, leaves);
    for (recs, stats) in &out {
        assert_eq!(recs.len(), 10);
        assert!(stats.resends > 0, "{stats:?}");
    }
    assert_eq!(root.completed, 10);
    assert!(root.reduces > 20, "stale reduces reached the root");
}

#[test]
fn wait_times_out_naming_group_and_seq_and_can_go_on_waiting() {
    let (mut ports, hub) = loopback::star(1);
    let cfg = Config {
        resend_timeout: Duration::from_millis(2),
        wait_timeout: Duration::from_millis(30),
        ..cfg()
    };
    let mut leaf = Session::new(ports.remove(0), cfg, &[9]).unwrap();
    let err = leaf.wait(9).unwrap_err();
    match &err {
        Error::Timeout {
            group,
            seq,
            waited,
            resends,
        } => {
            assert_eq!((*group, *seq), (9, 0));
            assert!(*waited >= Duration::from_millis(30));
            assert!(*resends >= 1, "the reduce was re-sent while waiting");
        }
        other => panic!("expected a timeout, got {other}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("group 9") && msg.contains("seq 0"), "{msg}");
    assert!(leaf.is_waiting(9).unwrap());
    assert!(matches!(
        leaf.try_wait(9),
        Err(Error::Timeout {
            group: 9,
            seq: 0,
            ..
        })
    ));

    // The switch shows up late: the next re-sent reduce completes the barrier.
    let mut root = root_for(9, 1);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (hub, root, stop) = (hub, &mut root, &stop);
        s.spawn(move || root.serve_hub(&hub, stop));
        let _stop_guard = StopOnDrop(stop);
        let rec = leaf.wait(9).expect("released once a switch answers");
        assert_eq!((rec.group, rec.seq), (9, 0));
        assert!(rec.resends >= 1);
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(leaf.seq(9).unwrap(), Seq(1));
}

/// Issue 21: a second run on the group, in the epoch a first run of ten barriers used. The root
/// answers each reduce 0 with release 9: `wait` ends within a few re-send periods with
/// `Error::EpochInUse` (not the 5 s timeout), nothing is released, and the error is final.
#[test]
fn a_second_run_in_the_same_epoch_fails_fast_with_epoch_in_use() {
    let (mut ports, hub) = loopback::star(1);
    let mut root = root_for(7, 1);
    let stop = AtomicBool::new(false);
    let cfg = Config {
        resend_timeout: Duration::from_millis(2),
        ..cfg()
    };
    std::thread::scope(|s| {
        let (hub, root, stop) = (hub, &mut root, &stop);
        s.spawn(move || root.serve_hub(&hub, stop));
        let _stop_guard = StopOnDrop(stop);
        let mut first = Session::new(ports.remove(0), cfg.clone(), &[7]).unwrap();
        for seq in 0..10 {
            assert_eq!(first.wait(7).unwrap().seq, seq);
        }
        // The next job opens the group again, in the same epoch, from seq 0.
        let mut second = Session::new(first.into_transport(), cfg.clone(), &[7]).unwrap();
        let started = std::time::Instant::now();
        let err = second.wait(7).unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(
                err,
                Error::EpochInUse {
                    group: 7,
                    epoch: 1,
                    seq: 0,
                    answered: 9
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "group 7 epoch 1: the switch answers barrier 0 with the release of barrier 9: the \
             group was used by an earlier run in this epoch; reset the group's run on every \
             switch of its tree (barrierctl reset PLAN, or barrierctl group reset 7 on each \
             switch, root first) and open the leaves with the new epoch (Config::epoch, \
             barrier_leaf_options.epoch, barrier-leaf --epoch E)"
        );
        // three answers: the first reduce's and two re-sends' (2 ms each), far below 5 s
        assert!(took < Duration::from_secs(1), "{took:?}");
        let st = second.stats();
        assert_eq!(st.releases, 0, "nothing released: {st:?}");
        assert!(st.resends >= 2, "{st:?}");
        assert_eq!(second.seq(7).unwrap(), Seq(0));
        assert!(!second.is_waiting(7).unwrap(), "no more re-sends");
        // final for the epoch, whichever way the next barrier is tried
        assert!(matches!(second.arrive(7), Err(Error::EpochInUse { .. })));
        assert!(matches!(second.try_wait(7), Err(Error::EpochInUse { .. })));
        assert!(matches!(second.wait(7), Err(Error::EpochInUse { .. })));
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(root.completed, 10, "the second run completed nothing");
}

#[test]
fn a_set_interrupt_flag_ends_wait_naming_group_and_seq() {
    let (mut ports, _hub) = loopback::star(1);
    let mut leaf = Session::new(ports.remove(0), cfg(), &[4]).unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    leaf.set_interrupt_flag(Arc::clone(&flag));
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            flag.store(true, Ordering::Relaxed);
        });
        // The wait timeout is 5 s: only the flag can end this wait early.
        let err = leaf.wait(4).unwrap_err();
        assert!(
            matches!(err, Error::Interrupted { group: 4, seq: 0 }),
            "{err}"
        );
    });
    assert!(leaf.is_waiting(4).unwrap(), "still at the barrier");
}

#[test]
fn one_event_loop_drives_several_groups() {
    let (mut ports, hub) = loopback::star(1);
    let mut root = MiniRoot::new(MacAddr::default());
    for g in [1, 2, 3] {
        root.add_group(g, &[0]);
    }
    let mut leaf = Session::new(ports.remove(0), cfg(), &[1, 2, 3]).unwrap();
    assert_eq!(leaf.groups().collect::<Vec<_>>(), vec![1, 2, 3]);
    assert!(matches!(leaf.arrive(4), Err(Error::UnknownGroup(4))));
    assert!(matches!(leaf.add_group(2), Err(Error::GroupAlreadyOpen(2))));
    assert!(matches!(
        leaf.add_group(MAX_GROUPS),
        Err(Error::GroupOutOfRange(_))
    ));

    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (hub, root, stop) = (hub, &mut root, &stop);
        s.spawn(move || root.serve_hub(&hub, stop));
        let _stop_guard = StopOnDrop(stop);
        for round in 0..5u32 {
            for g in [1, 2, 3] {
                leaf.arrive(g).unwrap();
            }
            let e = leaf.arrive(2).unwrap_err();
            assert!(e.to_string().contains(&format!("seq {round}")), "{e}");
            let mut got = Vec::new();
            while got.len() < 3 {
                got.extend(leaf.poll_for(Duration::from_millis(10)).unwrap());
            }
            got.sort_by_key(|r| r.group);
            assert_eq!(
                got.iter().map(|r| (r.group, r.seq)).collect::<Vec<_>>(),
                vec![(1, round), (2, round), (3, round)]
            );
            assert!(
                leaf.poll().unwrap().is_empty(),
                "each release is handed out once"
            );
        }
        // try_wait arrives by itself and hands out the record once.
        let rec = loop {
            if let Some(r) = leaf.try_wait(2).unwrap() {
                break r;
            }
            std::thread::sleep(Duration::from_micros(100));
        };
        assert_eq!((rec.group, rec.seq), (2, 5));
        stop.store(true, Ordering::Relaxed);
    });
    assert_eq!(leaf.stats().releases, 16);
    assert_eq!(leaf.seq(1).unwrap(), Seq(5));
    assert_eq!(leaf.seq(2).unwrap(), Seq(6));
}

#[test]
fn frames_not_for_this_leaf_are_counted_and_ignored() {
    let (mut ports, hub) = loopback::star(1);
    let mut leaf = Session::new(ports.remove(0), cfg(), &[5]).unwrap();
    leaf.arrive(5).unwrap();
    let (_, reduce) = hub.recv(Duration::from_secs(1)).unwrap();
    let frame = |kind, group, seq| {
        let r = FrameRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr::default(),
            kind,
            flags: Flags::empty(),
            group: GroupId(group),
            epoch: barrier_protocol::Epoch::DEFAULT,
            seq: Seq(seq),
            tx_timestamp: None,
        };
        let mut b = [0u8; FRAME_LEN];
        r.emit(&mut b);
        hub.send(0, &b);
    };
    frame(Kind::Release, 6, 0); // another group
    frame(Kind::Reduce, 5, 0); // not a release
    frame(Kind::Release, 5, 1); // a later barrier: not this one
    hub.send(0, &reduce[..20]); // truncated
    hub.send(
        0,
        b"garbage garbage garbage garbage garbage garbage garbage garbage",
    );
    assert!(leaf.poll().unwrap().is_empty());
    let st = leaf.stats();
    assert_eq!(
        (st.foreign_frames, st.stale_releases, st.bad_frames),
        (2, 1, 2),
        "{st:?}"
    );
    frame(Kind::Release, 5, 0);
    let got = leaf.poll_for(Duration::from_secs(1)).unwrap();
    assert_eq!(got.len(), 1);
    frame(Kind::Release, 5, 0); // a duplicate
    assert!(leaf.poll_for(Duration::from_millis(5)).unwrap().is_empty());
    assert_eq!(leaf.stats().stale_releases, 2);
}

#[test]
fn reduces_carry_group_seq_source_and_chosen_destination() {
    let (mut ports, hub) = loopback::star(1);
    let port = ports.remove(0);
    let src = port.mac();
    let dst = MacAddr([2, 0, 0, 0, 0, 0x42]);
    let c = Config {
        dst,
        timestamps: true,
        first_seq: Seq(u32::MAX),
        ..cfg()
    };
    let mut leaf = Session::new(port, c, &[11]).unwrap();
    let before = now().nanos();
    leaf.arrive(11).unwrap();
    let (p, bytes) = hub.recv(Duration::from_secs(1)).unwrap();
    let r = FrameRepr::parse(&bytes).unwrap();
    assert_eq!(p, 0);
    assert_eq!(bytes.len(), FRAME_LEN);
    assert_eq!(
        (r.kind, r.group, r.seq, r.src, r.dst),
        (Kind::Reduce, GroupId(11), Seq(u32::MAX), src, dst)
    );
    assert!(r.flags.contains(Flags::HAS_TIMESTAMP) && !r.flags.contains(Flags::RETRANSMIT));
    assert!(r.tx_timestamp.unwrap() >= before);
    // The re-send after the timer carries RETRANSMIT.
    let (_, bytes) = loop {
        leaf.poll_for(Duration::from_millis(1)).unwrap();
        if let Some(f) = hub.recv(Duration::ZERO) {
            break f;
        }
    };
    let r = FrameRepr::parse(&bytes).unwrap();
    assert!(r.flags.contains(Flags::RETRANSMIT));
    assert_eq!(r.seq, Seq(u32::MAX));
}

#[test]
fn records_go_to_the_sink() {
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl io::Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let buf = Shared::default();
    let (mut ports, hub) = loopback::star(1);
    let port = ports.remove(0);
    let sink_buf = buf.clone();
    let leaves = vec![Box::new(move || {
        let mut leaf = Session::new(port, cfg(), &[2]).unwrap();
        leaf.set_record_sink(RecordSink::new(Box::new(sink_buf), RecordFormat::Csv));
        let recs: Vec<Record> = (0..4).map(|_| leaf.wait(2).unwrap()).collect();
        leaf.flush_records().unwrap();
        recs
    }) as LeafFn<'_, Vec<Record>>];
    let (out, _) = with_root(root_for(2, 1), hub, leaves);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert_eq!(barrier_leaf::records::parse_records(&text).unwrap(), out[0]);
}

/// A port whose link is "down" for its first `down_sends` sends: they fail with ENETDOWN, as an
/// AF_PACKET socket's do on an interface set down (`ip link set ... down`).
struct FlappingPort {
    port: Port,
    down_sends: u32,
}

impl Transport for FlappingPort {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        if self.down_sends > 0 {
            self.down_sends -= 1;
            return Err(io::Error::from_raw_os_error(100)); // ENETDOWN
        }
        self.port.send(frame)
    }
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        self.port.recv(buf, timeout)
    }
    fn mac(&self) -> MacAddr {
        self.port.mac()
    }
}

#[test]
fn a_link_down_loses_frames_and_the_barrier_completes_when_it_is_up() {
    let (ports, hub) = loopback::star(2);
    let mut ports = ports.into_iter();
    let (a, b) = (ports.next().unwrap(), ports.next().unwrap());
    let leaves: Vec<LeafFn<'_, (Vec<Record>, Stats)>> = vec![
        Box::new(move || {
            let port = FlappingPort {
                port: a,
                down_sends: 3,
            };
            let mut leaf = Session::new(port, cfg(), &[9]).unwrap();
            let recs = (0..5).map(|_| leaf.wait(9).unwrap()).collect();
            (recs, leaf.stats())
        }),
        Box::new(move || run_leaf(b, 9, 5, cfg())),
    ];
    let (out, _) = with_root(root_for(9, 2), hub, leaves);
    let (recs, stats) = &out[0];
    assert_eq!(recs.len(), 5);
    assert_eq!(stats.link_errors, 3, "{stats:?}");
    assert!(stats.resends >= 3, "{stats:?}");
    assert_no_early_release(&[out[0].0.clone(), out[1].0.clone()]);
}
