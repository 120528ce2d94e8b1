// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// nb_steer: the steering program of barrier-switch's AF_XDP ports (issue 25). Loaded by DPDK's
// net_af_xdp PMD from the file its `xdp_prog=` devarg names; the PMD puts each of its sockets
// into `xsks_map` at the socket's queue index. A barrier frame (EtherType 0x88B5, no VLAN tag,
// docs/wire-format.md) received on a queue that has a socket goes to that socket, so to the
// switch; every other frame goes on to the kernel (XDP_PASS), so the interface keeps its
// addresses, routes, bridge membership and neighbour discovery. The switch reads
// `nb_steer_stats` for its counters of the traffic it passed.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define ETHERTYPE 0x88B5
#define MAX_QUEUES 64

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

// Per CPU, indexed by enum nb_steer_stat.
enum nb_steer_stat {
	STEER_PASS_FRAMES,    // frames given to the kernel: not barrier frames
	STEER_PASS_BYTES,
	STEER_FRAMES,         // barrier frames redirected to the switch's socket
	STEER_BYTES,
	STEER_NO_SOCKET,      // barrier frames on a queue the switch does not serve: to the kernel
	STEER_STATS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STEER_STATS);
	__type(key, __u32);
	__type(value, __u64);
} nb_steer_stats SEC(".maps");

static __always_inline void count(__u32 stat, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&nb_steer_stats, &stat);
	if (c)
		*c += n;
}

SEC("xdp")
int nb_steer(struct xdp_md *ctx)
{
	const __u8 *p = (const __u8 *)(long)ctx->data;
	const __u8 *end = (const __u8 *)(long)ctx->data_end;
	__u64 len = end - p;
	__u32 q = ctx->rx_queue_index;

	if (p + 14 > end || (((__u16)p[12] << 8) | p[13]) != ETHERTYPE) {
		count(STEER_PASS_FRAMES, 1);
		count(STEER_PASS_BYTES, len);
		return XDP_PASS;
	}
	if (!bpf_map_lookup_elem(&xsks_map, &q)) {
		count(STEER_NO_SOCKET, 1);
		return XDP_PASS;
	}
	count(STEER_FRAMES, 1);
	count(STEER_BYTES, len);
	return bpf_redirect_map(&xsks_map, q, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
