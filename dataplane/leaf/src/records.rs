//! Per-barrier records: when this leaf first sent its reduce and when the release came, both on
//! CLOCK_MONOTONIC, so records of leaves on one host line up (a release before another leaf's
//! first reduce would show a barrier released too early). Written as CSV or JSON lines.
//!
//! Durability: by default each record goes to the kernel in one `write` of its whole line the
//! moment its barrier is released ([`Durability::PerRecord`]), so a leaf killed with SIGKILL
//! leaves a file that holds every barrier it completed, up to the last one, in whole lines (the
//! page cache outlives the process; a power cut is not covered: there is no fsync).
//! [`Durability::Buffered`] keeps records in a user-space buffer until [`RecordSink::flush`]
//! (what the leaf did before: a SIGKILL lost up to a buffer's worth, about 220 records, and cut
//! the file in half a line).
//!
//! A barrier the leaf arrived at but did not see released (a CLI leaf stopped by SIGINT or
//! SIGTERM while it waited, or whose `--duration` ran out there) can be written too
//! ([`Record::released`] false, [`RecordSink::write`] as for any record): its arrival is a fact
//! a checker uses (no leaf may be released from that barrier before it), its release is not
//! there (CSV: `release_ns` empty and `released` 0; JSON: `"release_ns": null, "released":
//! false`). Files written before the `released` column (five CSV columns, JSON objects without
//! the key) read back as all released.

use std::io::{self, Write};

/// One completed barrier as this leaf saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// The group.
    pub group: u32,
    /// The barrier's sequence number.
    pub seq: u32,
    /// CLOCK_MONOTONIC nanoseconds when the first reduce was sent.
    pub first_reduce_ns: u64,
    /// CLOCK_MONOTONIC nanoseconds when the release was received; 0 when not `released`.
    #[serde(
        serialize_with = "release_ns_ser",
        deserialize_with = "release_ns_de",
        default
    )]
    pub release_ns: u64,
    /// How many times the reduce was re-sent.
    pub resends: u32,
    /// False for a barrier this leaf arrived at (sent its reduce) but left before its release:
    /// stopped while waiting. Its `release_ns` is 0 and means nothing. Records without the
    /// field (files of earlier versions) are released ones.
    #[serde(default = "released_default")]
    pub released: bool,
}

fn released_default() -> bool {
    true
}

/// `release_ns` of a record not released is written as JSON `null`.
fn release_ns_ser<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    if *v == 0 {
        s.serialize_none()
    } else {
        s.serialize_u64(*v)
    }
}

fn release_ns_de<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(<Option<u64> as serde::Deserialize>::deserialize(d)?.unwrap_or(0))
}

impl Record {
    /// Time from the first reduce to the release, in nanoseconds (0 when not released).
    pub fn latency_ns(&self) -> u64 {
        if !self.released {
            return 0;
        }
        self.release_ns.saturating_sub(self.first_reduce_ns)
    }
}

/// The two file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    /// A header line `group,seq,first_reduce_ns,release_ns,resends,released`, then one line a
    /// record (`released` 1 or 0; a record not released has `release_ns` empty).
    Csv,
    /// One JSON object a line, with the same field names.
    JsonLines,
}

impl RecordFormat {
    /// JSON lines for a path ending in `.json` or `.jsonl`, CSV otherwise.
    pub fn from_path(path: &std::path::Path) -> RecordFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") | Some("jsonl") => RecordFormat::JsonLines,
            _ => RecordFormat::Csv,
        }
    }
}

/// When a record reaches the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// One `write` of the whole line per record, at the barrier's release: a killed leaf's file
    /// ends at its last completed barrier, in whole lines.
    #[default]
    PerRecord,
    /// Through an 8 KiB user-space buffer, written when full and at [`RecordSink::flush`]:
    /// fewer system calls, but a killed leaf loses the buffer.
    Buffered,
}

/// Where records go. Write errors are kept and reported by [`RecordSink::flush`], so a full
/// disk does not interrupt barriers.
pub struct RecordSink {
    out: io::BufWriter<Box<dyn Write + Send>>,
    format: RecordFormat,
    durability: Durability,
    /// One record's line, built here and handed to the kernel whole ([`Durability::PerRecord`]).
    line: Vec<u8>,
    error: Option<io::Error>,
}

/// The CSV header line (without newline).
pub const CSV_HEADER: &str = "group,seq,first_reduce_ns,release_ns,resends,released";

/// The CSV header of files written before the `released` column (still read).
pub const CSV_HEADER_V1: &str = "group,seq,first_reduce_ns,release_ns,resends";

impl RecordSink {
    /// Records to `out` in `format`, each written through at once ([`Durability::PerRecord`]);
    /// a CSV header is written at once.
    pub fn new(out: Box<dyn Write + Send>, format: RecordFormat) -> RecordSink {
        RecordSink::with_durability(out, format, Durability::PerRecord)
    }

    /// Records to `out` in `format`, reaching `out` as `durability` says.
    pub fn with_durability(
        out: Box<dyn Write + Send>,
        format: RecordFormat,
        durability: Durability,
    ) -> RecordSink {
        let mut s = RecordSink {
            out: io::BufWriter::new(out),
            format,
            durability,
            line: Vec::with_capacity(128),
            error: None,
        };
        if format == RecordFormat::Csv {
            s.line.extend_from_slice(CSV_HEADER.as_bytes());
            s.line.push(b'\n');
            s.emit();
        }
        s
    }

    /// Records to a new file at `path`, the format chosen by its extension, each written
    /// through at once ([`Durability::PerRecord`]).
    pub fn create(path: &std::path::Path) -> io::Result<RecordSink> {
        RecordSink::create_with(path, Durability::PerRecord)
    }

    /// Records to a new file at `path`, the format chosen by its extension.
    pub fn create_with(path: &std::path::Path, durability: Durability) -> io::Result<RecordSink> {
        let f = std::fs::File::create(path)?;
        Ok(RecordSink::with_durability(
            Box::new(f),
            RecordFormat::from_path(path),
            durability,
        ))
    }

    /// Appends one record; with [`Durability::PerRecord`] its line reaches the writer (the
    /// kernel, for a file) before this returns, in one `write` call when the writer takes it
    /// whole (a regular file does).
    pub fn write(&mut self, r: &Record) {
        self.line.clear();
        let res = match self.format {
            RecordFormat::Csv if r.released => writeln!(
                self.line,
                "{},{},{},{},{},1",
                r.group, r.seq, r.first_reduce_ns, r.release_ns, r.resends
            ),
            RecordFormat::Csv => writeln!(
                self.line,
                "{},{},{},,{},0",
                r.group, r.seq, r.first_reduce_ns, r.resends
            ),
            RecordFormat::JsonLines => serde_json::to_writer(&mut self.line, r)
                .map_err(io::Error::other)
                .map(|_| self.line.push(b'\n')),
        };
        self.keep(res);
        self.emit();
    }

    /// Hands the built line on: to the buffer, and with [`Durability::PerRecord`] through it.
    fn emit(&mut self) {
        let res = match self.durability {
            // The buffer is empty here (every earlier line went through), so BufWriter passes a
            // line of at least its capacity straight on, and a shorter one is copied and
            // written by the flush: one write of the whole line either way.
            Durability::PerRecord => self
                .out
                .write_all(&self.line)
                .and_then(|_| self.out.flush()),
            Durability::Buffered => self.out.write_all(&self.line),
        };
        self.keep(res);
    }

    /// Flushes; returns the first error any write met.
    pub fn flush(&mut self) -> io::Result<()> {
        let r = self.out.flush();
        self.keep(r);
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn keep(&mut self, r: io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }
}

impl Drop for RecordSink {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

/// Parses records written in either format (the CSV header line is skipped), of this version
/// (with `released`) or the one before (five CSV columns, JSON without `released`: all
/// released).
pub fn parse_records(text: &str) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line == CSV_HEADER || line == CSV_HEADER_V1 {
            continue;
        }
        if line.starts_with('{') {
            let r: Record =
                serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
            if r.released && r.release_ns == 0 {
                return Err(format!("line {}: released without a release_ns", i + 1));
            }
            out.push(r);
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 5 && f.len() != 6 {
            return Err(format!(
                "line {}: expected 5 or 6 fields, got {}",
                i + 1,
                f.len()
            ));
        }
        let bad = |e: std::num::ParseIntError| format!("line {}: {e}", i + 1);
        let released = match f.get(5) {
            None | Some(&"1") => true,
            Some(&"0") => false,
            Some(other) => {
                return Err(format!("line {}: released is {other:?}, not 0 or 1", i + 1))
            }
        };
        let release_ns = match (released, f[3]) {
            (false, "") => 0,
            (false, _) => {
                return Err(format!(
                    "line {}: not released but release_ns {:?}",
                    i + 1,
                    f[3]
                ))
            }
            (true, v) => v.parse().map_err(bad)?,
        };
        out.push(Record {
            group: f[0].parse().map_err(bad)?,
            seq: f[1].parse().map_err(bad)?,
            first_reduce_ns: f[2].parse().map_err(bad)?,
            release_ns,
            resends: f[4].parse().map_err(bad)?,
            released,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A writer whose bytes the test can read after the sink is gone.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct Full;
    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::other("disk full"))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::other("disk full"))
        }
    }

    const RECS: [Record; 2] = [
        Record {
            group: 7,
            seq: 0,
            first_reduce_ns: 100,
            release_ns: 250,
            resends: 0,
            released: true,
        },
        Record {
            group: 7,
            seq: 1,
            first_reduce_ns: 300,
            release_ns: 1300,
            resends: 2,
            released: true,
        },
    ];

    /// A barrier the leaf arrived at and left unreleased (stopped while waiting).
    const WAITING: Record = Record {
        group: 7,
        seq: 2,
        first_reduce_ns: 1400,
        release_ns: 0,
        resends: 1,
        released: false,
    };

    #[test]
    fn a_record_not_released_round_trips_in_both_formats() {
        for format in [RecordFormat::Csv, RecordFormat::JsonLines] {
            let buf = Shared::default();
            let mut sink = RecordSink::new(Box::new(buf.clone()), format);
            for r in RECS.iter().chain([&WAITING]) {
                sink.write(r);
            }
            sink.flush().unwrap();
            let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
            let last = text.lines().last().unwrap();
            match format {
                RecordFormat::Csv => assert_eq!(last, "7,2,1400,,1,0"),
                RecordFormat::JsonLines => {
                    assert!(
                        last.contains("\"release_ns\":null") && last.contains("\"released\":false"),
                        "{last}"
                    )
                }
            }
            let mut want = RECS.to_vec();
            want.push(WAITING);
            assert_eq!(parse_records(&text).unwrap(), want, "{format:?}");
            assert_eq!(WAITING.latency_ns(), 0);
        }
    }

    #[test]
    fn files_of_the_previous_version_read_as_released() {
        let csv = "group,seq,first_reduce_ns,release_ns,resends\n7,0,100,250,0\n7,1,300,1300,2\n";
        assert_eq!(parse_records(csv).unwrap(), RECS.to_vec());
        let json = "{\"group\":7,\"seq\":0,\"first_reduce_ns\":100,\"release_ns\":250,\"resends\":0}\n\
                    {\"group\":7,\"seq\":1,\"first_reduce_ns\":300,\"release_ns\":1300,\"resends\":2}\n";
        assert_eq!(parse_records(json).unwrap(), RECS.to_vec());
        // Contradictions are refused, not guessed at.
        assert!(parse_records("7,2,1400,1500,1,0\n").is_err());
        assert!(parse_records("7,2,1400,,1,1\n").is_err());
        assert!(parse_records("7,2,1400,1500,1,2\n").is_err());
        assert!(parse_records(
            "{\"group\":7,\"seq\":0,\"first_reduce_ns\":100,\"release_ns\":null,\"resends\":0}\n"
        )
        .is_err());
    }

    #[test]
    fn both_formats_round_trip() {
        for format in [RecordFormat::Csv, RecordFormat::JsonLines] {
            let buf = Shared::default();
            let mut sink = RecordSink::new(Box::new(buf.clone()), format);
            for r in &RECS {
                sink.write(r);
            }
            sink.flush().unwrap();
            let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
            assert_eq!(
                text.lines().count(),
                if format == RecordFormat::Csv { 3 } else { 2 },
                "{text}"
            );
            assert_eq!(parse_records(&text).unwrap(), RECS.to_vec(), "{format:?}");
        }
    }

    /// A writer that logs each `write` call it gets, to see what reaches the kernel when.
    #[derive(Clone, Default)]
    struct Calls(Arc<Mutex<Vec<Vec<u8>>>>);
    impl Write for Calls {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().push(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn per_record_durability_writes_each_whole_line_at_once() {
        for format in [RecordFormat::Csv, RecordFormat::JsonLines] {
            let calls = Calls::default();
            let mut sink = RecordSink::new(Box::new(calls.clone()), format);
            let header = usize::from(format == RecordFormat::Csv);
            assert_eq!(calls.0.lock().unwrap().len(), header, "{format:?}");
            for (i, r) in RECS.iter().enumerate() {
                sink.write(r);
                // Before the next record: this record's line went out, whole, in one call.
                let got = calls.0.lock().unwrap().clone();
                assert_eq!(got.len(), header + i + 1, "{format:?}");
                let line = String::from_utf8(got.last().unwrap().clone()).unwrap();
                assert!(
                    line.ends_with('\n') && line.matches('\n').count() == 1,
                    "{line:?}"
                );
                assert_eq!(parse_records(&line).unwrap(), vec![*r]);
            }
            // Nothing was held back for the flush.
            std::mem::forget(sink);
            let all: Vec<u8> = calls.0.lock().unwrap().concat();
            let text = String::from_utf8(all).unwrap();
            assert_eq!(parse_records(&text).unwrap(), RECS.to_vec(), "{format:?}");
        }
    }

    #[test]
    fn buffered_durability_holds_records_until_flush() {
        let calls = Calls::default();
        let mut sink = RecordSink::with_durability(
            Box::new(calls.clone()),
            RecordFormat::Csv,
            Durability::Buffered,
        );
        for r in &RECS {
            sink.write(r);
        }
        assert!(calls.0.lock().unwrap().is_empty());
        sink.flush().unwrap();
        let text = String::from_utf8(calls.0.lock().unwrap().concat()).unwrap();
        assert_eq!(parse_records(&text).unwrap(), RECS.to_vec());
    }

    #[test]
    fn write_errors_surface_at_flush() {
        let mut sink = RecordSink::new(Box::new(Full), RecordFormat::JsonLines);
        for _ in 0..1000 {
            sink.write(&RECS[0]);
        }
        assert!(sink.flush().unwrap_err().to_string().contains("disk full"));
    }

    #[test]
    fn format_follows_extension_and_garbage_is_rejected() {
        use std::path::Path;
        assert_eq!(
            RecordFormat::from_path(Path::new("r.jsonl")),
            RecordFormat::JsonLines
        );
        assert_eq!(
            RecordFormat::from_path(Path::new("r.json")),
            RecordFormat::JsonLines
        );
        assert_eq!(
            RecordFormat::from_path(Path::new("r.csv")),
            RecordFormat::Csv
        );
        assert_eq!(RecordFormat::from_path(Path::new("r")), RecordFormat::Csv);
        assert!(parse_records("1,2,3\n").is_err());
        assert!(parse_records("1,2,x,4,5\n").is_err());
        assert_eq!(RECS[1].latency_ns(), 1000);
    }
}
