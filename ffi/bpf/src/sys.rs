//! The libbpf 1.1 declarations this crate uses, written by hand from `bpf/bpf.h`,
//! `bpf/libbpf.h` and `linux/bpf.h` (structs with a leading `sz` are libbpf's extensible
//! options: fields past `sz` are zero unless set).

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};

#[repr(C)]
pub struct bpf_object {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct bpf_program {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct bpf_map {
    _opaque: [u8; 0],
}

/// The head of `struct bpf_link_create_opts` (libbpf 1.1): `sz` set to this struct's size
/// tells libbpf that the fields after `flags` are zero, as they must be for an XDP link.
#[repr(C)]
pub struct bpf_link_create_opts {
    pub sz: usize,
    pub flags: u32,
    pub _pad: u32,
}

/// `struct bpf_xdp_query_opts` (libbpf 1.1), its tail padding spelled out.
#[repr(C)]
#[derive(Default)]
pub struct bpf_xdp_query_opts {
    pub sz: usize,
    pub prog_id: u32,
    pub drv_prog_id: u32,
    pub hw_prog_id: u32,
    pub skb_prog_id: u32,
    pub attach_mode: u8,
    pub _pad: [u8; 7],
}

/// `struct bpf_xdp_attach_opts` (libbpf 1.1), its tail padding spelled out.
#[repr(C)]
pub struct bpf_xdp_attach_opts {
    pub sz: usize,
    pub old_prog_fd: c_int,
    pub _pad: u32,
}

/// The head of `struct bpf_map_info` (linux/bpf.h): the kernel fills what fits.
#[repr(C, align(8))]
#[derive(Default)]
pub struct bpf_map_info {
    pub type_: u32,
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub name: [u8; 16],
}

/// `XDP_ATTACHED_DRV` and `XDP_ATTACHED_SKB` (linux/if_link.h).
pub const XDP_ATTACHED_DRV: u8 = 1;
pub const XDP_ATTACHED_SKB: u8 = 2;

/// `enum bpf_attach_type`'s `BPF_XDP` (linux/bpf.h).
pub const BPF_XDP: u32 = 37;

/// `struct bpf_object_open_opts` (libbpf 1.1), its padding spelled out: libbpf refuses
/// non-zero bytes past the fields it knows, and Rust leaves implicit padding undefined.
#[repr(C)]
pub struct bpf_object_open_opts {
    pub sz: usize,
    pub object_name: *const c_char,
    pub relaxed_maps: bool,
    pub _pad0: [u8; 7],
    pub pin_root_path: *const c_char,
    pub attach_prog_fd: u32,
    pub _pad1: u32,
    pub kconfig: *const c_char,
    pub btf_custom_path: *const c_char,
    pub kernel_log_buf: *mut c_char,
    pub kernel_log_size: usize,
    pub kernel_log_level: u32,
    pub _pad2: u32,
}

impl Default for bpf_object_open_opts {
    fn default() -> Self {
        bpf_object_open_opts {
            sz: 0,
            object_name: std::ptr::null(),
            relaxed_maps: false,
            _pad0: [0; 7],
            pin_root_path: std::ptr::null(),
            attach_prog_fd: 0,
            _pad1: 0,
            kconfig: std::ptr::null(),
            btf_custom_path: std::ptr::null(),
            kernel_log_buf: std::ptr::null_mut(),
            kernel_log_size: 0,
            kernel_log_level: 0,
            _pad2: 0,
        }
    }
}

/// `struct bpf_map_create_opts`.
#[repr(C)]
#[derive(Default)]
pub struct bpf_map_create_opts {
    pub sz: usize,
    pub btf_fd: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub btf_vmlinux_value_type_id: u32,
    pub inner_map_fd: u32,
    pub map_flags: u32,
    pub map_extra: u64,
    pub numa_node: u32,
    pub map_ifindex: u32,
}

/// `BPF_F_TEST_XDP_LIVE_FRAMES` (`linux/bpf.h`): `BPF_PROG_RUN` of an XDP program carries out
/// its verdicts on real frames.
pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// `struct bpf_test_run_opts`.
#[repr(C)]
pub struct bpf_test_run_opts {
    pub sz: usize,
    pub data_in: *const c_void,
    pub data_out: *mut c_void,
    pub data_size_in: u32,
    pub data_size_out: u32,
    pub ctx_in: *const c_void,
    pub ctx_out: *mut c_void,
    pub ctx_size_in: u32,
    pub ctx_size_out: u32,
    pub retval: u32,
    pub repeat: c_int,
    pub duration: u32,
    pub flags: u32,
    pub cpu: u32,
    pub batch_size: u32,
}

impl Default for bpf_test_run_opts {
    fn default() -> Self {
        bpf_test_run_opts {
            sz: 0,
            data_in: std::ptr::null(),
            data_out: std::ptr::null_mut(),
            data_size_in: 0,
            data_size_out: 0,
            ctx_in: std::ptr::null(),
            ctx_out: std::ptr::null_mut(),
            ctx_size_in: 0,
            ctx_size_out: 0,
            retval: 0,
            repeat: 0,
            duration: 0,
            flags: 0,
            cpu: 0,
            batch_size: 0,
        }
    }
}

/// `struct xdp_md`: the XDP program's context, as BPF_PROG_TEST_RUN takes it.
#[repr(C)]
pub struct xdp_md {
    pub data: u32,
    pub data_end: u32,
    pub data_meta: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
}

/// `struct bpf_prog_info` of `linux/bpf.h` (kernel 6.x layout, up to its last field).
#[repr(C, align(8))]
#[derive(Default)]
pub struct bpf_prog_info {
    pub type_: u32,
    pub id: u32,
    pub tag: [u8; 8],
    pub jited_prog_len: u32,
    pub xlated_prog_len: u32,
    pub jited_prog_insns: u64,
    pub xlated_prog_insns: u64,
    pub load_time: u64,
    pub created_by_uid: u32,
    pub nr_map_ids: u32,
    pub map_ids: u64,
    pub name: [u8; 16],
    pub ifindex: u32,
    pub gpl_compatible: u32,
    pub netns_dev: u64,
    pub netns_ino: u64,
    pub nr_jited_ksyms: u32,
    pub nr_jited_func_lens: u32,
    pub jited_ksyms: u64,
    pub jited_func_lens: u64,
    pub btf_id: u32,
    pub func_info_rec_size: u32,
    pub func_info: u64,
    pub nr_func_info: u32,
    pub nr_line_info: u32,
    pub line_info: u64,
    pub jited_line_info: u64,
    pub nr_jited_line_info: u32,
    pub line_info_rec_size: u32,
    pub jited_line_info_rec_size: u32,
    pub nr_prog_tags: u32,
    pub prog_tags: u64,
    pub run_time_ns: u64,
    pub run_cnt: u64,
    pub recursion_misses: u64,
    pub verified_insns: u32,
    pub attach_btf_obj_id: u32,
    pub attach_btf_id: u32,
    pub _pad: u32,
}

#[link(name = "bpf")]
extern "C" {
    pub fn bpf_object__open_mem(
        obj_buf: *const c_void,
        obj_buf_sz: usize,
        opts: *const bpf_object_open_opts,
    ) -> *mut bpf_object;
    pub fn bpf_object__load(obj: *mut bpf_object) -> c_int;
    pub fn bpf_object__close(obj: *mut bpf_object);
    pub fn bpf_object__find_program_by_name(
        obj: *const bpf_object,
        name: *const c_char,
    ) -> *mut bpf_program;
    pub fn bpf_object__find_map_by_name(
        obj: *const bpf_object,
        name: *const c_char,
    ) -> *mut bpf_map;
    pub fn bpf_program__fd(prog: *const bpf_program) -> c_int;
    pub fn bpf_map__fd(map: *const bpf_map) -> c_int;
    pub fn bpf_map__set_max_entries(map: *mut bpf_map, max_entries: u32) -> c_int;
    pub fn bpf_map__max_entries(map: *const bpf_map) -> u32;
    pub fn bpf_map__key_size(map: *const bpf_map) -> u32;
    pub fn bpf_map__value_size(map: *const bpf_map) -> u32;
    pub fn bpf_map__type(map: *const bpf_map) -> c_int;
    pub fn bpf_map__initial_value(map: *mut bpf_map, psize: *mut usize) -> *const c_void;
    pub fn bpf_map__set_initial_value(map: *mut bpf_map, data: *const c_void, size: usize)
        -> c_int;
    pub fn bpf_map_create(
        map_type: u32,
        map_name: *const c_char,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        opts: *const bpf_map_create_opts,
    ) -> c_int;
    pub fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
    pub fn bpf_map_lookup_elem_flags(
        fd: c_int,
        key: *const c_void,
        value: *mut c_void,
        flags: u64,
    ) -> c_int;
    pub fn bpf_map_delete_elem(fd: c_int, key: *const c_void) -> c_int;
    /// `opts` may be NULL (no element flags).
    pub fn bpf_map_lookup_batch(
        fd: c_int,
        in_batch: *mut c_void,
        out_batch: *mut c_void,
        keys: *mut c_void,
        values: *mut c_void,
        count: *mut u32,
        opts: *const c_void,
    ) -> c_int;
    pub fn bpf_prog_test_run_opts(prog_fd: c_int, opts: *mut bpf_test_run_opts) -> c_int;
    pub fn bpf_obj_get_info_by_fd(bpf_fd: c_int, info: *mut c_void, info_len: *mut u32) -> c_int;
    pub fn bpf_link_create(
        prog_fd: c_int,
        target_fd: c_int,
        attach_type: u32,
        opts: *const bpf_link_create_opts,
    ) -> c_int;
    pub fn bpf_link_detach(link_fd: c_int) -> c_int;
    pub fn bpf_xdp_query(ifindex: c_int, flags: c_int, opts: *mut bpf_xdp_query_opts) -> c_int;
    pub fn bpf_xdp_detach(ifindex: c_int, flags: u32, opts: *const bpf_xdp_attach_opts) -> c_int;
    pub fn bpf_prog_get_fd_by_id(id: u32) -> c_int;
    pub fn bpf_map_get_fd_by_id(id: u32) -> c_int;
    pub fn libbpf_num_possible_cpus() -> c_int;
    pub fn ring_buffer__new(
        map_fd: c_int,
        sample_cb: ring_buffer_sample_fn,
        ctx: *mut c_void,
        opts: *const c_void,
    ) -> *mut ring_buffer;
    pub fn ring_buffer__consume(rb: *mut ring_buffer) -> c_int;
    pub fn ring_buffer__epoll_fd(rb: *const ring_buffer) -> c_int;
    pub fn ring_buffer__free(rb: *mut ring_buffer);
}

/// `struct ring_buffer` of libbpf: opaque.
#[repr(C)]
pub struct ring_buffer {
    _private: [u8; 0],
}

/// `ring_buffer_sample_fn`: called once per record by `ring_buffer__consume`.
pub type ring_buffer_sample_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, data: *mut c_void, size: usize) -> c_int>;
