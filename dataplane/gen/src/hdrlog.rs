//! The hdrhistogram interval log (`--hdr-log FILE`): one histogram per second per latency kind,
//! written by the hdrhistogram crate's `IntervalLogWriter` on a thread of its own, so encoding
//! and file I/O never stall the generator's loop.

use barrier_runtime::affinity::ControlCores;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use std::io::Write;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

struct Interval {
    start: Duration,
    length: Duration,
    tag: String,
    hist: Histogram<u64>,
}

/// A running interval log writer.
pub struct HdrLog {
    tx: Option<mpsc::Sender<Interval>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl HdrLog {
    /// Creates `path` and writes the log header; interval start times are seconds since now.
    /// The writer thread runs on one of `control` (`barrier_runtime::affinity`: a CPU no
    /// generator lcore polls) when given, else where it starts (the caller's CPUs).
    pub fn create(
        path: &std::path::Path,
        comment: &str,
        control: Option<&ControlCores>,
    ) -> std::io::Result<HdrLog> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let (tx, rx) = mpsc::channel::<Interval>();
        let base = SystemTime::now();
        let comment = comment.to_string();
        let control = control.cloned();
        let thread = std::thread::Builder::new().name("hdr-log".into()).spawn(
            move || -> std::io::Result<u64> {
                ControlCores::pin_opt(control.as_ref(), "hdr-log");
                let mut ser = V2DeflateSerializer::new();
                // The header goes out once; later writers are begun with no header lines of their
                // own (no comment, no times), so each interval is a plain log line.
                IntervalLogWriterBuilder::new()
                    .add_comment(&comment)
                    .with_start_time(base)
                    .with_base_time(base)
                    .begin_log_with(&mut file, &mut ser)?;
                let mut written = 0;
                for iv in rx {
                    let mut w =
                        IntervalLogWriterBuilder::new().begin_log_with(&mut file, &mut ser)?;
                    w.write_histogram(&iv.hist, iv.start, iv.length, Tag::new(&iv.tag))
                        .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
                    written += 1;
                }
                file.flush()?;
                Ok(written)
            },
        )?;
        Ok(HdrLog {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues one interval (`tag`: no spaces, commas or colons).
    pub fn record(&self, start: Duration, length: Duration, tag: &str, hist: Histogram<u64>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Interval {
                start,
                length,
                tag: tag.to_string(),
                hist,
            });
        }
    }

    /// Another writer into the same log, for another generator lcore; the file is closed when
    /// the original is finished and every handle is gone.
    pub fn handle(&self) -> HdrLog {
        HdrLog {
            tx: self.tx.clone(),
            thread: None,
        }
    }

    /// Writes what is queued and closes the file; returns the intervals written.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.tx.take();
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("hdr-log writer panicked")),
            None => Ok(0),
        }
    }
}

impl Drop for HdrLog {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;

    #[test]
    fn intervals_read_back_with_the_crate_parser() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.hlog");
        let log = HdrLog::create(&path, "test run", None).unwrap();
        for i in 0..3u64 {
            let mut h = crate::report::new_histogram();
            h.record(1000 * (i + 1)).unwrap();
            h.record(2000 * (i + 1)).unwrap();
            log.record(Duration::from_secs(i), Duration::from_secs(1), "leaf", h);
        }
        assert_eq!(log.finish().unwrap(), 3);
        let text = std::fs::read(&path).unwrap();
        assert!(String::from_utf8_lossy(&text).contains("#test run"));
        let mut seen = Vec::new();
        for e in IntervalLogIterator::new(&text) {
            if let LogEntry::Interval(iv) = e.unwrap() {
                let bytes = base64_decode(iv.encoded_histogram());
                let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                seen.push((
                    iv.start_timestamp().as_secs(),
                    iv.tag().map(|t| t.as_str().to_string()),
                    h.len(),
                    h.max(),
                ));
            }
        }
        assert_eq!(seen.len(), 3);
        for (i, s) in seen.iter().enumerate() {
            assert_eq!(s.0, i as u64);
            assert_eq!(s.1.as_deref(), Some("leaf"));
            assert_eq!(s.2, 2);
            assert!(h_close(s.3, 2000 * (i as u64 + 1)));
        }
    }

    fn h_close(a: u64, b: u64) -> bool {
        a.abs_diff(b) * 100 <= b
    }

    /// Standard base64 (the log's encoding), enough for the test.
    fn base64_decode(s: &str) -> Vec<u8> {
        let val = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => (c - b'A') as u32,
                b'a'..=b'z' => (c - b'a' + 26) as u32,
                b'0'..=b'9' => (c - b'0' + 52) as u32,
                b'+' => 62,
                b'/' => 63,
                _ => 0,
            }
        };
        let b: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
        let mut out = Vec::new();
        for chunk in b.chunks(4) {
            let mut n = 0u32;
            for (i, &c) in chunk.iter().enumerate() {
                n |= val(c) << (18 - 6 * i);
            }
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
        }
        out
    }
}
