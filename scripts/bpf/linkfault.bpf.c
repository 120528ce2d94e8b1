// SPDX-License-Identifier: GPL-2.0
/* Link faults for veth links in the namespace test bed: a tc classifier for clsact egress (or,
 * built with -DINGRESS=1, clsact ingress) that drops, duplicates and corrupts frames at set rates. The kernels of the development machines
 * lack netem, so this program stands in for `tc qdisc ... netem loss/duplicate/corrupt`.
 *
 * Rates are compile-time constants (per million frames), one object per rate set, built by
 * scripts/bpf/build.sh; docs/faults.md says why not a map. Build:
 *   clang -O2 -g -target bpf -I/usr/include/$(gcc -dumpmachine) \
 *         -DDROP_PPM=200000 -c linkfault.bpf.c -o linkfault.o
 * Attach:
 *   tc qdisc add dev X clsact; tc filter add dev X egress bpf da obj linkfault.o sec tc
 * The ingress variant (-DINGRESS=1, `tc filter add dev X ingress ...`) is for the frames an XDP
 * program sends into X's peer: they bypass the qdisc layer on the sending side, so no egress
 * hook sees them (docs/faults.md, "Faults on a link with an XDP switch").
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Per-million rates: 0 disables the fault, 1000000 applies it to every frame. */
#ifndef DROP_PPM
#define DROP_PPM 0
#endif
#ifndef DUP_PPM
#define DUP_PPM 0
#endif
#ifndef CORRUPT_PPM
#define CORRUPT_PPM 0
#endif
/* 1: only frames of EtherType BARRIER_ETHERTYPE are touched; 0: every frame on the link. */
#ifndef BARRIER_ONLY
#define BARRIER_ONLY 1
#endif
#ifndef BARRIER_ETHERTYPE
#define BARRIER_ETHERTYPE 0x88B5
#endif
/* Corruption XORs one byte of the barrier header (bytes 14..37, magic through timestamp, wire
 * format version 2: the checksum itself is at 38..40) with
 * CORRUPT_XOR: the byte at CORRUPT_OFFSET, or a uniformly random header byte when it is -1. */
#ifndef CORRUPT_OFFSET
#define CORRUPT_OFFSET -1
#endif
#ifndef CORRUPT_XOR
#define CORRUPT_XOR 0xFF
#endif
/* skb->mark value that tags our own duplicate: the clone re-enters this egress hook, and must
 * pass untouched, otherwise a duplicate could be duplicated again (or dropped) and the rate
 * would no longer be the configured one. The mark does not survive into the peer namespace
 * (veth scrubs it when crossing namespaces) and the original's mark is restored. */
#ifndef DUP_MARK
#define DUP_MARK 0x4e42d0f5
#endif
/* 0: the program sits on clsact egress; 1: on clsact ingress, where a duplicate is re-injected
 * into the same device's receive path (BPF_F_INGRESS) rather than sent out again. The mark
 * survives that (the device does not change namespace), so the duplicate passes untouched. */
#ifndef INGRESS
#define INGRESS 0
#endif

/* How a dropped frame leaves: TC_ACT_STOLEN frees it and reports success to the sender, as a
 * lossy wire (or netem) would. TC_ACT_SHOT reports NET_XMIT_DROP: an AF_PACKET sender then gets
 * ENOBUFS, and a PACKET_TX_RING sender (DPDK's net_af_packet) stops flushing its ring at the
 * dropped frame, holding the frames behind it until its next transmit. */
#ifndef DROP_ACTION
#define DROP_ACTION TC_ACT_STOLEN
#endif

#define HDR_START 14
#define HDR_END 38

#if DROP_PPM < 0 || DROP_PPM > 1000000 || DUP_PPM < 0 || DUP_PPM > 1000000 || \
    CORRUPT_PPM < 0 || CORRUPT_PPM > 1000000
#error "rates are per million: 0..1000000"
#endif
#if CORRUPT_OFFSET != -1 && (CORRUPT_OFFSET < 0 || CORRUPT_OFFSET > 59)
#error "CORRUPT_OFFSET must be -1 (random header byte) or a byte offset in a 60-byte frame"
#endif

static __always_inline int chance(__u32 ppm)
{
	/* bpf_get_prandom_u32 is uniform on 32 bits; the modulo bias (< 2^-12) is far below
	 * anything the tests can measure. */
	return ppm >= 1000000 || (ppm > 0 && bpf_get_prandom_u32() % 1000000 < ppm);
}

SEC("tc")
int linkfault(struct __sk_buff *skb)
{
	if (skb->mark == DUP_MARK) {
		skb->mark = 0;
		return TC_ACT_OK;
	}

#if BARRIER_ONLY
	__be16 proto;
	if (bpf_skb_load_bytes(skb, 12, &proto, sizeof(proto)) < 0)
		return TC_ACT_OK;
	if (proto != bpf_htons(BARRIER_ETHERTYPE))
		return TC_ACT_OK;
#endif

	if (chance(DROP_PPM))
		return DROP_ACTION;

	if (chance(CORRUPT_PPM) && skb->len >= HDR_END) {
		__u32 off = CORRUPT_OFFSET;
		__u8 byte;
		if (CORRUPT_OFFSET == -1)
			off = HDR_START + bpf_get_prandom_u32() % (HDR_END - HDR_START);
		if (off < skb->len && bpf_skb_load_bytes(skb, off, &byte, 1) == 0) {
			byte ^= CORRUPT_XOR;
			bpf_skb_store_bytes(skb, off, &byte, 1, 0);
		}
	}

	if (chance(DUP_PPM)) {
		__u32 mark = skb->mark;
		skb->mark = DUP_MARK;
		/* Egress: the clone goes out through the same device's egress path again. Ingress:
		 * it enters the same device's receive path again (behind the original). */
		bpf_clone_redirect(skb, skb->ifindex, INGRESS ? BPF_F_INGRESS : 0);
		skb->mark = mark;
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
