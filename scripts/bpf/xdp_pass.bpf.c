// SPDX-License-Identifier: GPL-2.0
/* XDP_PASS for the veth ends that face an XDP switch's port in the namespace test bed
 * (scripts/topo.sh). Frames an XDP program sends into a veth (XDP_REDIRECT, XDP_TX) are queued
 * on the peer's XDP receive ring, and veth takes them only when the peer has an XDP receive
 * path. GRO on the peer gives it one, but then XDP_TX frames wait on the ring until something
 * else wakes the peer's NAPI: veth_xdp_flush() kicks the peer only when a program is attached
 * there (the switch's answers to a stale reduce, sent back with XDP_TX, never arrived). With
 * this program attached, every such frame goes on to the stack at once: tc ingress, then the
 * packet sockets.
 *
 * Build: clang -O2 -g -target bpf -c xdp_pass.bpf.c -o xdp_pass.o
 * Attach: ip link set dev X xdpdrv obj xdp_pass.o sec xdp
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
