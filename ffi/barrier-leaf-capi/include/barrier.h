/*
 * barrier.h: the C API of libbarrier, a compute node's (leaf's) side of in-network barrier
 * synchronization (netbarrier). A leaf opens an interface towards its parent switch, joins
 * barrier groups, and waits at barriers: it sends a reduce frame, re-sends it when no release
 * comes within the re-send timeout, and returns when the release arrives.
 *
 * Errors are returned as negative barrier_status codes; barrier_strerror() names a code and
 * barrier_leaf_last_error() gives the details of the last failure on the calling thread.
 * A barrier_leaf handle is not thread-safe: use one per thread, or lock around it.
 * Link with -lbarrier (pkg-config: barrier). See docs/leaf.md.
 */
#ifndef BARRIER_H
#define BARRIER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. 0 and positive values are not errors. */
typedef enum barrier_status {
    BARRIER_OK = 0,
    BARRIER_PENDING = 1,      /* barrier_leaf_try_wait: not released yet; call again */
    BARRIER_EINVAL = -1,      /* bad argument: NULL pointer, bad name, group out of range */
    BARRIER_EIO = -2,         /* socket error while sending or receiving */
    BARRIER_ETIMEDOUT = -3,   /* the barrier was not released within the timeout */
    BARRIER_ENOGROUP = -4,    /* the group was not added to this leaf */
    BARRIER_EBUSY = -5,       /* group already added, or already waiting at its barrier */
    BARRIER_EPERM = -6,       /* not permitted: raw sockets need CAP_NET_RAW */
    BARRIER_ENODEV = -7,      /* no such network interface */
    BARRIER_EINTERNAL = -8,   /* a bug in libbarrier (caught panic); the handle may be unusable */
    BARRIER_EABORTED = -9,    /* the group's run was aborted: a switch declared a member failed
                               * (barrier_leaf_last_error names the switch and port); no barrier
                               * of this epoch completes: management resets the group, and the
                               * job reopens the leaf in the new epoch */
    BARRIER_EEPOCHINUSE = -10,/* the switch answers the leaf's reduces with releases of another
                               * barrier of the same epoch: an earlier run used the group's epoch
                               * (barrier_leaf_last_error names group, epoch, both barriers and
                               * the fix). Reported within a few re-send periods; final for the
                               * epoch, like BARRIER_EABORTED: reset the group's run on every
                               * switch of its tree (barrierctl reset PLAN) and reopen the leaf
                               * with opts.epoch = the new epoch */
    BARRIER_ENOTSUP = -11     /* not in this build: barrier_leaf_open_dpdk in a libbarrier built
                               * without DPDK (cargo feature `dpdk` of barrier-leaf-capi) */
} barrier_status;

/* An open leaf: one interface, a set of groups. */
typedef struct barrier_leaf barrier_leaf;

/* Settings for barrier_leaf_open. Fill with barrier_leaf_options_init, then change fields. */
typedef struct barrier_leaf_options {
    uint32_t resend_timeout_us; /* re-send the reduce after this long without release (1000) */
    uint64_t wait_timeout_us;   /* default timeout of barrier_leaf_wait (10 s) */
    uint8_t dst_mac[6];         /* destination MAC of reduces (ff:ff:ff:ff:ff:ff; the switch accepts any) */
    uint8_t timestamps;         /* nonzero: carry the send time in each reduce (0) */
    uint8_t reserved;           /* must be 0 */
    uint32_t first_seq;         /* sequence number of the first barrier of each group (0) */
    uint32_t epoch;             /* the groups' epoch on the switches, as `barrierctl group show`
                                   prints it (1: a group configured without an epoch key);
                                   releases of another epoch are ignored */
} barrier_leaf_options;

/* One released barrier as this leaf saw it. Times are CLOCK_MONOTONIC nanoseconds. */
typedef struct barrier_record {
    uint32_t group;
    uint32_t seq;             /* the barrier's sequence number */
    uint64_t first_reduce_ns; /* when this leaf first sent its reduce */
    uint64_t release_ns;      /* when the release arrived */
    uint32_t resends;         /* how often the reduce was re-sent */
    uint32_t reserved;
} barrier_record;

/* Counters of one leaf over all its groups. */
typedef struct barrier_stats {
    uint64_t reduces;        /* first reduces sent (one per barrier) */
    uint64_t resends;        /* reduces re-sent after the timer expired */
    uint64_t releases;       /* releases that ended a barrier */
    uint64_t stale_releases; /* duplicate or out-of-date releases, ignored */
    uint64_t foreign_frames; /* barrier frames of other groups, or reduces */
    uint64_t bad_frames;     /* frames that did not parse */
} barrier_stats;

/* Fills *opts with the defaults. */
void barrier_leaf_options_init(barrier_leaf_options *opts);

/* Opens a leaf on network interface `ifname` (AF_PACKET, EtherType 0x88B5; needs CAP_NET_RAW).
 * `opts` may be NULL for the defaults. On success stores the handle in *out. */
int barrier_leaf_open(const char *ifname, const barrier_leaf_options *opts, barrier_leaf **out);

/* Opens a leaf on DPDK port `port` (a PCI address given with -a in eal_args, or a virtual
 * device given with --vdev, e.g. "net_af_packet0"): one RX and one TX queue, polled (a wait
 * spins its thread on the CPU; give it a core of its own). `eal_args` are DPDK's EAL arguments
 * as one string split on spaces (no quoting), without a program name, e.g.
 * "-l 2 --no-huge -m 256 --vdev=net_af_packet0,iface=eth1 --file-prefix=rank3"; the first call
 * in a process starts the EAL with them (on the calling thread, which becomes EAL's main lcore)
 * and it stays up until the process exits. Later calls open more ports on it and take NULL or
 * the same arguments (BARRIER_EINVAL otherwise). `opts` may be NULL for the defaults.
 * BARRIER_ENOTSUP when libbarrier was built without DPDK (the default build; cargo build -p
 * barrier-leaf-capi --features dpdk). Needs what DPDK needs: root for the virtual devices used
 * here, hugepages unless --no-huge. See docs/leaf.md. */
int barrier_leaf_open_dpdk(const char *eal_args, const char *port, const barrier_leaf_options *opts,
                           barrier_leaf **out);

/* Busy-polls the link for up to `us` microseconds before sleeping, in every wait for a frame
 * from now on (barrier_leaf_wait, barrier_leaf_poll with a timeout): a release that comes
 * within it is taken without the sleep and wake-up of a blocking AF_PACKET wait, at the price of
 * a busy CPU for up to `us` per wait. 0 (the default) blocks at once. What MPI libraries do
 * before they block; see docs/leaf.md for measurements. */
int barrier_leaf_set_busy_poll(barrier_leaf *leaf, uint32_t us);

/* With `yield_cpu` nonzero, the busy poll of barrier_leaf_set_busy_poll gives the CPU to other
 * runnable threads between polls (sched_yield) instead of spinning, as MPI libraries do when
 * ranks outnumber cores; 0 (the default) spins. See docs/leaf.md: a much lower median where
 * cores are shared, a worse tail. */
int barrier_leaf_set_busy_poll_yield(barrier_leaf *leaf, int yield_cpu);

/* Joins barrier group `group` (0 .. 2^20-1); its first barrier has opts->first_seq. */
int barrier_leaf_add_group(barrier_leaf *leaf, uint32_t group);

/* The barrier: arrives (sends the reduce) unless already arrived with barrier_leaf_arrive, and
 * blocks until the release, re-sending on the re-send timeout. timeout_us 0 means the leaf's
 * wait_timeout_us. On BARRIER_ETIMEDOUT the leaf still waits at that barrier (the message names
 * group and sequence); calling again goes on waiting. `rec` may be NULL. */
int barrier_leaf_wait(barrier_leaf *leaf, uint32_t group, uint64_t timeout_us, barrier_record *rec);

/* Non-blocking: arrives at the group's barrier (sends the reduce). BARRIER_EBUSY if waiting. */
int barrier_leaf_arrive(barrier_leaf *leaf, uint32_t group);

/* Non-blocking barrier: arrives if not yet arrived, handles received frames and timers, and
 * returns BARRIER_OK (filling *rec if not NULL) once released, BARRIER_PENDING before that,
 * BARRIER_ETIMEDOUT once the barrier waited longer than wait_timeout_us (still pending). */
int barrier_leaf_try_wait(barrier_leaf *leaf, uint32_t group, barrier_record *rec);

/* For event loops with several groups: handles frames and timers, waiting up to timeout_us for
 * a frame (0: do not wait); copies up to `cap` released barriers into recs and their number into
 * *n. Releases beyond `cap` are kept for the next call. */
int barrier_leaf_poll(barrier_leaf *leaf, uint32_t timeout_us, barrier_record *recs, size_t cap, size_t *n);

/* The sequence number of the group's current (or next) barrier. */
int barrier_leaf_seq(const barrier_leaf *leaf, uint32_t group, uint32_t *seq);

/* The leaf's counters. */
int barrier_leaf_stats(const barrier_leaf *leaf, barrier_stats *out);

/* From now on, writes one line per released barrier to file `path`: JSON lines when it ends in
 * .json or .jsonl, CSV (header group,seq,first_reduce_ns,release_ns,resends) otherwise. */
int barrier_leaf_records_to(barrier_leaf *leaf, const char *path);

/* Closes the leaf (flushing records) and frees it. NULL is ignored. */
void barrier_leaf_close(barrier_leaf *leaf);

/* Details of the last failure on this thread ("" if none). Valid until the next failing call on
 * this thread; do not free. */
const char *barrier_leaf_last_error(void);

/* A static description of a barrier_status code. */
const char *barrier_strerror(int status);

/* The library version, e.g. "0.1.0". */
const char *barrier_version(void);

#ifdef __cplusplus
}
#endif

#endif /* BARRIER_H */
