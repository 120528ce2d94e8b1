//! # barrier-bpf: a small safe layer over the system libbpf
//!
//! What netbarrier's XDP dataplane (`dataplane/xdp`) needs from libbpf 1.x, and nothing more:
//! open an object file from bytes, size its maps, load it; find a program and a map by name;
//! update, look up (also per-CPU, also under the value's spin lock) and delete by byte slices;
//! create a map at run time (the inner maps of a map-in-map); run an XDP program on one frame
//! with `BPF_PROG_TEST_RUN`; attach and detach XDP on an interface. The declarations are
//! written by hand from libbpf 1.1's `bpf.h`/`libbpf.h` (a dozen functions and three option
//! structs), so building needs no bindgen. This crate and the other `ffi/` crates are the only
//! places with `unsafe` (docs/architecture.md).
//!
//! Every failure is a [`BpfError`] naming what was attempted and the errno.

use std::ffi::{c_int, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::ptr::NonNull;

mod sys;

/// What went wrong, with what was attempted and the errno libbpf or the kernel returned.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// A libbpf call or bpf syscall failed.
    #[error("{what}: {source}")]
    Os {
        /// What was attempted, with the names involved.
        what: String,
        /// The errno as an `io::Error`.
        #[source]
        source: io::Error,
    },
    /// The object has no program or map of that name.
    #[error("the BPF object has no {kind} named {name:?}")]
    NotFound {
        /// `program` or `map`.
        kind: &'static str,
        /// The name looked for.
        name: String,
    },
    /// A buffer has the wrong length for the map's key or value.
    #[error("{what}: {len} bytes given, the map's {part} has {expected}")]
    Size {
        /// What was attempted.
        what: String,
        /// `key` or `value`.
        part: &'static str,
        /// Bytes given.
        len: usize,
        /// Bytes the map has.
        expected: usize,
    },
    /// An operation one map type offers, asked of a map of another.
    #[error("{what}: map {name} is of type {map_type}, not {expected}")]
    MapType {
        /// What was attempted.
        what: &'static str,
        /// The map's name.
        name: String,
        /// Its `enum bpf_map_type`.
        map_type: u32,
        /// The type the operation needs.
        expected: u32,
    },
}

impl BpfError {
    /// The errno, when the failure came from the kernel or libbpf.
    pub fn errno(&self) -> Option<i32> {
        match self {
            BpfError::Os { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

fn os_err(what: impl Into<String>, rc: c_int) -> BpfError {
    // libbpf 1.x returns -errno from its low-level calls and also sets errno; prefer the
    // returned value, fall back to errno for calls that return NULL or -1.
    let code = if rc < -1 {
        -rc
    } else {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    BpfError::Os {
        what: what.into(),
        source: io::Error::from_raw_os_error(code),
    }
}

fn cstring(s: &str) -> CString {
    CString::new(s).expect("names passed to libbpf have no NUL byte")
}

/// An opened (and, after [`Object::load`], loaded) BPF object: `bpf_object__open_mem`.
/// Dropping it closes every program and map fd it holds (`bpf_object__close`).
#[derive(Debug)]
pub struct Object {
    obj: NonNull<sys::bpf_object>,
    // libbpf keeps a pointer to the object's bytes until load, so they live here.
    _bytes: Vec<u8>,
    loaded: bool,
}

// SAFETY: a bpf_object is plain heap data owned by this handle; libbpf has no thread
// affinity. `&Object` methods only read fds (map and program fds are usable from any thread).
unsafe impl Send for Object {}
// SAFETY: see above: the shared methods call only libbpf getters and bpf syscalls on fds.
unsafe impl Sync for Object {}

impl Object {
    /// Opens an object file's bytes (an ELF built by `clang -target bpf`); `name` names it in
    /// libbpf's messages. Nothing is loaded yet: maps can still be resized.
    pub fn open(bytes: &[u8], name: &str) -> Result<Object, BpfError> {
        let bytes = bytes.to_vec();
        let cname = cstring(name);
        let opts = sys::bpf_object_open_opts {
            sz: std::mem::size_of::<sys::bpf_object_open_opts>(),
            object_name: cname.as_ptr(),
            ..sys::bpf_object_open_opts::default()
        };
        // SAFETY: `bytes` outlives the object (kept in `_bytes`); opts is a valid struct with
        // its size filled in; libbpf copies the name.
        let p = unsafe { sys::bpf_object__open_mem(bytes.as_ptr().cast(), bytes.len(), &opts) };
        match NonNull::new(p) {
            Some(obj) => Ok(Object {
                obj,
                _bytes: bytes,
                loaded: false,
            }),
            None => Err(os_err(format!("open BPF object {name}"), -1)),
        }
    }

    fn map_ptr(&self, name: &str) -> Result<NonNull<sys::bpf_map>, BpfError> {
        let c = cstring(name);
        // SAFETY: the object is valid while self lives; the name is NUL-terminated.
        let p = unsafe { sys::bpf_object__find_map_by_name(self.obj.as_ptr(), c.as_ptr()) };
        NonNull::new(p).ok_or_else(|| BpfError::NotFound {
            kind: "map",
            name: name.to_owned(),
        })
    }

    fn prog_ptr(&self, name: &str) -> Result<NonNull<sys::bpf_program>, BpfError> {
        let c = cstring(name);
        // SAFETY: as in map_ptr.
        let p = unsafe { sys::bpf_object__find_program_by_name(self.obj.as_ptr(), c.as_ptr()) };
        NonNull::new(p).ok_or_else(|| BpfError::NotFound {
            kind: "program",
            name: name.to_owned(),
        })
    }

    /// Sets map `name`'s number of entries before loading (`bpf_map__set_max_entries`).
    pub fn set_max_entries(&mut self, name: &str, n: u32) -> Result<(), BpfError> {
        let m = self.map_ptr(name)?;
        // SAFETY: a map of this (not yet loaded) object.
        let rc = unsafe { sys::bpf_map__set_max_entries(m.as_ptr(), n) };
        if rc < 0 {
            return Err(os_err(format!("set max_entries of map {name} to {n}"), rc));
        }
        Ok(())
    }

    /// The bytes a global-data map (`.rodata`, `.data`, `.bss`) will be created with
    /// (`bpf_map__initial_value`): the values the object file gives its globals until
    /// [`Object::set_initial_value`] changes them.
    pub fn initial_value(&self, name: &str) -> Result<Vec<u8>, BpfError> {
        let m = self.map_ptr(name)?;
        let mut size = 0usize;
        // SAFETY: a map of this object; libbpf returns a pointer to `size` bytes it owns (or
        // NULL for a map that has no initial value), valid until the object is closed.
        let p = unsafe { sys::bpf_map__initial_value(m.as_ptr(), &mut size) };
        if p.is_null() {
            return Err(os_err(
                format!("map {name} has no initial value (not a global-data map?)"),
                -1,
            ));
        }
        // SAFETY: p points at `size` initialised bytes (see above); copied out at once.
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) }.to_vec())
    }

    /// Sets the bytes a global-data map is created with, before loading
    /// (`bpf_map__set_initial_value`): how a loader sets a `const volatile` global in
    /// `.rodata`, which the verifier then sees as a constant (a branch on it that cannot be
    /// taken is removed). `bytes` must be as long as the map's value
    /// ([`Object::initial_value`]).
    pub fn set_initial_value(&mut self, name: &str, bytes: &[u8]) -> Result<(), BpfError> {
        let what = format!("set the initial value of map {name}");
        if self.loaded {
            return Err(os_err(
                format!("{what}: the object is loaded"),
                -libc::EBUSY,
            ));
        }
        let expected = self.initial_value(name)?.len();
        if bytes.len() != expected {
            return Err(BpfError::Size {
                what,
                part: "value",
                len: bytes.len(),
                expected,
            });
        }
        let m = self.map_ptr(name)?;
        // SAFETY: a map of this not yet loaded object; libbpf copies `bytes.len()` bytes.
        let rc = unsafe {
            sys::bpf_map__set_initial_value(m.as_ptr(), bytes.as_ptr().cast(), bytes.len())
        };
        if rc < 0 {
            return Err(os_err(what, rc));
        }
        Ok(())
    }

    /// Loads every program and creates every map (`bpf_object__load`). The verifier's log
    /// goes to libbpf's printer (stderr) on failure.
    pub fn load(&mut self) -> Result<(), BpfError> {
        // SAFETY: the object is valid and not yet loaded.
        let rc = unsafe { sys::bpf_object__load(self.obj.as_ptr()) };
        if rc < 0 {
            return Err(os_err("load BPF object (verifier log above)", rc));
        }
        self.loaded = true;
        Ok(())
    }

    /// The loaded program `name`.
    pub fn program(&self, name: &str) -> Result<Program<'_>, BpfError> {
        let p = self.prog_ptr(name)?;
        // SAFETY: a program of this object.
        let fd = unsafe { sys::bpf_program__fd(p.as_ptr()) };
        if fd < 0 {
            return Err(os_err(
                format!("program {name} has no fd (not loaded?)"),
                fd,
            ));
        }
        Ok(Program {
            fd,
            name: name.to_owned(),
            _obj: self,
        })
    }

    /// The loaded map `name`, with its key and value sizes.
    pub fn map(&self, name: &str) -> Result<Map<'_>, BpfError> {
        let m = self.map_ptr(name)?;
        // SAFETY: a map of this object; getters only.
        let (fd, key, value, ty, max) = unsafe {
            (
                sys::bpf_map__fd(m.as_ptr()),
                sys::bpf_map__key_size(m.as_ptr()),
                sys::bpf_map__value_size(m.as_ptr()),
                sys::bpf_map__type(m.as_ptr()),
                sys::bpf_map__max_entries(m.as_ptr()),
            )
        };
        if fd < 0 {
            return Err(os_err(format!("map {name} has no fd (not loaded?)"), fd));
        }
        Ok(Map {
            fd,
            name: name.to_owned(),
            key_size: key as usize,
            value_size: value as usize,
            map_type: ty as u32,
            max_entries: max,
            _obj: std::marker::PhantomData,
        })
    }
}

impl Drop for Object {
    fn drop(&mut self) {
        // SAFETY: the object was returned by open and is closed exactly once.
        unsafe { sys::bpf_object__close(self.obj.as_ptr()) }
    }
}

/// Map types this crate names (`enum bpf_map_type`).
pub mod map_type {
    /// `BPF_MAP_TYPE_ARRAY`.
    pub const ARRAY: u32 = 2;
    /// `BPF_MAP_TYPE_PERCPU_ARRAY`.
    pub const PERCPU_ARRAY: u32 = 6;
    /// `BPF_MAP_TYPE_ARRAY_OF_MAPS`.
    pub const ARRAY_OF_MAPS: u32 = 12;
    /// `BPF_MAP_TYPE_DEVMAP`.
    pub const DEVMAP: u32 = 14;
    /// `BPF_MAP_TYPE_DEVMAP_HASH`.
    pub const DEVMAP_HASH: u32 = 25;
    /// `BPF_MAP_TYPE_RINGBUF`
    pub const RINGBUF: u32 = 27;
}

/// Flags of map updates and lookups.
pub mod flags {
    /// `BPF_ANY`: create or replace.
    pub const ANY: u64 = 0;
    /// `BPF_F_LOCK`: copy the value under its `bpf_spin_lock` (update and lookup).
    pub const LOCK: u64 = 4;
}

/// A map of a loaded object, or one created at run time ([`OwnedMap`]).
#[derive(Debug, Clone)]
pub struct Map<'a> {
    fd: c_int,
    name: String,
    key_size: usize,
    value_size: usize,
    map_type: u32,
    max_entries: u32,
    _obj: std::marker::PhantomData<&'a Object>,
}

impl Map<'_> {
    /// The map's fd (for a map-in-map's value, or `bpftool`).
    pub fn fd(&self) -> i32 {
        self.fd
    }
    /// Key size in bytes.
    pub fn key_size(&self) -> usize {
        self.key_size
    }
    /// Value size in bytes (per CPU, for per-CPU maps).
    pub fn value_size(&self) -> usize {
        self.value_size
    }
    /// `enum bpf_map_type` value ([`map_type`]).
    pub fn map_type(&self) -> u32 {
        self.map_type
    }
    /// Number of entries.
    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    fn check(
        &self,
        what: &str,
        part: &'static str,
        len: usize,
        expected: usize,
    ) -> Result<(), BpfError> {
        if len != expected {
            return Err(BpfError::Size {
                what: format!("{what} map {}", self.name),
                part,
                len,
                expected,
            });
        }
        Ok(())
    }

    /// `bpf_map_update_elem` with `flags` ([`flags`]).
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), BpfError> {
        self.check("update", "key", key.len(), self.key_size)?;
        self.check("update", "value", value.len(), self.value_size)?;
        // SAFETY: key and value have exactly the map's sizes (checked above).
        let rc = unsafe {
            sys::bpf_map_update_elem(self.fd, key.as_ptr().cast(), value.as_ptr().cast(), flags)
        };
        if rc < 0 {
            return Err(os_err(format!("update map {}", self.name), rc));
        }
        Ok(())
    }

    /// `bpf_map_lookup_elem_flags`: `Ok(None)` when the key is absent (ENOENT).
    pub fn lookup(&self, key: &[u8], flags: u64) -> Result<Option<Vec<u8>>, BpfError> {
        self.check("lookup in", "key", key.len(), self.key_size)?;
        let mut value = vec![0u8; self.value_size];
        self.lookup_into(key, &mut value, flags)
            .map(|found| found.then_some(value))
    }

    fn lookup_into(&self, key: &[u8], value: &mut [u8], flags: u64) -> Result<bool, BpfError> {
        // SAFETY: key has the map's key size; value has room for what the kernel copies out
        // (value size, or value size rounded to 8 times the possible CPUs for per-CPU maps).
        let rc = unsafe {
            sys::bpf_map_lookup_elem_flags(
                self.fd,
                key.as_ptr().cast(),
                value.as_mut_ptr().cast(),
                flags,
            )
        };
        if rc < 0 {
            let e = os_err(format!("look up in map {}", self.name), rc);
            if e.errno() == Some(libc::ENOENT) {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(true)
    }

    /// Every value of an `ARRAY` map, in key order, `max_entries * value_size` bytes: read
    /// `chunk` entries a syscall (`bpf_map_lookup_batch`) instead of one lookup per key (a
    /// million keys: a thousand calls of 1,024 instead of a million). Entries written while it
    /// reads are seen in either state, each whole as a single lookup sees it.
    pub fn array_values(&self, chunk: u32) -> Result<Vec<u8>, BpfError> {
        if self.map_type != map_type::ARRAY {
            return Err(BpfError::MapType {
                what: "array_values",
                name: self.name.clone(),
                map_type: self.map_type,
                expected: map_type::ARRAY,
            });
        }
        let n = self.max_entries as usize;
        let vs = self.value_size;
        let chunk = chunk.max(1);
        let mut values = vec![0u8; n * vs];
        let mut keys = vec![0u8; chunk as usize * self.key_size];
        // The kernel's position: the key after the last one returned (an array's 4-byte key).
        let mut pos_in = [0u8; 4];
        let mut pos_out = [0u8; 4];
        let mut done = 0usize;
        while done < n {
            let mut count = chunk.min((n - done) as u32);
            let in_batch = if done == 0 {
                std::ptr::null_mut()
            } else {
                pos_in.as_mut_ptr().cast()
            };
            // SAFETY: keys has room for `count` keys and values[done * vs..] for `count`
            // values (count <= n - done); the position buffers hold an array's 4-byte key;
            // NULL opts is allowed.
            let rc = unsafe {
                sys::bpf_map_lookup_batch(
                    self.fd,
                    in_batch,
                    pos_out.as_mut_ptr().cast(),
                    keys.as_mut_ptr().cast(),
                    values[done * vs..].as_mut_ptr().cast(),
                    &mut count,
                    std::ptr::null(),
                )
            };
            done += count as usize;
            if rc < 0 {
                let e = os_err(format!("batch lookup in map {}", self.name), rc);
                if e.errno() == Some(libc::ENOENT) {
                    break; // the end of the map, with the last entries copied
                }
                return Err(e);
            }
            if count == 0 {
                break;
            }
            pos_in = pos_out;
        }
        Ok(values)
    }

    /// A per-CPU map's value on every possible CPU (`Ok(None)` when absent). Each element is
    /// the value's bytes (the kernel pads each CPU's copy to 8 bytes; the padding is cut off).
    pub fn lookup_percpu(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, BpfError> {
        self.check("per-CPU lookup in", "key", key.len(), self.key_size)?;
        let cpus = possible_cpus()?;
        let stride = self.value_size.div_ceil(8) * 8;
        let mut all = vec![0u8; stride * cpus];
        if !self.lookup_into(key, &mut all, 0)? {
            return Ok(None);
        }
        Ok(Some(
            all.chunks(stride)
                .map(|c| c[..self.value_size].to_vec())
                .collect(),
        ))
    }

    /// A per-CPU map's value for every possible CPU, `values` holding each CPU's copy in turn
    /// (each padded to 8 bytes, as [`Map::lookup_percpu`] reads them).
    pub fn update_percpu(&self, key: &[u8], values: &[u8]) -> Result<(), BpfError> {
        self.check("per-CPU update of", "key", key.len(), self.key_size)?;
        let stride = self.value_size.div_ceil(8) * 8;
        self.check(
            "per-CPU update of",
            "value",
            values.len(),
            stride * possible_cpus()?,
        )?;
        // SAFETY: key has the map's key size; values has one padded copy per possible CPU.
        let rc = unsafe {
            sys::bpf_map_update_elem(self.fd, key.as_ptr().cast(), values.as_ptr().cast(), 0)
        };
        if rc < 0 {
            return Err(os_err(format!("per-CPU update of map {}", self.name), rc));
        }
        Ok(())
    }

    /// `bpf_map_delete_elem`; deleting an absent key is not an error.
    pub fn delete(&self, key: &[u8]) -> Result<(), BpfError> {
        self.check("delete from", "key", key.len(), self.key_size)?;
        // SAFETY: key has the map's key size.
        let rc = unsafe { sys::bpf_map_delete_elem(self.fd, key.as_ptr().cast()) };
        if rc < 0 {
            let e = os_err(format!("delete from map {}", self.name), rc);
            if e.errno() == Some(libc::ENOENT) {
                return Ok(());
            }
            return Err(e);
        }
        Ok(())
    }

    /// A handle on a map this crate created (for [`OwnedMap`]).
    fn unowned(fd: c_int, name: &str, key: u32, value: u32, ty: u32, max: u32) -> Map<'static> {
        Map {
            fd,
            name: name.to_owned(),
            key_size: key as usize,
            value_size: value as usize,
            map_type: ty,
            max_entries: max,
            _obj: std::marker::PhantomData,
        }
    }
}

/// A map created at run time (`bpf_map_create`), such as an inner map of a map-in-map; closed
/// on drop (a map-in-map that holds it keeps the map alive in the kernel).
#[derive(Debug)]
pub struct OwnedMap {
    map: Map<'static>,
}

impl OwnedMap {
    /// Creates a map of `map_type` ([`map_type`]) with `map_flags`.
    pub fn create(
        map_type: u32,
        name: &str,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        map_flags: u32,
    ) -> Result<OwnedMap, BpfError> {
        let c = cstring(name);
        let opts = sys::bpf_map_create_opts {
            sz: std::mem::size_of::<sys::bpf_map_create_opts>(),
            map_flags,
            ..Default::default()
        };
        // SAFETY: plain values, a NUL-terminated name and a valid opts struct.
        let fd = unsafe {
            sys::bpf_map_create(
                map_type,
                c.as_ptr(),
                key_size,
                value_size,
                max_entries,
                &opts,
            )
        };
        if fd < 0 {
            return Err(os_err(format!("create map {name} (type {map_type})"), fd));
        }
        Ok(OwnedMap {
            map: Map::unowned(fd, name, key_size, value_size, map_type, max_entries),
        })
    }

    /// The map, for updates and lookups.
    pub fn as_map(&self) -> &Map<'static> {
        &self.map
    }
}

impl Drop for OwnedMap {
    fn drop(&mut self) {
        // SAFETY: the fd was returned by bpf_map_create and is closed once.
        unsafe { libc::close(self.map.fd) };
    }
}

/// A loaded program of an [`Object`].
#[derive(Debug)]
pub struct Program<'a> {
    fd: c_int,
    name: String,
    _obj: &'a Object,
}

/// What one `BPF_PROG_TEST_RUN` of an XDP program returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdpRun {
    /// The program's return value (`XDP_DROP` 1, `XDP_PASS` 2, `XDP_TX` 3, `XDP_REDIRECT` 4).
    pub retval: u32,
    /// The frame as the program left it.
    pub data: Vec<u8>,
}

/// XDP verdicts.
pub mod xdp {
    /// `XDP_ABORTED`.
    pub const ABORTED: u32 = 0;
    /// `XDP_DROP`.
    pub const DROP: u32 = 1;
    /// `XDP_PASS`.
    pub const PASS: u32 = 2;
    /// `XDP_TX`.
    pub const TX: u32 = 3;
    /// `XDP_REDIRECT`.
    pub const REDIRECT: u32 = 4;
}

/// What the kernel reports about a loaded program (`bpf_obj_get_info_by_fd`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgInfo {
    /// Program id (`bpftool prog show id N`).
    pub id: u32,
    /// Instructions the verifier processed (all paths, `verified_insns`).
    pub verified_insns: u32,
    /// Size of the translated program in bytes (8 per instruction).
    pub xlated_len: u32,
    /// Size of the JIT-compiled code in bytes.
    pub jited_len: u32,
}

impl Program<'_> {
    /// The program's fd.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Runs the XDP program once on `frame` (`BPF_PROG_TEST_RUN`, repeat 1) as if it arrived
    /// on interface `ingress_ifindex`, queue 0. The kernel looks the interface up in the
    /// calling thread's network namespace ([`in_netns`]) and refuses one it cannot find. A
    /// redirect is not carried out: the verdict says `XDP_REDIRECT` and the frame comes back.
    pub fn test_run_xdp(&self, frame: &[u8], ingress_ifindex: u32) -> Result<XdpRun, BpfError> {
        let mut out = vec![0u8; frame.len() + 256];
        let ctx = sys::xdp_md {
            data: 0,
            data_end: frame.len() as u32,
            data_meta: 0,
            ingress_ifindex,
            rx_queue_index: 0,
            egress_ifindex: 0,
        };
        let mut opts = sys::bpf_test_run_opts {
            sz: std::mem::size_of::<sys::bpf_test_run_opts>(),
            data_in: frame.as_ptr().cast(),
            data_out: out.as_mut_ptr().cast(),
            data_size_in: frame.len() as u32,
            data_size_out: out.len() as u32,
            ctx_in: (&ctx as *const sys::xdp_md).cast(),
            ctx_size_in: std::mem::size_of::<sys::xdp_md>() as u32,
            repeat: 1,
            ..Default::default()
        };
        // SAFETY: every pointer in opts points to a live buffer of the stated size.
        let rc = unsafe { sys::bpf_prog_test_run_opts(self.fd, &mut opts) };
        if rc < 0 {
            return Err(os_err(
                format!(
                    "BPF_PROG_TEST_RUN of {} on a {}-byte frame from ifindex {ingress_ifindex}",
                    self.name,
                    frame.len()
                ),
                rc,
            ));
        }
        out.truncate(opts.data_size_out as usize);
        Ok(XdpRun {
            retval: opts.retval,
            data: out,
        })
    }

    /// Runs the XDP program `repeat` times in live-frames mode (`BPF_PROG_RUN` with
    /// `BPF_F_TEST_XDP_LIVE_FRAMES`, as xdp-trafficgen does): the kernel builds real frames
    /// from `frame` in pages of its page pool, `batch_size` at a time (1..=256; 0: the kernel's
    /// 64), runs the program on each as if it arrived on `ingress_ifindex` (queue 0, looked up
    /// in the calling thread's network namespace), and carries out its verdict: `XDP_TX` and
    /// redirects are transmitted (`XDP_TX` out of the ingress interface), `XDP_PASS` goes to
    /// the stack, the rest is dropped. All on the calling thread's CPU. A page's bytes are
    /// copied from `frame` only the first time the run uses that page; when it comes round
    /// again it holds whatever was last written into it. Returns the kernel's mean time per
    /// repetition in nanoseconds (`duration`; time the thread was rescheduled away is left
    /// out).
    pub fn run_xdp_live(
        &self,
        frame: &[u8],
        ingress_ifindex: u32,
        repeat: u32,
        batch_size: u32,
    ) -> Result<u32, BpfError> {
        let ctx = sys::xdp_md {
            data: 0,
            data_end: frame.len() as u32,
            data_meta: 0,
            ingress_ifindex,
            rx_queue_index: 0,
            egress_ifindex: 0,
        };
        let mut opts = sys::bpf_test_run_opts {
            sz: std::mem::size_of::<sys::bpf_test_run_opts>(),
            data_in: frame.as_ptr().cast(),
            data_size_in: frame.len() as u32,
            ctx_in: (&ctx as *const sys::xdp_md).cast(),
            ctx_size_in: std::mem::size_of::<sys::xdp_md>() as u32,
            repeat: repeat.min(i32::MAX as u32) as i32,
            flags: sys::BPF_F_TEST_XDP_LIVE_FRAMES,
            batch_size,
            ..Default::default()
        };
        // SAFETY: data_in and ctx_in point to live buffers of the stated sizes, both outlive
        // the call; data_out and ctx_out are null, as live-frames mode requires (nothing is
        // written back but retval and duration, into opts).
        let rc = unsafe { sys::bpf_prog_test_run_opts(self.fd, &mut opts) };
        if rc < 0 {
            return Err(os_err(
                format!(
                    "BPF_PROG_RUN (live frames, repeat {repeat}, batch {batch_size}) of {} on a \
                     {}-byte frame from ifindex {ingress_ifindex}",
                    self.name,
                    frame.len()
                ),
                rc,
            ));
        }
        Ok(opts.duration)
    }

    /// The kernel's figures for this program.
    pub fn info(&self) -> Result<ProgInfo, BpfError> {
        let mut info = sys::bpf_prog_info::default();
        let mut len = std::mem::size_of::<sys::bpf_prog_info>() as u32;
        // SAFETY: info is a zeroed struct of `len` bytes with no pointers set, so the kernel
        // copies out only scalars.
        let rc = unsafe {
            sys::bpf_obj_get_info_by_fd(
                self.fd,
                (&mut info as *mut sys::bpf_prog_info).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(os_err(format!("get info of program {}", self.name), rc));
        }
        Ok(ProgInfo {
            id: info.id,
            verified_insns: info.verified_insns,
            xlated_len: info.xlated_prog_len,
            jited_len: info.jited_prog_len,
        })
    }

    /// Attaches the program to interface `ifindex` in `mode`, as a BPF link
    /// (`BPF_LINK_CREATE`, `BPF_XDP`) whose only reference is the returned [`XdpAttachment`]:
    /// the program stays attached until it drops, or this process ends however it ends (a
    /// SIGKILL too: the kernel closes the link's fd), or the interface goes away. An
    /// interface that already has an XDP program, attached by anyone in any way, refuses it
    /// (`EBUSY`): nothing is replaced.
    pub fn attach_xdp(&self, ifindex: u32, mode: XdpMode) -> Result<XdpAttachment, BpfError> {
        link_xdp(self.fd, &self.name, ifindex, mode)
    }
}

fn link_xdp(
    prog_fd: c_int,
    name: &str,
    ifindex: u32,
    mode: XdpMode,
) -> Result<XdpAttachment, BpfError> {
    let opts = sys::bpf_link_create_opts {
        sz: std::mem::size_of::<sys::bpf_link_create_opts>(),
        flags: mode.flags(),
        _pad: 0,
    };
    // SAFETY: opts is a valid, fully initialised options struct that outlives the call.
    let rc = unsafe { sys::bpf_link_create(prog_fd, ifindex as c_int, sys::BPF_XDP, &opts) };
    if rc < 0 {
        return Err(os_err(
            format!("attach XDP program {name} to ifindex {ifindex} ({mode:?})"),
            rc,
        ));
    }
    // SAFETY: rc is a new link fd that nothing else owns.
    let link = unsafe { OwnedFd::from_raw_fd(rc) };
    Ok(XdpAttachment { ifindex, link })
}

/// Where an XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`), before an skb exists.
    Native,
    /// On the skb path (`XDP_FLAGS_SKB_MODE`), for drivers without XDP support.
    Generic,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            XdpMode::Native => 4,
            XdpMode::Generic => 2,
        }
    }
}

/// An XDP program attached to an interface through a BPF link this process alone holds;
/// detached when it drops (the link's fd closes) or when the process ends.
#[derive(Debug)]
pub struct XdpAttachment {
    ifindex: u32,
    link: OwnedFd,
}

impl XdpAttachment {
    /// Detaches now (`BPF_LINK_DETACH`), reporting an error (drop only closes the fd, which
    /// detaches as well).
    pub fn detach(self) -> Result<(), BpfError> {
        // SAFETY: a link fd this attachment owns.
        let rc = unsafe { sys::bpf_link_detach(self.link.as_raw_fd()) };
        if rc < 0 {
            return Err(os_err(
                format!("detach XDP from ifindex {}", self.ifindex),
                rc,
            ));
        }
        Ok(())
    }
}

/// The XDP program attached to an interface by another loader (DPDK's `net_af_xdp` PMD, `ip
/// link`), opened by its id: its name, mode and maps, and a way to take the attachment over
/// as this process's own link ([`AttachedXdp::relink`]).
#[derive(Debug)]
pub struct AttachedXdp {
    ifindex: u32,
    fd: OwnedFd,
    id: u32,
    name: String,
    mode: XdpMode,
    map_ids: Vec<u32>,
}

/// The XDP program attached to interface `ifindex` (in this thread's network namespace), if
/// any. A program attached in hardware or several at once (`XDP_ATTACHED_HW`/`MULTI`) is
/// refused: nothing here handles them.
pub fn attached_xdp(ifindex: u32) -> Result<Option<AttachedXdp>, BpfError> {
    let mut q = sys::bpf_xdp_query_opts {
        sz: std::mem::size_of::<sys::bpf_xdp_query_opts>(),
        ..Default::default()
    };
    // SAFETY: q is a valid options struct the call fills.
    let rc = unsafe { sys::bpf_xdp_query(ifindex as c_int, 0, &mut q) };
    if rc < 0 {
        return Err(os_err(format!("query XDP on ifindex {ifindex}"), rc));
    }
    let mode = match q.attach_mode {
        0 => return Ok(None),
        sys::XDP_ATTACHED_DRV => XdpMode::Native,
        sys::XDP_ATTACHED_SKB => XdpMode::Generic,
        m => {
            return Err(BpfError::Os {
                what: format!(
                    "XDP on ifindex {ifindex}: attach mode {m} (hardware or several programs)"
                ),
                source: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            })
        }
    };
    // SAFETY: a plain id; a new fd or a negative error.
    let rc = unsafe { sys::bpf_prog_get_fd_by_id(q.prog_id) };
    if rc < 0 {
        return Err(os_err(format!("open XDP program id {}", q.prog_id), rc));
    }
    // SAFETY: rc is a new program fd that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(rc) };
    // Two passes: the number of maps, then their ids.
    let mut info = sys::bpf_prog_info::default();
    prog_info(fd.as_raw_fd(), &mut info)?;
    let mut map_ids = vec![0u32; info.nr_map_ids as usize];
    let mut info = sys::bpf_prog_info {
        nr_map_ids: map_ids.len() as u32,
        map_ids: map_ids.as_mut_ptr() as u64,
        ..Default::default()
    };
    prog_info(fd.as_raw_fd(), &mut info)?;
    map_ids.truncate(info.nr_map_ids as usize);
    Ok(Some(AttachedXdp {
        ifindex,
        fd,
        id: q.prog_id,
        name: c_name(&info.name),
        mode,
        map_ids,
    }))
}

fn prog_info(fd: c_int, info: &mut sys::bpf_prog_info) -> Result<(), BpfError> {
    let mut len = std::mem::size_of::<sys::bpf_prog_info>() as u32;
    // SAFETY: info is a bpf_prog_info of `len` bytes whose only pointer, map_ids, is null or
    // points to nr_map_ids u32s that live across the call.
    let rc = unsafe {
        sys::bpf_obj_get_info_by_fd(fd, (info as *mut sys::bpf_prog_info).cast(), &mut len)
    };
    if rc < 0 {
        return Err(os_err("get info of an attached XDP program", rc));
    }
    Ok(())
}

fn c_name(name: &[u8]) -> String {
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

impl AttachedXdp {
    /// The program's id.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The program's name (the kernel keeps the first 15 bytes).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Where it runs.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The program's map called `name`, opened by id.
    pub fn map(&self, name: &str) -> Result<OwnedMap, BpfError> {
        for &id in &self.map_ids {
            // SAFETY: a plain id; a new fd or a negative error.
            let rc = unsafe { sys::bpf_map_get_fd_by_id(id) };
            if rc < 0 {
                return Err(os_err(format!("open map id {id}"), rc));
            }
            // SAFETY: rc is a new map fd that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(rc) };
            let mut info = sys::bpf_map_info::default();
            let mut len = std::mem::size_of::<sys::bpf_map_info>() as u32;
            // SAFETY: info is a bpf_map_info of `len` bytes without pointers.
            let rc = unsafe {
                sys::bpf_obj_get_info_by_fd(
                    fd.as_raw_fd(),
                    (&mut info as *mut sys::bpf_map_info).cast(),
                    &mut len,
                )
            };
            if rc < 0 {
                return Err(os_err(format!("get info of map id {id}"), rc));
            }
            if c_name(&info.name) == name {
                return Ok(OwnedMap {
                    map: Map::unowned(
                        fd.into_raw_fd(),
                        name,
                        info.key_size,
                        info.value_size,
                        info.type_,
                        info.max_entries,
                    ),
                });
            }
        }
        Err(BpfError::NotFound {
            kind: "map",
            name: format!("{name} (of attached program {})", self.name),
        })
    }

    /// Takes the attachment over: detaches the program (only if it is still the one
    /// attached: `XDP_FLAGS_REPLACE`) and attaches it again, in the same mode, as a link this
    /// process holds ([`Program::attach_xdp`]), so that it goes when this process goes. Frames
    /// that arrive between the two calls go to the kernel.
    pub fn relink(self) -> Result<XdpAttachment, BpfError> {
        let opts = sys::bpf_xdp_attach_opts {
            sz: std::mem::size_of::<sys::bpf_xdp_attach_opts>(),
            old_prog_fd: self.fd.as_raw_fd(),
            _pad: 0,
        };
        // SAFETY: opts is valid for the call.
        let rc = unsafe { sys::bpf_xdp_detach(self.ifindex as c_int, self.mode.flags(), &opts) };
        if rc < 0 {
            return Err(os_err(
                format!(
                    "detach {} from ifindex {} to take it over",
                    self.name, self.ifindex
                ),
                rc,
            ));
        }
        link_xdp(self.fd.as_raw_fd(), &self.name, self.ifindex, self.mode)
    }
}

/// A consumer of a `BPF_MAP_TYPE_RINGBUF` map (libbpf's `ring_buffer`): records the programs
/// wrote are taken out with [`RingBuffer::consume`], without blocking. The ring's memory is
/// mapped into this process, and the mapping holds the map, so the consumer stays valid after
/// the object that made the map is dropped (it then sees no new records).
#[derive(Debug)]
pub struct RingBuffer {
    rb: NonNull<sys::ring_buffer>,
    /// Records taken by the callback during one `consume`: each a native-endian `u32` length,
    /// then its bytes. Boxed so its address, given to libbpf as the callback's context, never
    /// moves (a `Vec` alone would not do: moving the `RingBuffer` moves its header).
    #[allow(clippy::box_collection)]
    sink: Box<Vec<u8>>,
}

// SAFETY: the ring_buffer is heap data owned by this handle and used only through `&mut self`
// (consume) or for its epoll fd; libbpf has no thread affinity.
unsafe impl Send for RingBuffer {}

unsafe extern "C" fn ring_sample(
    ctx: *mut std::ffi::c_void,
    data: *mut std::ffi::c_void,
    size: usize,
) -> c_int {
    // SAFETY: ctx is the `Vec<u8>` inside the RingBuffer's box (set at ring_buffer__new), and
    // the callback runs only inside ring_buffer__consume, called from `&mut self`, so nothing
    // else touches the vector meanwhile.
    let sink = unsafe { &mut *ctx.cast::<Vec<u8>>() };
    // SAFETY: libbpf passes a record of `size` readable bytes, valid during the callback.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>().cast_const(), size) };
    sink.extend_from_slice(&(size as u32).to_ne_bytes());
    sink.extend_from_slice(bytes);
    0
}

impl RingBuffer {
    /// A consumer of `map`, which must be a `BPF_MAP_TYPE_RINGBUF`.
    pub fn new(map: &Map<'_>) -> Result<RingBuffer, BpfError> {
        let mut sink: Box<Vec<u8>> = Box::default();
        let ctx: *mut Vec<u8> = &mut *sink;
        // SAFETY: a map fd, a callback of the right signature, a context pointer that lives as
        // long as the ring_buffer (both are owned by the RingBuffer and freed together), no
        // options.
        let rb = unsafe {
            sys::ring_buffer__new(map.fd, Some(ring_sample), ctx.cast(), std::ptr::null())
        };
        let rb = NonNull::new(rb)
            .ok_or_else(|| os_err(format!("ring_buffer__new on map {}", map.name), -1))?;
        Ok(RingBuffer { rb, sink })
    }

    /// Takes every record written so far, calling `f` on each in order; returns how many.
    pub fn consume(&mut self, mut f: impl FnMut(&[u8])) -> Result<usize, BpfError> {
        self.sink.clear();
        // SAFETY: rb is live; the callback writes only into `sink`, which `&mut self` keeps
        // to ourselves.
        let rc = unsafe { sys::ring_buffer__consume(self.rb.as_ptr()) };
        if rc < 0 {
            return Err(os_err("ring_buffer__consume", rc));
        }
        let mut rest = self.sink.as_slice();
        let mut n = 0;
        while rest.len() >= 4 {
            let len = u32::from_ne_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
            f(&rest[4..4 + len]);
            rest = &rest[4 + len..];
            n += 1;
        }
        Ok(n)
    }

    /// An epoll fd that is readable when records are waiting (for a loop that sleeps).
    pub fn epoll_fd(&self) -> i32 {
        // SAFETY: rb is live.
        unsafe { sys::ring_buffer__epoll_fd(self.rb.as_ptr()) }
    }

    /// Sleeps until records are waiting or `timeout` has passed (whole milliseconds, rounded
    /// up; a signal ends the wait early too). Returns whether records are waiting; takes none.
    pub fn wait(&self, timeout: std::time::Duration) -> Result<bool, BpfError> {
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as c_int;
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: the ring's epoll fd is live while rb is; one event's room, as passed.
        let rc = unsafe { libc::epoll_wait(self.epoll_fd(), &mut ev, 1, ms) };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(os_err(
                "epoll_wait on the ring",
                -err.raw_os_error().unwrap_or(0),
            ));
        }
        Ok(rc > 0)
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: rb came from ring_buffer__new and is freed once; the sink it points into
        // is dropped after this.
        unsafe { sys::ring_buffer__free(self.rb.as_ptr()) };
    }
}

/// The number of possible CPUs: how many copies a per-CPU map value has.
pub fn possible_cpus() -> Result<usize, BpfError> {
    // SAFETY: no arguments; reads sysfs.
    let n = unsafe { sys::libbpf_num_possible_cpus() };
    if n <= 0 {
        return Err(os_err("count possible CPUs", n));
    }
    Ok(n as usize)
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn ifindex(name: &str) -> Result<u32, BpfError> {
    let c = cstring(name);
    // SAFETY: a NUL-terminated name.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(os_err(format!("find interface {name}"), -1));
    }
    Ok(i)
}

/// Runs `f` on a new thread that has entered the network namespace `ip netns` calls `netns`
/// (`/run/netns/NAME`), and returns its result. BPF_PROG_TEST_RUN's ingress interface, devmap
/// entries and [`ifindex`] all resolve interface indexes in the calling thread's namespace.
pub fn in_netns<T: Send>(netns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    let path = format!("/run/netns/{netns}");
    let ns = File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    std::thread::scope(|s| {
        s.spawn(move || -> io::Result<T> {
            // SAFETY: `ns` is an open namespace file; setns changes only this thread's
            // network namespace, and the thread ends with the closure.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(f())
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_no_object_are_refused_with_an_errno() {
        let e = Object::open(b"not an ELF file", "junk").expect_err("not an object");
        assert!(e.errno().is_some(), "{e}");
        assert!(e.to_string().contains("open BPF object junk"), "{e}");
    }

    #[test]
    fn loopback_is_interface_one_and_a_missing_one_is_an_error() {
        assert_eq!(ifindex("lo").expect("lo"), 1);
        let e = ifindex("nb-no-such-if").expect_err("absent");
        assert_eq!(e.errno(), Some(libc::ENODEV), "{e}");
    }

    #[test]
    fn the_option_structs_have_libbpf_sizes() {
        // sizeof of each struct in libbpf 1.1 and linux/bpf.h on x86-64 (checked with gcc).
        assert_eq!(std::mem::size_of::<sys::bpf_object_open_opts>(), 80);
        assert_eq!(std::mem::size_of::<sys::bpf_test_run_opts>(), 80);
        assert_eq!(std::mem::size_of::<sys::bpf_map_create_opts>(), 48);
        assert_eq!(std::mem::size_of::<sys::xdp_md>(), 24);
        assert_eq!(std::mem::size_of::<sys::bpf_prog_info>(), 232);
    }
}
