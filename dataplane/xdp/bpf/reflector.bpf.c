// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// The baseline and the traffic source of the XDP switch's frames/s measurement (issue 24,
// `barrier-perf xdp`, perf/README.md):
//
// - nb_reflect: the XDP reflector, the least a program that answers a frame can do: swap the
//   MAC addresses and send the frame back out (XDP_TX).
// - nb_leaf: attached to the far end of the veth pair both programs send into. It stands for
//   the leaves: every frame it receives is rewritten, in place, into the next reduce the leaves
//   send (group c mod 2^shift, barrier c >> shift, for a per-CPU count c), and dropped. In
//   BPF_PROG_RUN's live-frames mode the kernel does not copy the input into a page again when
//   the page comes round (net/bpf/test_run.c: only the first use of a page in a run is
//   initialised; later uses reset the data pointers, not the bytes), so what nb_leaf writes is
//   what the program under test receives next. It does the same work whatever it is given, so
//   the reflector and the switch pay the same for it.
// - nb_kick: nb_leaf's rewrite, sent (XDP_TX) instead of dropped: run with BPF_PROG_RUN live
//   frames on the leaves' end, it starts the closed loop that measures barrier-switch on
//   net_af_packet on the same veth pair (one reduce per group, barrier 0).
// - nb_pong: attached to the leaves' end for that measurement: every release it receives
//   becomes the same group's next reduce (barrier + 1) and goes back (XDP_TX); it counts them
//   (nb_pong_count). Anything else goes on to the kernel.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define FRAME_LEN 60
#define HEADER_END 40

// The leaves' registers: [0] the reduce's template (epoch, source MAC), set by userspace.
struct nb_leaf_cfg {
	__u32 shift; // groups = 2^shift
	__u32 epoch;
	__u8 mac[6];
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nb_leaf_cfg);
} nb_leaf_cfg SEC(".maps");

// Per CPU: reduces written so far (the next one's number).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} nb_leaf_count SEC(".maps");

SEC("xdp")
int nb_reflect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u16 *p = data;
	if ((void *)(p + 6) > data_end)
		return XDP_DROP;
	__u16 a = p[0], b = p[1], c = p[2];
	p[0] = p[3];
	p[1] = p[4];
	p[2] = p[5];
	p[3] = a;
	p[4] = b;
	p[5] = c;
	return XDP_TX;
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

// Per CPU: releases nb_pong turned into reduces.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} nb_pong_count SEC(".maps");

// Writes FrameRepr::emit's reduce of `group`, barrier `seq` at p (60 bytes, checked by the
// caller): broadcast, the leaves' MAC, magic 0xBA, version 2, kind 1, the checksum.
static __always_inline void write_reduce(__u8 *p, const struct nb_leaf_cfg *cfg, __u32 group,
					 __u32 seq)
{
#pragma unroll
	for (int i = 0; i < 6; i++) {
		p[i] = 0xff;
		p[6 + i] = cfg->mac[i];
	}
	p[12] = 0x88;
	p[13] = 0xB5;
	p[14] = 0xBA;
	p[15] = 2;
	p[16] = 1;
	p[17] = 0;
	*(__u32 *)(p + 18) = bpf_htonl(group);
	*(__u32 *)(p + 22) = bpf_htonl(cfg->epoch);
	*(__u32 *)(p + 26) = bpf_htonl(seq);
	*(__u64 *)(p + 30) = 0;
	p[38] = 0;
	p[39] = 0;
	__u32 sum = 0;
#pragma unroll
	for (int i = 14; i < HEADER_END; i += 2)
		sum += (__u32)p[i] << 8 | p[i + 1];
	__u16 k = ~csum_fold(sum);
	p[38] = k >> 8;
	p[39] = k & 0xff;
}

// nb_leaf's rewrite: the leaves' next reduce (group c mod 2^shift, barrier c >> shift).
static __always_inline int next_reduce(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 zero = 0;
	if (p + FRAME_LEN > (__u8 *)data_end)
		return -1;
	struct nb_leaf_cfg *cfg = bpf_map_lookup_elem(&nb_leaf_cfg, &zero);
	__u64 *count = bpf_map_lookup_elem(&nb_leaf_count, &zero);
	if (!cfg || !count)
		return -1;
	__u64 c = (*count)++;
	__u32 shift = cfg->shift & 31;
	write_reduce(p, cfg, (__u32)(c & ((1ull << shift) - 1)), (__u32)(c >> shift));
	return 0;
}

SEC("xdp")
int nb_leaf(struct xdp_md *ctx)
{
	next_reduce(ctx);
	return XDP_DROP;
}

SEC("xdp")
int nb_kick(struct xdp_md *ctx)
{
	return next_reduce(ctx) == 0 ? XDP_TX : XDP_DROP;
}

SEC("xdp")
int nb_pong(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 zero = 0;
	if (p + FRAME_LEN > (__u8 *)data_end)
		return XDP_PASS;
	// A release (EtherType, magic, version, kind 2); anything else is the kernel's.
	if (p[12] != 0x88 || p[13] != 0xB5 || p[14] != 0xBA || p[15] != 2 || p[16] != 2)
		return XDP_PASS;
	struct nb_leaf_cfg *cfg = bpf_map_lookup_elem(&nb_leaf_cfg, &zero);
	__u64 *count = bpf_map_lookup_elem(&nb_pong_count, &zero);
	if (!cfg || !count)
		return XDP_DROP;
	*count += 1;
	__u32 group = bpf_ntohl(*(__u32 *)(p + 18));
	__u32 seq = bpf_ntohl(*(__u32 *)(p + 26));
	write_reduce(p, cfg, group, seq + 1);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
