//! The barrier frame on the wire: Ethernet II, EtherType 0x88B5, a fixed 26-byte header ending
//! in an Internet checksum of its own, zero padding to the 60-byte minimum frame. [`Frame`] is a view over any byte buffer with the
//! fields as byte ranges (`mod field`); [`FrameRepr`] is the checked, typed value with
//! `parse`/`emit`. `docs/wire-format.md` is the reference for every byte.

use core::fmt;

use crate::{Epoch, GroupId, Seq, MAX_GROUPS};

/// IEEE 802 "local experimental" EtherType 1.
pub const ETHERTYPE: u16 = 0x88B5;
/// First header byte: tells a barrier frame from other traffic using the experimental type.
pub const MAGIC: u8 = 0xBA;
/// The only header version this code speaks.
pub const VERSION: u8 = 2;
/// End of the meaningful bytes (the checksum is the last header field); a receiver needs at
/// least this many.
pub const HEADER_END: usize = field::CHECKSUM.end;
/// Length of an emitted frame: the Ethernet minimum without FCS.
pub const FRAME_LEN: usize = 60;

/// Byte ranges of every field, network byte order. The one description of the layout.
pub mod field {
    /// A byte range in the frame.
    pub type Field = core::ops::Range<usize>;
    /// Destination MAC.
    pub const DST: Field = 0..6;
    /// Source MAC.
    pub const SRC: Field = 6..12;
    /// EtherType, 0x88B5.
    pub const ETHERTYPE: Field = 12..14;
    /// Magic byte, 0xBA.
    pub const MAGIC: usize = 14;
    /// Header version, 2.
    pub const VERSION: usize = 15;
    /// Kind: 1 reduce, 2 release, 3 abort.
    pub const KIND: usize = 16;
    /// Flags: bit0 RETRANSMIT, bit1 HAS_TIMESTAMP.
    pub const FLAGS: usize = 17;
    /// Group number, u32.
    pub const GROUP: Field = 18..22;
    /// Group epoch, u32: which run of the group (assigned by management).
    pub const EPOCH: Field = 22..26;
    /// Sequence number, u32.
    pub const SEQ: Field = 26..30;
    /// Transmit timestamp, u64 nanoseconds; 0 unless HAS_TIMESTAMP. An abort has no
    /// timestamp: these bytes carry its failure ([`ABORT_SWITCH`], [`ABORT_PORT`], a zero byte).
    pub const TX_TIMESTAMP: Field = 30..38;
    /// Abort: the declaring switch's id (the MAC address of its first port).
    pub const ABORT_SWITCH: Field = 30..36;
    /// Abort: the failed child's port at the declaring switch.
    pub const ABORT_PORT: usize = 36;
    /// Abort: reserved, zero.
    pub const ABORT_RESERVED: usize = 37;
    /// Header checksum, u16: the Internet checksum (RFC 1071) over [`CHECKSUMMED`], this
    /// field taken as zero. Veth and other software links have no FCS, so without it a flipped
    /// group or sequence bit would reach the protocol as a real barrier event.
    pub const CHECKSUM: Field = 38..40;
    /// The bytes the checksum covers: magic through checksum (13 16-bit words).
    pub const CHECKSUMMED: Field = 14..40;
    /// Zero padding up to the 60-byte minimum frame.
    pub const PADDING: Field = 40..60;
}

/// An Ethernet MAC address.
#[derive(Copy, Clone, Eq, PartialEq, Ord, PartialOrd, Hash, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// True for a group (multicast or broadcast) address: the I/G bit of the first byte.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }
}

/// A string that is not a MAC address; its message shows the string and the expected form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MacParseError(pub String);

impl fmt::Display for MacParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a MAC address (want six two-digit hex bytes, like 02:00:00:00:00:01)",
            self.0
        )
    }
}

impl std::error::Error for MacParseError {}

/// Six two-digit hex bytes separated by `:` (or `-`): the one parser for configuration files
/// and command lines.
impl core::str::FromStr for MacAddr {
    type Err = MacParseError;

    fn from_str(s: &str) -> Result<MacAddr, MacParseError> {
        let bad = || MacParseError(s.to_string());
        let mut mac = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for b in &mut mac {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(mac))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The frame kinds: the two of the method, reduce (规约包, child to parent) and release
/// (分发包, parent to children), and netbarrier's abort, which tells a group's tree that a
/// switch declared one of its children failed (`docs/protocol.md`, "Failure declaration").
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum Kind {
    /// "I and everything below me reached barrier `seq`" (child → parent).
    Reduce,
    /// "Barrier `seq` is complete, continue" (parent → children).
    Release,
    /// "Barrier `seq` cannot complete: this child failed" (any member → its tree). The
    /// failure travels in the bytes a reduce or release uses for its timestamp.
    Abort(Failure),
}

/// Who was declared failed: the port `port` of the switch whose id is `switch` (the MAC
/// address of that switch's first port), which stayed silent while its siblings reported.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct Failure {
    /// The declaring switch's id.
    pub switch: MacAddr,
    /// The silent child's port at that switch.
    pub port: u8,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port {} of switch {}", self.port, self.switch)
    }
}

impl Kind {
    /// The wire code: 1 reduce, 2 release, 3 abort.
    pub const fn to_u8(self) -> u8 {
        match self {
            Kind::Reduce => 1,
            Kind::Release => 2,
            Kind::Abort(_) => 3,
        }
    }

    /// The wire code of an abort.
    pub const ABORT_CODE: u8 = 3;

    /// Reduce or release for their codes; `None` for abort (its failure comes from the frame:
    /// [`FrameRepr::parse`]) and for the reserved codes (0, 4..=255).
    pub const fn from_u8(v: u8) -> Option<Kind> {
        match v {
            1 => Some(Kind::Reduce),
            2 => Some(Kind::Release),
            _ => None,
        }
    }

    /// A stable name for counters and logs.
    pub const fn name(&self) -> &'static str {
        match self {
            Kind::Reduce => "reduce",
            Kind::Release => "release",
            Kind::Abort(_) => "abort",
        }
    }
}

/// The flags byte. Only the defined bits can be set: a frame with reserved bits is rejected
/// at parse time, so a `Flags` value is always one this version understands.
#[derive(Copy, Clone, Eq, PartialEq, Hash, Default)]
pub struct Flags(u8);

impl Flags {
    /// The frame repeats one sent before (re-send on timeout, re-sent release). Informational:
    /// receivers treat it exactly like the original.
    pub const RETRANSMIT: Flags = Flags(0x01);
    /// The tx timestamp field is meaningful.
    pub const HAS_TIMESTAMP: Flags = Flags(0x02);
    /// Every defined bit.
    pub const ALL: Flags = Flags(0x03);

    /// No flag set.
    pub const fn empty() -> Flags {
        Flags(0)
    }

    /// RETRANSMIT when `retransmit`, else no flag.
    pub const fn retransmit(retransmit: bool) -> Flags {
        if retransmit {
            Flags::RETRANSMIT
        } else {
            Flags::empty()
        }
    }

    /// `None` if a reserved bit is set.
    pub const fn from_bits(bits: u8) -> Option<Flags> {
        if bits & !Self::ALL.0 == 0 {
            Some(Flags(bits))
        } else {
            None
        }
    }

    /// The flags byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// True when every flag in `other` is set.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// `self` with `other` set.
    #[must_use]
    pub const fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// `self` with `other` cleared.
    #[must_use]
    pub const fn without(self, other: Flags) -> Flags {
        Flags(self.0 & !other.0)
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        self.with(rhs)
    }
}

impl fmt::Debug for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (flag, name) in [
            (Flags::RETRANSMIT, "RETRANSMIT"),
            (Flags::HAS_TIMESTAMP, "HAS_TIMESTAMP"),
        ] {
            if self.contains(flag) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        if first {
            f.write_str("(empty)")?;
        }
        Ok(())
    }
}

/// Why a received frame is not a barrier frame this switch acts on. Each has a stable
/// counter name ([`ParseError::reason`]) and a dense index ([`ParseError::index`]).
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash, thiserror::Error)]
pub enum ParseError {
    /// Fewer than 14 bytes, or a barrier EtherType with fewer than [`HEADER_END`] bytes.
    #[error("frame too short")]
    TooShort,
    /// EtherType other than 0x88B5 (including VLAN-tagged frames, 0x8100).
    #[error("not a barrier frame (EtherType)")]
    NotBarrier,
    /// Barrier EtherType but the magic byte is not 0xBA.
    #[error("bad magic byte")]
    BadMagic,
    /// Header version other than 2 (version 1 frames, without an epoch, included).
    #[error("unsupported header version")]
    BadVersion,
    /// Kind other than reduce (1), release (2) or abort (3), or an abort with a timestamp
    /// flag or a non-zero reserved byte.
    #[error("unknown frame kind")]
    BadKind,
    /// A reserved flag bit is set.
    #[error("reserved flag bits set")]
    ReservedFlags,
    /// Group number not below [`MAX_GROUPS`].
    #[error("group number out of range")]
    GroupOutOfRange,
    /// The header checksum does not match: the frame was damaged on the way (links without an
    /// FCS check, such as veth). Checked last, so a damaged frame that already fails a field
    /// check keeps that more specific reason.
    #[error("bad header checksum")]
    BadChecksum,
}

impl ParseError {
    /// Every error, in [`ParseError::index`] order (for counter arrays).
    pub const ALL: [ParseError; 8] = [
        ParseError::TooShort,
        ParseError::NotBarrier,
        ParseError::BadMagic,
        ParseError::BadVersion,
        ParseError::BadKind,
        ParseError::ReservedFlags,
        ParseError::GroupOutOfRange,
        ParseError::BadChecksum,
    ];

    /// A stable snake_case name for counters and logs.
    pub const fn reason(&self) -> &'static str {
        match self {
            ParseError::TooShort => "too_short",
            ParseError::NotBarrier => "not_barrier",
            ParseError::BadMagic => "bad_magic",
            ParseError::BadVersion => "bad_version",
            ParseError::BadKind => "bad_kind",
            ParseError::ReservedFlags => "reserved_flags",
            ParseError::GroupOutOfRange => "group_out_of_range",
            ParseError::BadChecksum => "bad_checksum",
        }
    }

    /// Position in [`ParseError::ALL`].
    pub const fn index(&self) -> usize {
        match self {
            ParseError::TooShort => 0,
            ParseError::NotBarrier => 1,
            ParseError::BadMagic => 2,
            ParseError::BadVersion => 3,
            ParseError::BadKind => 4,
            ParseError::ReservedFlags => 5,
            ParseError::GroupOutOfRange => 6,
            ParseError::BadChecksum => 7,
        }
    }
}

/// A view over the bytes of a barrier frame, smoltcp style: the accessors read fields in place.
///
/// [`Frame::new_checked`] guarantees only that the buffer is long enough for every accessor;
/// field values are validated by [`FrameRepr::parse`].
#[derive(Clone, Debug)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps `buffer` without checking its length: accessors panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps `buffer`, failing with [`ParseError::TooShort`] if it is shorter than
    /// [`HEADER_END`].
    pub fn new_checked(buffer: T) -> Result<Frame<T>, ParseError> {
        let f = Frame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// [`ParseError::TooShort`] if the buffer cannot hold the header.
    pub fn check_len(&self) -> Result<(), ParseError> {
        if self.buffer.as_ref().len() < HEADER_END {
            Err(ParseError::TooShort)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Destination MAC.
    pub fn dst(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.b()[field::DST]);
        MacAddr(a)
    }

    /// Source MAC.
    pub fn src(&self) -> MacAddr {
        let mut a = [0; 6];
        a.copy_from_slice(&self.b()[field::SRC]);
        MacAddr(a)
    }

    /// EtherType.
    pub fn ethertype(&self) -> u16 {
        u16::from_be_bytes(self.b()[field::ETHERTYPE].try_into().unwrap())
    }

    /// Magic byte.
    pub fn magic(&self) -> u8 {
        self.b()[field::MAGIC]
    }

    /// Version byte.
    pub fn version(&self) -> u8 {
        self.b()[field::VERSION]
    }

    /// Raw kind byte.
    pub fn kind_raw(&self) -> u8 {
        self.b()[field::KIND]
    }

    /// Raw flags byte.
    pub fn flags_raw(&self) -> u8 {
        self.b()[field::FLAGS]
    }

    /// Raw group number (not range-checked).
    pub fn group(&self) -> u32 {
        u32::from_be_bytes(self.b()[field::GROUP].try_into().unwrap())
    }

    /// Group epoch.
    pub fn epoch(&self) -> u32 {
        u32::from_be_bytes(self.b()[field::EPOCH].try_into().unwrap())
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        u32::from_be_bytes(self.b()[field::SEQ].try_into().unwrap())
    }

    /// Raw tx timestamp field (meaningful only with HAS_TIMESTAMP).
    pub fn tx_timestamp(&self) -> u64 {
        u64::from_be_bytes(self.b()[field::TX_TIMESTAMP].try_into().unwrap())
    }

    /// An abort's failure: switch id and port (meaningful only for kind 3).
    pub fn abort_failure(&self) -> Failure {
        let mut switch = [0u8; 6];
        switch.copy_from_slice(&self.b()[field::ABORT_SWITCH]);
        Failure {
            switch: MacAddr(switch),
            port: self.b()[field::ABORT_PORT],
        }
    }

    /// An abort's reserved byte.
    pub fn abort_reserved(&self) -> u8 {
        self.b()[field::ABORT_RESERVED]
    }

    /// The header checksum field as stored.
    pub fn checksum(&self) -> u16 {
        u16::from_be_bytes(self.b()[field::CHECKSUM].try_into().unwrap())
    }

    /// True when the checksum matches the header: the ones' complement sum of the covered
    /// words, checksum included, is all ones (RFC 1071 §1).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        ones_complement_sum(&self.b()[field::CHECKSUMMED]) == 0xffff
    }
}

/// The 16-bit ones' complement sum of `bytes` (even length), big-endian words, carries folded
/// back in. Summing into a u32 cannot overflow for a header of 13 words.
#[inline]
fn ones_complement_sum(bytes: &[u8]) -> u16 {
    debug_assert!(bytes.len().is_multiple_of(2));
    let mut sum: u32 = bytes
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets the destination MAC.
    pub fn set_dst(&mut self, v: MacAddr) {
        self.bm()[field::DST].copy_from_slice(&v.0);
    }

    /// Sets the source MAC.
    pub fn set_src(&mut self, v: MacAddr) {
        self.bm()[field::SRC].copy_from_slice(&v.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, v: u16) {
        self.bm()[field::ETHERTYPE].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the magic byte.
    pub fn set_magic(&mut self, v: u8) {
        self.bm()[field::MAGIC] = v;
    }

    /// Sets the version byte.
    pub fn set_version(&mut self, v: u8) {
        self.bm()[field::VERSION] = v;
    }

    /// Sets the raw kind byte.
    pub fn set_kind_raw(&mut self, v: u8) {
        self.bm()[field::KIND] = v;
    }

    /// Sets the raw flags byte.
    pub fn set_flags_raw(&mut self, v: u8) {
        self.bm()[field::FLAGS] = v;
    }

    /// Sets the group number.
    pub fn set_group(&mut self, v: u32) {
        self.bm()[field::GROUP].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the group epoch.
    pub fn set_epoch(&mut self, v: u32) {
        self.bm()[field::EPOCH].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, v: u32) {
        self.bm()[field::SEQ].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the tx timestamp field.
    pub fn set_tx_timestamp(&mut self, v: u64) {
        self.bm()[field::TX_TIMESTAMP].copy_from_slice(&v.to_be_bytes());
    }

    /// Writes an abort's failure (and a zero reserved byte) over the timestamp bytes.
    pub fn set_abort_failure(&mut self, failure: Failure) {
        self.bm()[field::ABORT_SWITCH].copy_from_slice(&failure.switch.0);
        self.bm()[field::ABORT_PORT] = failure.port;
        self.bm()[field::ABORT_RESERVED] = 0;
    }

    /// Sets the checksum field as given (tests use it to store a wrong one).
    pub fn set_checksum(&mut self, v: u16) {
        self.bm()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Computes the header checksum and stores it. Call after every change to bytes 14..38:
    /// the setters above do not keep it up to date.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = ones_complement_sum(&self.b()[field::CHECKSUMMED]);
        self.set_checksum(!sum);
    }

    /// Zeroes the padding that lies inside the buffer (bytes 40..60, or fewer if shorter).
    pub fn clear_padding(&mut self) {
        let b = self.bm();
        let end = b.len().min(field::PADDING.end);
        b[field::PADDING.start..end].fill(0);
    }
}

/// A checked barrier frame, typed.
///
/// `flags` and `tx_timestamp` agree after [`FrameRepr::parse`]; [`FrameRepr::emit`] derives
/// HAS_TIMESTAMP from `tx_timestamp` alone, so a hand-built value cannot emit a frame that
/// says it has a timestamp and carries none.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub struct FrameRepr {
    /// Destination MAC.
    pub dst: MacAddr,
    /// Source MAC.
    pub src: MacAddr,
    /// Reduce or release.
    pub kind: Kind,
    /// RETRANSMIT (and HAS_TIMESTAMP, managed through `tx_timestamp`).
    pub flags: Flags,
    /// Group, `< MAX_GROUPS`.
    pub group: GroupId,
    /// The group's epoch (which run of the group).
    pub epoch: Epoch,
    /// Barrier sequence number.
    pub seq: Seq,
    /// Sender's transmit time in nanoseconds, if it stamped one (barrier-gen does).
    pub tx_timestamp: Option<u64>,
}

impl FrameRepr {
    /// Validates `bytes` as a barrier frame. Checks, in order: length for the Ethernet header,
    /// EtherType, length for the barrier header, magic, version, kind, flags, group range,
    /// header checksum. The checksum comes last so that a frame failing a field check is
    /// counted under that field's reason; any damage the field checks cannot see (group,
    /// sequence, timestamp) is caught by it. Padding is ignored, and so is the value of a
    /// timestamp field without HAS_TIMESTAMP (the checksum still covers its bytes).
    #[inline]
    pub fn parse(bytes: &[u8]) -> Result<FrameRepr, ParseError> {
        if bytes.len() < field::ETHERTYPE.end {
            return Err(ParseError::TooShort);
        }
        let f = Frame::new_unchecked(bytes);
        if f.ethertype() != ETHERTYPE {
            return Err(ParseError::NotBarrier);
        }
        f.check_len()?;
        if f.magic() != MAGIC {
            return Err(ParseError::BadMagic);
        }
        if f.version() != VERSION {
            return Err(ParseError::BadVersion);
        }
        let flags = Flags::from_bits(f.flags_raw()).ok_or(ParseError::ReservedFlags)?;
        let kind = match Kind::from_u8(f.kind_raw()) {
            Some(kind) => kind,
            None if f.kind_raw() == Kind::ABORT_CODE
                && !flags.contains(Flags::HAS_TIMESTAMP)
                && f.abort_reserved() == 0 =>
            {
                Kind::Abort(f.abort_failure())
            }
            None => return Err(ParseError::BadKind),
        };
        let group = f.group();
        if group >= MAX_GROUPS {
            return Err(ParseError::GroupOutOfRange);
        }
        if !f.verify_checksum() {
            return Err(ParseError::BadChecksum);
        }
        let tx_timestamp = flags
            .contains(Flags::HAS_TIMESTAMP)
            .then(|| f.tx_timestamp());
        Ok(FrameRepr {
            dst: f.dst(),
            src: f.src(),
            kind,
            flags,
            group: GroupId(group),
            epoch: Epoch(f.epoch()),
            seq: Seq(f.seq()),
            tx_timestamp,
        })
    }

    /// Writes the frame into `buf[..FRAME_LEN]` (checksum filled, padding zeroed) and returns
    /// [`FRAME_LEN`]. An abort carries its failure where others carry a timestamp, so its
    /// `tx_timestamp` is not written (and parses back as `None`).
    ///
    /// # Panics
    /// If `buf` is shorter than [`FRAME_LEN`], or `group` is not below [`MAX_GROUPS`] (such a
    /// frame would be dropped by every receiver, so emitting one is a caller bug).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        assert!(
            buf.len() >= FRAME_LEN,
            "buffer of {} bytes < FRAME_LEN",
            buf.len()
        );
        assert!(self.group.0 < MAX_GROUPS, "{:?} out of range", self.group);
        let mut f = Frame::new_unchecked(&mut buf[..FRAME_LEN]);
        f.set_dst(self.dst);
        f.set_src(self.src);
        f.set_ethertype(ETHERTYPE);
        f.set_magic(MAGIC);
        f.set_version(VERSION);
        f.set_kind_raw(self.kind.to_u8());
        let ts = match self.kind {
            Kind::Abort(_) => None,
            _ => self.tx_timestamp,
        };
        let flags = match ts {
            Some(_) => self.flags.with(Flags::HAS_TIMESTAMP),
            None => self.flags.without(Flags::HAS_TIMESTAMP),
        };
        f.set_flags_raw(flags.bits());
        f.set_group(self.group.0);
        f.set_epoch(self.epoch.0);
        f.set_seq(self.seq.0);
        f.set_tx_timestamp(ts.unwrap_or(0));
        if let Kind::Abort(failure) = self.kind {
            f.set_abort_failure(failure);
        }
        f.clear_padding();
        f.fill_checksum();
        FRAME_LEN
    }

    /// Convenience: the emitted frame as an array.
    pub fn to_bytes(&self) -> [u8; FRAME_LEN] {
        let mut b = [0u8; FRAME_LEN];
        self.emit(&mut b);
        b
    }
}

/// The frames one egress port sends, prepared once: addresses, EtherType, magic, version, a
/// zero timestamp and padding are written when the port is set up, and [`write`](Self::write)
/// fills in only what changes per frame (kind, flags, group, epoch, sequence number, an
/// abort's failure) and the checksum. Its output is byte for byte what [`FrameRepr::emit`]
/// writes for the same frame without a timestamp; the scheduler builds every frame this way,
/// straight into the transmit buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameTemplate {
    bytes: [u8; FRAME_LEN],
    /// The ones' complement sum (unfolded) of the template's checksummed words: the
    /// per-frame fields are added to it, so [`write`](Self::write) never reads back the frame
    /// it has just written (a read of narrow stores stalls on store forwarding).
    base_sum: u32,
}

/// The two big-endian 16-bit words of `x`, summed (unfolded).
#[inline]
const fn word_sum(x: u32) -> u32 {
    (x >> 16) + (x & 0xffff)
}

impl FrameTemplate {
    /// Frames from `src` to `dst`.
    pub fn new(dst: MacAddr, src: MacAddr) -> Self {
        let mut bytes = [0u8; FRAME_LEN];
        let mut f = Frame::new_unchecked(&mut bytes[..]);
        f.set_dst(dst);
        f.set_src(src);
        f.set_ethertype(ETHERTYPE);
        f.set_magic(MAGIC);
        f.set_version(VERSION);
        let base_sum = bytes[field::CHECKSUMMED]
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        FrameTemplate { bytes, base_sum }
    }

    /// Writes one frame into `buf`: the template, then the fields of this frame, then the
    /// checksum. `flags` must not hold `HAS_TIMESTAMP` (these frames carry none); it is
    /// cleared if it does.
    ///
    /// # Panics
    /// When `group` is beyond [`MAX_GROUPS`], as [`FrameRepr::emit`] does.
    #[inline]
    pub fn write(
        &self,
        buf: &mut [u8; FRAME_LEN],
        kind: Kind,
        flags: Flags,
        group: GroupId,
        epoch: Epoch,
        seq: Seq,
    ) {
        assert!(group.0 < MAX_GROUPS, "{group:?} out of range");
        let (k, fl) = (kind.to_u8(), flags.without(Flags::HAS_TIMESTAMP).bits());
        // The checksum from the values, not from the bytes written: the same sum
        // `fill_checksum` takes over the finished header.
        let mut sum = self.base_sum
            + u32::from(u16::from_be_bytes([k, fl]))
            + word_sum(group.0)
            + word_sum(epoch.0)
            + word_sum(seq.0);
        *buf = self.bytes;
        buf[field::KIND] = k;
        buf[field::FLAGS] = fl;
        buf[field::GROUP].copy_from_slice(&group.0.to_be_bytes());
        buf[field::EPOCH].copy_from_slice(&epoch.0.to_be_bytes());
        buf[field::SEQ].copy_from_slice(&seq.0.to_be_bytes());
        if let Kind::Abort(failure) = kind {
            let m = failure.switch.0;
            sum += u32::from(u16::from_be_bytes([m[0], m[1]]))
                + u32::from(u16::from_be_bytes([m[2], m[3]]))
                + u32::from(u16::from_be_bytes([m[4], m[5]]))
                + u32::from(u16::from_be_bytes([failure.port, 0]));
            Frame::new_unchecked(&mut buf[..]).set_abort_failure(failure);
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        buf[field::CHECKSUM].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_addresses_parse_strictly_and_round_trip() {
        let m: MacAddr = "02:0a:FF:00:00:01".parse().unwrap();
        assert_eq!(m, MacAddr([2, 0x0a, 0xff, 0, 0, 1]));
        assert_eq!(m.to_string().parse::<MacAddr>().unwrap(), m);
        assert_eq!(
            "02-00-00-00-00-01".parse::<MacAddr>().unwrap(),
            MacAddr([2, 0, 0, 0, 0, 1])
        );
        for bad in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:01:02",
            "02:00:00:00:00:0g",
            "2:00:00:00:00:01",
            "02:00:00:00:00:100",
            "+1:00:00:00:00:01",
            "0200.0000.0001",
        ] {
            let e = bad.parse::<MacAddr>().unwrap_err();
            assert!(e.to_string().contains("is not a MAC address"), "{bad}: {e}");
        }
    }
    use proptest::prelude::*;

    fn reduce() -> FrameRepr {
        FrameRepr {
            dst: MacAddr([0x02, 0, 0, 0, 0, 0x01]),
            src: MacAddr([0x02, 0, 0, 0, 0, 0x02]),
            kind: Kind::Reduce,
            flags: Flags::empty(),
            group: GroupId(7),
            epoch: Epoch(3),
            seq: Seq(42),
            tx_timestamp: None,
        }
    }

    #[test]
    fn layout_constants() {
        assert_eq!(HEADER_END, 40);
        assert_eq!(field::PADDING.end, FRAME_LEN);
        assert_eq!(field::PADDING.start, HEADER_END);
        assert_eq!(field::CHECKSUMMED.start, field::MAGIC);
        assert_eq!(field::CHECKSUMMED.end, HEADER_END);
        assert_eq!(field::CHECKSUM.start, field::TX_TIMESTAMP.end);
    }

    #[test]
    fn reduce_bytes_exact() {
        let b = reduce().to_bytes();
        let expect_head: [u8; 40] = [
            0x02, 0, 0, 0, 0, 0x01, // dst
            0x02, 0, 0, 0, 0, 0x02, // src
            0x88, 0xB5, // ethertype
            0xBA, 0x02, 0x01, 0x00, // magic version kind flags
            0, 0, 0, 7, // group
            0, 0, 0, 3, // epoch
            0, 0, 0, 42, // seq
            0, 0, 0, 0, 0, 0, 0, 0, // ts
            // checksum, worked by hand: words 0xba02 + 0x0100 + 0x0007 + 0x0003 + 0x002a =
            // 0xbb36, complemented
            0x44, 0xC9,
        ];
        assert_eq!(&b[..40], &expect_head);
        assert!(b[40..].iter().all(|&x| x == 0));
        assert_eq!(FrameRepr::parse(&b), Ok(reduce()));
    }

    #[test]
    fn release_with_timestamp_round_trips() {
        let r = FrameRepr {
            kind: Kind::Release,
            flags: Flags::RETRANSMIT,
            tx_timestamp: Some(0x0102_0304_0506_0708),
            ..reduce()
        };
        let b = r.to_bytes();
        assert_eq!(b[16], 2);
        assert_eq!(b[17], 0x03);
        assert_eq!(&b[30..38], &[1, 2, 3, 4, 5, 6, 7, 8]);
        let p = FrameRepr::parse(&b).unwrap();
        assert_eq!(p.tx_timestamp, Some(0x0102_0304_0506_0708));
        assert!(p.flags.contains(Flags::HAS_TIMESTAMP | Flags::RETRANSMIT));
    }

    #[test]
    fn emit_derives_has_timestamp_from_option() {
        let r = FrameRepr {
            flags: Flags::HAS_TIMESTAMP,
            tx_timestamp: None,
            ..reduce()
        };
        let b = r.to_bytes();
        assert_eq!(b[17], 0);
        assert_eq!(&b[30..38], &[0; 8]);
    }

    #[test]
    fn every_rejection() {
        let good = reduce().to_bytes();
        let with = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            FrameRepr::parse(&b)
        };
        assert_eq!(FrameRepr::parse(&good[..13]), Err(ParseError::TooShort));
        assert_eq!(FrameRepr::parse(&good[..39]), Err(ParseError::TooShort));
        assert!(
            FrameRepr::parse(&good[..40]).is_ok(),
            "padding is optional on receive"
        );
        assert_eq!(with(12, 0x08), Err(ParseError::NotBarrier));
        // VLAN tag: the EtherType slot holds 0x8100
        let mut vlan = good;
        vlan[12] = 0x81;
        vlan[13] = 0x00;
        assert_eq!(FrameRepr::parse(&vlan), Err(ParseError::NotBarrier));
        // a short non-barrier frame is NotBarrier, not TooShort
        let mut short_ip = [0u8; 20];
        short_ip[12] = 0x08;
        assert_eq!(FrameRepr::parse(&short_ip), Err(ParseError::NotBarrier));
        assert_eq!(with(14, 0xBB), Err(ParseError::BadMagic));
        assert_eq!(with(15, 1), Err(ParseError::BadVersion));
        assert_eq!(with(15, 3), Err(ParseError::BadVersion));
        assert_eq!(with(15, 0), Err(ParseError::BadVersion));
        assert_eq!(with(16, 0), Err(ParseError::BadKind));
        assert_eq!(with(16, 4), Err(ParseError::BadKind));
        assert_eq!(with(17, 0x04), Err(ParseError::ReservedFlags));
        assert_eq!(with(17, 0x80), Err(ParseError::ReservedFlags));
        // group = 0x0010_0007 >= 2^20
        assert_eq!(with(19, 0x10), Err(ParseError::GroupOutOfRange));
        // group = 0x000f_0007 < 2^20 passes the range check, but the checksum was for group 7
        assert_eq!(with(19, 0x0f), Err(ParseError::BadChecksum));
        // epoch 3 -> 4 and seq 42 -> 43: only the checksum can tell
        assert_eq!(with(25, 4), Err(ParseError::BadChecksum));
        assert_eq!(with(29, 43), Err(ParseError::BadChecksum));
        assert_eq!(with(38, 0), Err(ParseError::BadChecksum));
        let resummed = |i: usize, v: u8| {
            let mut b = good;
            b[i] = v;
            Frame::new_unchecked(&mut b[..]).fill_checksum();
            FrameRepr::parse(&b)
        };
        assert_eq!(resummed(19, 0x0f).unwrap().group, GroupId(0x000f_0007));
        assert_eq!(resummed(25, 4).unwrap().epoch, Epoch(4));
        // padding is outside the checksum and ignored; an unflagged timestamp is covered by
        // the checksum but its value is ignored
        assert_eq!(with(59, 0xff), Ok(reduce()));
        assert_eq!(with(40, 0xff), Ok(reduce()));
        assert_eq!(with(34, 0xff), Err(ParseError::BadChecksum));
        assert_eq!(resummed(34, 0xff), Ok(reduce()));
    }

    /// The checksum is checked after every field check, so a damaged field keeps its own
    /// reason even though the checksum is wrong too.
    #[test]
    fn field_errors_take_precedence_over_the_checksum() {
        let mut b = reduce().to_bytes();
        b[14] = 0xBB;
        assert!(!Frame::new_unchecked(&b[..]).verify_checksum());
        assert_eq!(FrameRepr::parse(&b), Err(ParseError::BadMagic));
        let mut b = reduce().to_bytes();
        b[18] = 0x80;
        assert_eq!(FrameRepr::parse(&b), Err(ParseError::GroupOutOfRange));
    }

    /// Every single-bit error in the checksummed bytes (magic through checksum) of a valid
    /// frame is rejected: 26 bytes x 8 bits. Flips in group, epoch, sequence, timestamp and checksum
    /// bytes pass every field check, so the checksum is what catches them.
    #[test]
    fn every_single_bit_flip_of_the_header_is_rejected() {
        let release_ts = FrameRepr {
            kind: Kind::Release,
            flags: Flags::RETRANSMIT | Flags::HAS_TIMESTAMP,
            tx_timestamp: Some(0x0102_0304_0506_0708),
            ..reduce()
        };
        for r in [reduce(), release_ts] {
            let good = r.to_bytes();
            assert_eq!(FrameRepr::parse(&good), Ok(r));
            let mut cases = 0;
            for i in field::CHECKSUMMED {
                for bit in 0..8 {
                    let mut b = good;
                    b[i] ^= 1 << bit;
                    let e = FrameRepr::parse(&b);
                    assert!(e.is_err(), "byte {i} bit {bit}: accepted as {e:?}");
                    // The same damage with the checksum repaired shows what the field checks
                    // alone say: their error if they refuse it, otherwise only the checksum
                    // can, and must, refuse it.
                    let mut repaired = b;
                    Frame::new_unchecked(&mut repaired[..]).fill_checksum();
                    let expect = match FrameRepr::parse(&repaired) {
                        Err(field_error) => field_error,
                        Ok(_) => ParseError::BadChecksum,
                    };
                    assert_eq!(e, Err(expect), "byte {i} bit {bit}");
                    if i >= field::EPOCH.start {
                        assert_eq!(e, Err(ParseError::BadChecksum), "byte {i} bit {bit}");
                    }
                    cases += 1;
                }
            }
            assert_eq!(cases, 26 * 8);
        }
    }

    #[test]
    fn checksum_accessors() {
        let b = reduce().to_bytes();
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(f.checksum(), 0x44C9);
        assert!(f.verify_checksum());
        let mut m = b;
        let mut fm = Frame::new_unchecked(&mut m[..]);
        fm.set_checksum(0x44C8);
        assert!(!fm.verify_checksum());
        fm.fill_checksum();
        assert_eq!(fm.checksum(), 0x44C9);
        assert_eq!(m, b);
        // RFC 1071's example words 0x0001 0xf203 0xf4f5 0xf6f7 sum to 0xddf2 (§3)
        assert_eq!(
            ones_complement_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    #[test]
    fn error_names_and_indices() {
        for (i, e) in ParseError::ALL.iter().enumerate() {
            assert_eq!(e.index(), i);
            assert!(!e.reason().is_empty());
        }
        assert_eq!(ParseError::TooShort.reason(), "too_short");
        assert_eq!(
            ParseError::GroupOutOfRange.to_string(),
            "group number out of range"
        );
        assert_eq!(ParseError::BadChecksum.reason(), "bad_checksum");
        assert_eq!(ParseError::BadChecksum.index(), 7);
        assert_eq!(ParseError::BadChecksum.to_string(), "bad header checksum");
    }

    #[test]
    fn frame_view_checked() {
        assert_eq!(
            Frame::new_checked(&[0u8; 39][..]).unwrap_err(),
            ParseError::TooShort
        );
        let b = reduce().to_bytes();
        let f = Frame::new_checked(&b[..]).unwrap();
        assert_eq!(f.group(), 7);
        assert_eq!(f.epoch(), 3);
        assert_eq!(f.seq(), 42);
        assert_eq!(f.ethertype(), ETHERTYPE);
        let mut m = b;
        let mut fm = Frame::new_unchecked(&mut m[..]);
        fm.set_seq(43);
        assert_eq!(FrameRepr::parse(&m), Err(ParseError::BadChecksum));
        let mut fm = Frame::new_unchecked(&mut m[..]);
        fm.fill_checksum();
        assert_eq!(FrameRepr::parse(&m).unwrap().seq, Seq(43));
    }

    #[test]
    #[should_panic(expected = "FRAME_LEN")]
    fn emit_into_short_buffer_panics() {
        reduce().emit(&mut [0u8; 59]);
    }

    fn hexdump(b: &[u8]) -> String {
        b.chunks(16)
            .enumerate()
            .map(|(i, row)| {
                let bytes: Vec<String> = row.iter().map(|x| format!("{x:02x}")).collect();
                format!("{:04x}  {}\n", i * 16, bytes.join(" "))
            })
            .collect()
    }

    /// The examples in docs/wire-format.md are what this code emits.
    #[test]
    fn doc_examples_match_the_code() {
        const DOC: &str = include_str!("../../../docs/wire-format.md");
        let release = FrameRepr {
            dst: reduce().src,
            src: reduce().dst,
            kind: Kind::Release,
            flags: Flags::RETRANSMIT,
            tx_timestamp: Some(5_000_000_000),
            ..reduce()
        };
        for r in [reduce(), release] {
            let dump = hexdump(&r.to_bytes());
            assert!(DOC.contains(&dump), "docs/wire-format.md lacks:\n{dump}");
        }
    }

    /// The fuzz seeds (`dataplane/fuzz-check/fuzz/seeds/parse_frame`) are the frames this page documents: the two
    /// examples parse, the one with a flipped sequence bit is a checksum failure.
    #[test]
    fn fuzz_seeds_are_the_documented_frames() {
        let reduce_seed = include_bytes!("../../fuzz-check/fuzz/seeds/parse_frame/reduce.bin");
        let release_seed =
            include_bytes!("../../fuzz-check/fuzz/seeds/parse_frame/release_retransmit_ts.bin");
        let flipped =
            include_bytes!("../../fuzz-check/fuzz/seeds/parse_frame/reduce_seq_bit_flipped.bin");
        assert_eq!(FrameRepr::parse(reduce_seed), Ok(reduce()));
        let rel = FrameRepr::parse(release_seed).unwrap();
        assert_eq!(
            (rel.kind, rel.epoch, rel.seq),
            (Kind::Release, Epoch(3), Seq(42))
        );
        assert_eq!(rel.tx_timestamp, Some(5_000_000_000));
        assert_eq!(FrameRepr::parse(flipped), Err(ParseError::BadChecksum));
    }

    #[test]
    fn abort_bytes_exact_and_checked() {
        let failure = Failure {
            switch: MacAddr([0x02, 0, 0, 0, 0x0a, 0x01]),
            port: 3,
        };
        let a = FrameRepr {
            kind: Kind::Abort(failure),
            tx_timestamp: Some(99), // not written: the failure takes these bytes
            ..reduce()
        };
        let b = a.to_bytes();
        assert_eq!(b[16], 3);
        assert_eq!(b[17], 0, "no HAS_TIMESTAMP on an abort");
        assert_eq!(&b[30..38], &[0x02, 0, 0, 0, 0x0a, 0x01, 3, 0]);
        let p = FrameRepr::parse(&b).unwrap();
        assert_eq!(p.kind, Kind::Abort(failure));
        assert_eq!(p.tx_timestamp, None);
        assert_eq!(failure.to_string(), "port 3 of switch 02:00:00:00:0a:01");
        // a timestamp flag or a reserved byte makes it unknown
        for (idx, val) in [(17usize, 0x02u8), (37, 1)] {
            let mut bad = b;
            bad[idx] = val;
            Frame::new_unchecked(&mut bad[..]).fill_checksum();
            assert_eq!(
                FrameRepr::parse(&bad),
                Err(ParseError::BadKind),
                "byte {idx}"
            );
        }
        let mut four = b;
        four[16] = 4;
        Frame::new_unchecked(&mut four[..]).fill_checksum();
        assert_eq!(FrameRepr::parse(&four), Err(ParseError::BadKind));
    }

    #[test]
    fn mac_display() {
        assert_eq!(MacAddr([2, 0, 0, 0, 0, 1]).to_string(), "02:00:00:00:00:01");
        assert!(MacAddr::BROADCAST.is_multicast());
    }

    fn any_repr() -> impl Strategy<Value = FrameRepr> {
        (
            any::<[u8; 6]>(),
            any::<[u8; 6]>(),
            prop_oneof![
                Just(Kind::Reduce),
                Just(Kind::Release),
                (any::<[u8; 6]>(), any::<u8>()).prop_map(|(m, port)| Kind::Abort(Failure {
                    switch: MacAddr(m),
                    port
                })),
            ],
            any::<bool>(),
            0..MAX_GROUPS,
            any::<u32>(),
            any::<u32>(),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(d, s, kind, rt, g, e, q, ts)| {
                // an abort has no timestamp
                let ts = if matches!(kind, Kind::Abort(_)) {
                    None
                } else {
                    ts
                };
                FrameRepr {
                    dst: MacAddr(d),
                    src: MacAddr(s),
                    kind,
                    flags: if rt {
                        Flags::RETRANSMIT
                    } else {
                        Flags::empty()
                    }
                    .with(if ts.is_some() {
                        Flags::HAS_TIMESTAMP
                    } else {
                        Flags::empty()
                    }),
                    group: GroupId(g),
                    epoch: Epoch(e),
                    seq: Seq(q),
                    tx_timestamp: ts,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// A port's template writes exactly what `emit` writes for the same frame without a
        /// timestamp, whatever the template's bytes held before (a reused buffer).
        #[test]
        fn the_template_writes_what_emit_writes(r in any_repr(), junk in any::<u8>()) {
            let r = FrameRepr { tx_timestamp: None, flags: r.flags.without(Flags::HAS_TIMESTAMP), ..r };
            let t = FrameTemplate::new(r.dst, r.src);
            let mut b = [junk; FRAME_LEN];
            t.write(&mut b, r.kind, r.flags, r.group, r.epoch, r.seq);
            prop_assert_eq!(b, r.to_bytes());
        }

        #[test]
        fn repr_emit_parse_round_trip(r in any_repr()) {
            let b = r.to_bytes();
            prop_assert!(Frame::new_unchecked(&b[..]).verify_checksum());
            prop_assert_eq!(FrameRepr::parse(&b), Ok(r));
        }

        /// Any one damaged byte in the checksummed range of any valid frame is rejected (one
        /// byte changed by any value: the difference of a single word is never a multiple of
        /// 0xffff).
        #[test]
        fn any_one_damaged_header_byte_is_rejected(
            r in any_repr(), idx in field::CHECKSUMMED, x in 1u8..=255)
        {
            let mut b = r.to_bytes();
            b[idx] ^= x;
            prop_assert!(FrameRepr::parse(&b).is_err());
        }

        #[test]
        fn parse_emit_parse_is_stable(
            mut bytes in proptest::collection::vec(any::<u8>(), 0..80), resum in any::<bool>())
        {
            // Random bytes almost never carry a right checksum; repair it in half the cases so
            // the checks after it are reached.
            if resum && bytes.len() >= HEADER_END {
                Frame::new_unchecked(&mut bytes[..]).fill_checksum();
            }
            if let Ok(r) = FrameRepr::parse(&bytes) {
                prop_assert!(Frame::new_unchecked(&bytes[..]).verify_checksum());
                let b = r.to_bytes();
                prop_assert_eq!(FrameRepr::parse(&b), Ok(r));
                // the meaningful bytes survive, except an unflagged timestamp which is zeroed
                prop_assert_eq!(&b[..30], &bytes[..30]);
            }
        }

        #[test]
        fn mostly_valid_frames_parse_or_name_an_error(
            r in any_repr(), idx in 0usize..60, val in any::<u8>(), cut in 0usize..=60)
        {
            let mut b = r.to_bytes();
            b[idx] = val;
            match FrameRepr::parse(&b[..cut]) {
                Ok(p) => { prop_assert!(cut >= HEADER_END); prop_assert!(p.group.0 < MAX_GROUPS); }
                Err(e) => { prop_assert!(ParseError::ALL.contains(&e)); }
            }
        }
    }
}
