//! Per-barrier records: when this leaf first sent its reduce and when the release came, both on
//! CLOCK_MONOTONIC, so records of leaves on one host line up (a release before another leaf's
//! first reduce would show a barrier released too early). Written as CSV or JSON lines.

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
    /// CLOCK_MONOTONIC nanoseconds when the release was received.
    pub release_ns: u64,
    /// How many times the reduce was re-sent.
    pub resends: u32,
}

impl Record {
    /// Time from the first reduce to the release, in nanoseconds.
    pub fn latency_ns(&self) -> u64 {
        self.release_ns.saturating_sub(self.first_reduce_ns)
    }
}

/// The two file formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    /// A header line `group,seq,first_reduce_ns,release_ns,resends`, then one line a record.
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

/// Where records go. Write errors are kept and reported by [`RecordSink::flush`], so a full
/// disk does not interrupt barriers.
pub struct RecordSink {
    out: io::BufWriter<Box<dyn Write + Send>>,
    format: RecordFormat,
    error: Option<io::Error>,
}

/// The CSV header line (without newline).
pub const CSV_HEADER: &str = "group,seq,first_reduce_ns,release_ns,resends";

impl RecordSink {
    /// Records to `out` in `format` (a CSV header is written at once).
    pub fn new(out: Box<dyn Write + Send>, format: RecordFormat) -> RecordSink {
        let mut s = RecordSink {
            out: io::BufWriter::new(out),
            format,
            error: None,
        };
        if format == RecordFormat::Csv {
            let r = writeln!(s.out, "{CSV_HEADER}");
            s.keep(r);
        }
        s
    }

    /// Records to a new file at `path`, the format chosen by its extension.
    pub fn create(path: &std::path::Path) -> io::Result<RecordSink> {
        let f = std::fs::File::create(path)?;
        Ok(RecordSink::new(Box::new(f), RecordFormat::from_path(path)))
    }

    /// Appends one record.
    pub fn write(&mut self, r: &Record) {
        let res = match self.format {
            RecordFormat::Csv => writeln!(
                self.out,
                "{},{},{},{},{}",
                r.group, r.seq, r.first_reduce_ns, r.release_ns, r.resends
            ),
            RecordFormat::JsonLines => serde_json::to_writer(&mut self.out, r)
                .map_err(io::Error::other)
                .and_then(|_| self.out.write_all(b"\n")),
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

/// Parses records written in either format (the CSV header line is skipped).
pub fn parse_records(text: &str) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line == CSV_HEADER {
            continue;
        }
        if line.starts_with('{') {
            out.push(serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?);
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 5 {
            return Err(format!(
                "line {}: expected 5 fields, got {}",
                i + 1,
                f.len()
            ));
        }
        let bad = |e: std::num::ParseIntError| format!("line {}: {e}", i + 1);
        out.push(Record {
            group: f[0].parse().map_err(bad)?,
            seq: f[1].parse().map_err(bad)?,
            first_reduce_ns: f[2].parse().map_err(bad)?,
            release_ns: f[3].parse().map_err(bad)?,
            resends: f[4].parse().map_err(bad)?,
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
        },
        Record {
            group: 7,
            seq: 1,
            first_reduce_ns: 300,
            release_ns: 1300,
            resends: 2,
        },
    ];

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
