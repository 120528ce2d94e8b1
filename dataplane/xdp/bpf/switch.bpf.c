// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// netbarrier's switch as an XDP program: the per-group control logic of claim 6 and the
// restart rules (docs/protocol.md) on the receive path of every switch port. A barrier frame
// is parsed and checked as docs/wire-format.md says (FrameRepr::parse's order), the group's
// state changes under its spin lock, and the one frame the decision sends is written over the
// received one and leaves by XDP_TX (to the sender), a redirect to one port (the parent) or a
// broadcast redirect over the devmap of a port set (children, members). Timers (claim 3's
// re-send, the failure deadline) cannot run here, for nothing in XDP has a clock that sends a
// frame: where on_event arms one, the program writes a record (group, seq, timer, run) into the
// nb_arm ring buffer; userspace (barrier_xdp::timers) keeps the timers, and when one fires it
// runs nb_timer below through BPF_PROG_TEST_RUN, which decides on_timer's row under the same
// group lock and hands back the frame to send and its ports (docs/offload.md).
//
// The rules are in decide(), one branch per row of protocol.md's tables in on_event's order;
// dataplane/xdp/tests/differential.rs checks them against barrier_protocol::switch::on_event.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ETHERTYPE 0x88B5
#define MAGIC 0xBA
#define VERSION 2
#define HEADER_END 40
#define FRAME_LEN 60
#define MAX_GROUPS (1u << 20)

#define KIND_REDUCE 1
#define KIND_RELEASE 2
#define KIND_ABORT 3
#define FLAG_RETRANSMIT 0x01
#define FLAG_HAS_TIMESTAMP 0x02

// Ports this program can name in a group: port indices 0..61 (the state word keeps the
// phase in its top two bits).
#define MAX_PORT 62
#define NO_PARENT 0xff
#define MAX_PORT_SETS 1024

// Phase, bits 62..63 of the state word (GroupState's phase codes).
#define PH_UNKNOWN 0ull
#define PH_COLLECTING 1ull
#define PH_AWAITING 2ull
#define PH_ABORTED 3ull
#define PHASE_SHIFT 62
#define ARRIVED_MASK ((1ull << PHASE_SHIFT) - 1)
// Aborted: the failure in the word as GroupState::aborted keeps it in `arrived`.
#define ABORT_PORT_SHIFT 48
#define ABORT_PARENT_KNOWS (1ull << 56)

// One group: its state (lock, seq, word: 16 bytes) and its configuration, written together by
// the loader with BPF_F_LOCK so a frame never sees a new configuration with an old state.
struct nb_group {
	struct bpf_spin_lock lock;
	__u32 seq;
	__u64 word;
	__u64 children;     // child-port mask
	__u32 epoch;
	__u8 configured;    // 0: no such group here (drop_unknown_group)
	__u8 parent;        // parent port index, NO_PARENT at the root
	__u8 pad[2];
	__u32 children_set; // nb_port_sets slot holding the children's devmap
	__u32 members_set;  // nb_port_sets slot holding children + parent
	__u32 fail_after_us; // failure deadline in whole microseconds, 0: never (the fail_after
	                     // register; the program only needs to know whether it is set)
	__u32 generation;   // the loader's configuration count: the run a timer belongs to
};

// Counter indices: the switch's RX counter names (dataplane/switch/src/counters.rs), plus
// what only XDP has. Order is XdpSwitch::COUNTERS in src/lib.rs.
enum {
	C_FRAMES, C_REDUCE_IN, C_RELEASE_IN, C_ABORT_IN,
	C_RECORDED, C_COMPLETIONS, C_RELEASED_DOWN, C_DUPLICATES,
	C_STALE_REDUCE, C_STALE_RELEASE, C_AHEAD_REDUCE, C_AHEAD_RELEASE,
	C_ABORTED, C_AFTER_ABORT,
	C_DROP_TOO_SHORT, C_PASS_NOT_BARRIER, C_DROP_BAD_MAGIC, C_DROP_BAD_VERSION,
	C_DROP_BAD_KIND, C_DROP_RESERVED_FLAGS, C_DROP_GROUP_OUT_OF_RANGE, C_DROP_BAD_CHECKSUM,
	C_DROP_UNKNOWN_GROUP, C_DROP_NOT_A_CHILD, C_DROP_NOT_THE_PARENT, C_DROP_OTHER_EPOCH,
	C_TX_FAILED,
	C_TIMER_RESENDS, C_DECLARED, C_TIMERS_LOST,
	C_COUNT
};

// Where the decided frame goes.
enum { TO_NONE, TO_INGRESS, TO_PARENT, TO_CHILDREN, TO_CHILDREN_BUT_INGRESS, TO_MEMBERS };

// The program's last decision on this CPU, for tests and debugging (what BPF_PROG_TEST_RUN
// cannot show: where a redirect goes). Written only when the loader set nb_record_last.
struct nb_last {
	__u32 egress;   // 0 dropped or passed, 1 XDP_TX, 2 one port, 3 a port set
	__u32 target;   // egress 2: port index; 3: port-set slot
	__u32 flags;    // bpf_redirect_map flags
	__u32 outcome;  // counter index of the outcome
};

struct nb_self {
	__u8 mac[6];    // this switch's id: source MAC of what it sends, the switch of its aborts
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536); // the loader sets the size (XdpSwitch::load)
	__type(key, __u32);
	__type(value, struct nb_group);
} nb_groups SEC(".maps");

// ingress ifindex -> port index
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} nb_ports SEC(".maps");

// port index -> ifindex, for a redirect to one port (the parent)
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} nb_tx SEC(".maps");

// One devmap per distinct port set (children of some groups, members of some groups), each
// holding port index -> ifindex; a release or abort is one broadcast redirect over it.
struct nb_port_set {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, MAX_PORT_SETS);
	__type(key, __u32);
	__array(values, struct nb_port_set);
} nb_port_sets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nb_self);
} nb_self SEC(".maps");

// The counters, one row per port: row r (the ingress port's index; NO_PORT_ROW for a frame
// on an interface that is no port, and for the timer entry point's decisions) holds C_COUNT
// counters. A frame looks its row up once and counts in it; userspace sums the CPUs, and the
// rows for the switch's totals (XdpSwitch::port_counters, XdpSwitch::counters).
#define NO_PORT_ROW MAX_PORT
#define COUNTER_ROWS (MAX_PORT + 1)

struct nb_counter_row {
	__u64 c[C_COUNT];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_ROWS);
	__type(key, __u32);
	__type(value, struct nb_counter_row);
} nb_counters SEC(".maps");

// Frames sent, counted where the program knows their destination without walking a port set:
// row d is a port index (XDP_TX, the redirect to the parent), SENT_SET + a port-set slot (a
// broadcast redirect) or SENT_EXCLUDED + a port index (the ingress port a broadcast left out);
// its cells are (kind - 1) + 3 * retransmit. Userspace turns it into frames per egress port, a
// set's count going to each of its ports less the exclusions (XdpSwitch::sent).
#define SENT_CELLS 6
#define SENT_SET 64
#define SENT_EXCLUDED (SENT_SET + MAX_PORT_SETS)
#define SENT_ROWS (SENT_EXCLUDED + 64)

struct nb_sent_row {
	__u64 c[SENT_CELLS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SENT_ROWS);
	__type(key, __u32);
	__type(value, struct nb_sent_row);
} nb_sent SEC(".maps");

// Per group, what barrier-switch's group table counts (GroupCounts): barriers completed here,
// and re-sends (releases sent again for stale reduces, reduces re-sent by the timer side). A
// map of its own, so that reconfiguring, resetting or removing the group (a write of its whole
// nb_groups slot) leaves them, as the group table's do. Atomic adds: every CPU writes them.
struct nb_group_counts {
	__u32 completions;
	__u32 resends;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536); // the loader sets the size: nb_groups's
	__type(key, __u32);
	__type(value, struct nb_group_counts);
} nb_group_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nb_last);
} nb_last SEC(".maps");

// Set by the loader before the program is loaded (XdpSwitch::load_object, LoadOptions): 1
// keeps the record in nb_last (the tests that read where a redirect went), 0 (the daemon, the
// perf bed) leaves it out. It is .rodata, frozen at load, so the verifier knows its value and
// removes the branch that cannot be taken: with 0 the program has no nb_last write at all.
// The only global in .rodata (the loader checks the section is 4 bytes).
const volatile __u32 nb_record_last = 0;

// Timer kinds (switch::Timer): a re-send to the parent (attempt 0 when armed here), the
// failure deadline.
#define TIMER_RESEND 1
#define TIMER_DEADLINE 2

// One timer on_event armed: userspace arms it and, when it fires, asks nb_timer with the
// same fields. epoch and generation are the run that armed it (switch::Run).
struct nb_arm {
	__u32 group;
	__u32 seq;
	__u32 epoch;
	__u32 generation;
	__u32 timer;        // TIMER_*
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); // 32-byte records (header included): 32,768 in flight
} nb_arm SEC(".maps");

// Per CPU: no other CPU writes this copy.
static __always_inline void count(struct nb_counter_row *r, __u32 idx)
{
	if (idx < C_COUNT)
		r->c[idx] += 1;
}

static __always_inline void count_sent(__u32 dest, __u8 kind, __u8 retransmit)
{
	struct nb_sent_row *r = bpf_map_lookup_elem(&nb_sent, &dest);
	__u32 cell = (kind - 1) + (retransmit ? 3 : 0);
	if (r && cell < SENT_CELLS)
		r->c[cell] += 1;
}

static __always_inline void count_group(__u32 group, int completion, int resend)
{
	struct nb_group_counts *c = bpf_map_lookup_elem(&nb_group_counts, &group);
	if (!c)
		return;
	if (completion)
		__sync_fetch_and_add(&c->completions, 1);
	if (resend)
		__sync_fetch_and_add(&c->resends, 1);
}

// a is ahead of b: a - b (mod 2^32) in 1..2^31 (Seq::is_ahead_of).
static __always_inline int ahead(__u32 a, __u32 b)
{
	__u32 d = a - b;
	return d != 0 && d < 0x80000000u;
}

struct event {
	__u8 kind;
	__u8 port;      // ingress port index, MAX_PORT when the interface is no port
	__u32 epoch;
	__u32 seq;
	__u64 failure;  // abort: switch id (48 bits) | port << 48
};

struct decision {
	__u32 outcome;  // counter index
	__u8 kind;      // frame to send (0: none)
	__u8 to;        // TO_*
	__u8 retransmit;
	__u32 seq;
	__u64 failure;  // an abort's failure
	__u32 timer;    // a timer to arm (TIMER_*), 0: none
	__u32 timer_seq;
};

static __always_inline void send(struct decision *d, __u8 kind, __u8 to, __u8 retransmit,
				 __u32 seq, __u64 failure)
{
	d->kind = kind;
	d->to = to;
	d->retransmit = retransmit;
	d->seq = seq;
	d->failure = failure;
}

// complete_if_last: Recorded while a child is missing; the last child completes the barrier
// (root: release to every child, seq + 1, Collecting; intermediate: reduce to the parent,
// AwaitingRelease). The failure deadline and the re-send timer are the userspace side's.
static __always_inline void complete_if_last(const struct nb_group *g, __u32 seq,
					     __u64 arrived, __u32 *nseq, __u64 *nword,
					     struct decision *d)
{
	*nseq = seq;
	if (g->children & ~arrived) {
		*nword = PH_UNKNOWN << PHASE_SHIFT | arrived; // caller fixes the phase
		d->outcome = C_RECORDED;
		// The first child of this barrier starts the failure deadline.
		if (g->fail_after_us && !(arrived & (arrived - 1))) {
			d->timer = TIMER_DEADLINE;
			d->timer_seq = seq;
		}
		return;
	}
	d->outcome = C_COMPLETIONS;
	if (g->parent == NO_PARENT) {
		send(d, KIND_RELEASE, TO_CHILDREN, 0, seq, 0);
		*nseq = seq + 1;
		*nword = PH_COLLECTING << PHASE_SHIFT;
	} else {
		send(d, KIND_REDUCE, TO_PARENT, 0, seq, 0);
		*nword = PH_AWAITING << PHASE_SHIFT | arrived;
		// Claim 3: re-send until the release comes.
		d->timer = TIMER_RESEND;
		d->timer_seq = seq;
	}
}

// forward_release: release t to every child, seq = t + 1, Collecting.
static __always_inline void forward_release(__u32 t, __u32 *nseq, __u64 *nword,
					    struct decision *d)
{
	send(d, KIND_RELEASE, TO_CHILDREN, 0, t, 0);
	*nseq = t + 1;
	*nword = PH_COLLECTING << PHASE_SHIFT;
	d->outcome = C_RELEASED_DOWN;
}

// on_event: the rows of docs/protocol.md in on_event's order. Reads the group (configuration
// and state, under its lock), writes the next state to *nseq/*nword and the frame to *d.
static __always_inline void decide(const struct nb_group *g, const struct event *ev,
				   __u32 *nseq, __u64 *nword, struct decision *d)
{
	__u32 s = g->seq;
	__u64 word = g->word;
	__u64 phase = word >> PHASE_SHIFT;
	__u64 arrived = word & ARRIVED_MASK;
	__u64 pbit = ev->port < MAX_PORT ? 1ull << ev->port : 0;
	__u64 parent_bit = g->parent < MAX_PORT ? 1ull << g->parent : 0;
	__u64 members = g->children | parent_bit;
	__u32 t = ev->seq;

	*nseq = s;
	*nword = word;
	d->kind = 0;
	d->timer = 0;

#ifndef NB_BROKEN_NO_EPOCH_CHECK
	// Epoch: a frame of another run of the group.
	if (ev->epoch != g->epoch) {
		d->outcome = C_DROP_OTHER_EPOCH;
		return;
	}
#endif
	// Membership rows.
	if (ev->kind == KIND_REDUCE && !(g->children & pbit)) {
		d->outcome = C_DROP_NOT_A_CHILD;
		return;
	}
	if (ev->kind == KIND_RELEASE && !(parent_bit & pbit)) {
		d->outcome = C_DROP_NOT_THE_PARENT;
		return;
	}
	if (ev->kind == KIND_ABORT && !(members & pbit)) {
		d->outcome = C_DROP_NOT_A_CHILD;
		return;
	}

	if (phase == PH_ABORTED) {
		__u64 failure = word & ((1ull << 56) - 1);
		d->outcome = C_AFTER_ABORT;
		// Aborted, "reduce from a child": the abort, to that child.
		if (ev->kind == KIND_REDUCE) {
			send(d, KIND_ABORT, TO_INGRESS, 0, s, failure);
			return;
		}
		// Aborted, "abort from the parent": the parent knows; re-sends up stop.
		if (ev->kind == KIND_ABORT && (parent_bit & pbit)) {
			*nword = word | ABORT_PARENT_KNOWS;
			return;
		}
		// Aborted, "abort from a child": the abort, to that child.
		if (ev->kind == KIND_ABORT) {
			send(d, KIND_ABORT, TO_INGRESS, 0, s, failure);
			return;
		}
		// Aborted, "release": nothing.
		return;
	}

	// Any other state, "abort from a member": aborted here; from the parent to every
	// child, from a child to every member (the sender's answer included).
	if (ev->kind == KIND_ABORT) {
		int from_parent = (parent_bit & pbit) != 0;
		int knows = from_parent || g->parent == NO_PARENT;
		*nseq = t;
		*nword = PH_ABORTED << PHASE_SHIFT | ev->failure | (knows ? ABORT_PARENT_KNOWS : 0);
		send(d, KIND_ABORT, from_parent ? TO_CHILDREN : TO_MEMBERS, 0, t, ev->failure);
		d->outcome = C_ABORTED;
		// An intermediate re-sends the abort up until the parent answers.
		if (!knows) {
			d->timer = TIMER_RESEND;
			d->timer_seq = t;
		}
		return;
	}

	if (phase == PH_COLLECTING || phase == PH_AWAITING) {
		if (ev->kind == KIND_REDUCE) {
			// Known, "reduce s from a child not yet recorded | Collecting".
			if (t == s && phase == PH_COLLECTING && !(arrived & pbit)) {
				complete_if_last(g, s, arrived | pbit, nseq, nword, d);
				if (d->outcome == C_RECORDED)
					*nword = PH_COLLECTING << PHASE_SHIFT | arrived | pbit;
				return;
			}
			// Known, "reduce s ... already recorded | Collecting" and
			// "reduce s | AwaitingRelease": nothing.
			if (t == s) {
				d->outcome = C_DUPLICATES;
				return;
			}
			// Known, "reduce t behind s" and "reduce t ahead of s" (claim 6, row 1):
			// release s-1 to that child only.
			send(d, KIND_RELEASE, TO_INGRESS, 1, s - 1, 0);
#ifdef NB_BROKEN_AHEAD_RELEASES_ALL
			if (ahead(t, s))
				d->to = TO_CHILDREN;
#endif
			d->outcome = ahead(t, s) ? C_AHEAD_REDUCE : C_STALE_REDUCE;
			return;
		}
		// Known, "release s from the parent": forward it, advance.
		if (t == s) {
			forward_release(t, nseq, nword, d);
			return;
		}
		// Known, "release s-1": the one just forwarded.
		if (t == s - 1) {
			d->outcome = C_DUPLICATES;
			return;
		}
		d->outcome = ahead(t, s) ? C_AHEAD_RELEASE : C_STALE_RELEASE;
		return;
	}

	// Unknown: the restart rules.
	if (ev->kind == KIND_REDUCE) {
		// "reduce t, nothing heard yet": gather at t with this child.
		if (arrived == 0) {
			complete_if_last(g, t, pbit, nseq, nword, d);
			return;
		}
		// "reduce s (the highest heard)": record it, or a duplicate.
		if (t == s) {
			if (arrived & pbit) {
				d->outcome = C_DUPLICATES;
				return;
			}
			complete_if_last(g, s, arrived | pbit, nseq, nword, d);
			return;
		}
		// "reduce t ahead of s" (restart rule 2): release t-1 to every other child, gather
		// again at t with this child.
		if (ahead(t, s)) {
			complete_if_last(g, t, pbit, nseq, nword, d);
			if (g->children & ~pbit)
				send(d, KIND_RELEASE, TO_CHILDREN_BUT_INGRESS, 1, t - 1, 0);
			return;
		}
		// "reduce t behind s" (restart rule 3): release s-1 to that child.
		send(d, KIND_RELEASE, TO_INGRESS, 1, s - 1, 0);
		d->outcome = C_STALE_REDUCE;
		return;
	}
	// "release t from the parent, t+1 behind s, a child heard at s": the stale-release guard.
	if (arrived != 0 && t + 1 != s && !ahead(t + 1, s)) {
		d->outcome = C_STALE_RELEASE;
		return;
	}
	// "release t from the parent" (restart rule 4): forward it; known.
	forward_release(t, nseq, nword, d);
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

// Ones' complement sum of the 13 big-endian words of bytes 14..40, as host-order values.
static __always_inline __u32 header_sum(const __u8 *p)
{
	__u32 sum = 0;
#pragma unroll
	for (int i = 14; i < HEADER_END; i += 2)
		sum += (__u32)p[i] << 8 | p[i + 1];
	return sum;
}

static __always_inline int verdict(__u32 outcome, __u32 egress, __u32 target, __u32 flags,
				   int ret)
{
	__u32 zero = 0;
	if (!nb_record_last)
		return ret;
	struct nb_last *last = bpf_map_lookup_elem(&nb_last, &zero);
	if (last) {
		last->egress = egress;
		last->target = target;
		last->flags = flags;
		last->outcome = outcome;
	}
	return ret;
}


// Asks userspace to arm a timer (the ring buffer record nb_arm); a full ring loses it, counted.
static __always_inline void arm(struct nb_counter_row *ctr, __u32 group, __u32 seq,
				__u32 epoch, __u32 generation, __u32 timer)
{
	struct nb_arm rec = {
		.group = group,
		.seq = seq,
		.epoch = epoch,
		.generation = generation,
		.timer = timer,
		.pad = 0,
	};
	if (bpf_ringbuf_output(&nb_arm, &rec, sizeof(rec), 0))
		count(ctr, C_TIMERS_LOST);
}

// Writes FrameRepr::emit's 60 bytes at p (checked by the caller to hold 60): destination
// broadcast, source this switch, no timestamp, the checksum.
static __always_inline void write_frame(__u8 *p, const struct nb_self *self, __u8 kind,
					__u8 retransmit, __u32 group, __u32 epoch, __u32 seq,
					__u64 failure)
{
#pragma unroll
	for (int i = 0; i < 6; i++) {
		p[i] = 0xff;
		p[6 + i] = self->mac[i];
	}
	p[12] = ETHERTYPE >> 8;
	p[13] = ETHERTYPE & 0xff;
	p[14] = MAGIC;
	p[15] = VERSION;
	p[16] = kind;
	p[17] = retransmit ? FLAG_RETRANSMIT : 0;
	*(__u32 *)(p + 18) = bpf_htonl(group);
	*(__u32 *)(p + 22) = bpf_htonl(epoch);
	*(__u32 *)(p + 26) = bpf_htonl(seq);
	if (kind == KIND_ABORT) {
#pragma unroll
		for (int i = 0; i < 6; i++)
			p[30 + i] = (__u8)(failure >> (40 - 8 * i));
		p[36] = (__u8)(failure >> ABORT_PORT_SHIFT);
		p[37] = 0;
	} else {
		*(__u64 *)(p + 30) = 0;
	}
	p[38] = 0;
	p[39] = 0;
#pragma unroll
	for (int i = HEADER_END; i < FRAME_LEN; i++)
		p[i] = 0;
	__u16 c = ~csum_fold(header_sum(p));
	p[38] = c >> 8;
	p[39] = c & 0xff;
}

SEC("xdp")
int nb_switch(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 zero = 0;
	// The port first: every counter below is in the port's row (NO_PORT_ROW: no port here).
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 *port = bpf_map_lookup_elem(&nb_ports, &ifindex);
	__u32 row = port && *port < MAX_PORT ? *port : NO_PORT_ROW;
	struct nb_counter_row *ctr = bpf_map_lookup_elem(&nb_counters, &row);
	if (!ctr)
		return XDP_ABORTED; // cannot happen: row < COUNTER_ROWS

	count(ctr, C_FRAMES);
	if (p + 14 > (__u8 *)data_end) {
		count(ctr, C_DROP_TOO_SHORT);
		return verdict(C_DROP_TOO_SHORT, 0, 0, 0, XDP_DROP);
	}
	if (((__u16)p[12] << 8 | p[13]) != ETHERTYPE) {
		// Someone else's traffic (a VLAN tag included): the kernel's.
		count(ctr, C_PASS_NOT_BARRIER);
		return verdict(C_PASS_NOT_BARRIER, 0, 0, 0, XDP_PASS);
	}
	if (p + HEADER_END > (__u8 *)data_end) {
		count(ctr, C_DROP_TOO_SHORT);
		return verdict(C_DROP_TOO_SHORT, 0, 0, 0, XDP_DROP);
	}
	if (p[14] != MAGIC) {
		count(ctr, C_DROP_BAD_MAGIC);
		return verdict(C_DROP_BAD_MAGIC, 0, 0, 0, XDP_DROP);
	}
	if (p[15] != VERSION) {
		count(ctr, C_DROP_BAD_VERSION);
		return verdict(C_DROP_BAD_VERSION, 0, 0, 0, XDP_DROP);
	}
	__u8 kind = p[16], flags = p[17];
	// FrameRepr::parse checks the flags before the kind.
	if (flags & ~(FLAG_RETRANSMIT | FLAG_HAS_TIMESTAMP)) {
		count(ctr, C_DROP_RESERVED_FLAGS);
		return verdict(C_DROP_RESERVED_FLAGS, 0, 0, 0, XDP_DROP);
	}
	if (kind < KIND_REDUCE || kind > KIND_ABORT ||
	    (kind == KIND_ABORT && ((flags & FLAG_HAS_TIMESTAMP) || p[37] != 0))) {
		count(ctr, C_DROP_BAD_KIND);
		return verdict(C_DROP_BAD_KIND, 0, 0, 0, XDP_DROP);
	}
	__u32 group = bpf_ntohl(*(__u32 *)(p + 18));
	if (group >= MAX_GROUPS) {
		count(ctr, C_DROP_GROUP_OUT_OF_RANGE);
		return verdict(C_DROP_GROUP_OUT_OF_RANGE, 0, 0, 0, XDP_DROP);
	}
	if (csum_fold(header_sum(p)) != 0xffff) {
		count(ctr, C_DROP_BAD_CHECKSUM);
		return verdict(C_DROP_BAD_CHECKSUM, 0, 0, 0, XDP_DROP);
	}
	if (kind == KIND_REDUCE)
		count(ctr, C_REDUCE_IN);
	else if (kind == KIND_RELEASE)
		count(ctr, C_RELEASE_IN);
	else
		count(ctr, C_ABORT_IN);

	struct event ev = {
		.kind = kind,
		.port = MAX_PORT,
		.epoch = bpf_ntohl(*(__u32 *)(p + 22)),
		.seq = bpf_ntohl(*(__u32 *)(p + 26)),
		.failure = 0,
	};
	if (kind == KIND_ABORT) {
		__u64 id = 0;
#pragma unroll
		for (int i = 30; i < 36; i++)
			id = id << 8 | p[i];
		ev.failure = id | (__u64)p[36] << ABORT_PORT_SHIFT;
	}
	if (!port) {
		// A frame on an interface that is no port of this switch: refused before the
		// group is looked up, as barrier-switch does.
		__u32 c = kind == KIND_RELEASE ? C_DROP_NOT_THE_PARENT : C_DROP_NOT_A_CHILD;
		count(ctr, c);
		return verdict(c, 0, 0, 0, XDP_DROP);
	}
	if (row != NO_PORT_ROW)
		ev.port = row;

	struct nb_group *g = bpf_map_lookup_elem(&nb_groups, &group);
	if (!g || !g->configured) {
		count(ctr, C_DROP_UNKNOWN_GROUP);
		return verdict(C_DROP_UNKNOWN_GROUP, 0, 0, 0, XDP_DROP);
	}

	struct decision d = {};
	__u32 nseq;
	__u64 nword;
	__u8 parent;
	__u32 epoch, children_set, members_set, generation;
#ifndef NB_BROKEN_NO_LOCK
	bpf_spin_lock(&g->lock);
#endif
	// A configuration written since the lookup is seen whole: the loader writes it with the
	// state under this lock.
	if (!g->configured) {
#ifndef NB_BROKEN_NO_LOCK
		bpf_spin_unlock(&g->lock);
#endif
		count(ctr, C_DROP_UNKNOWN_GROUP);
		return verdict(C_DROP_UNKNOWN_GROUP, 0, 0, 0, XDP_DROP);
	}
	decide(g, &ev, &nseq, &nword, &d);
	g->seq = nseq;
	g->word = nword;
	parent = g->parent;
	epoch = g->epoch;
	children_set = g->children_set;
	members_set = g->members_set;
	generation = g->generation;
#ifndef NB_BROKEN_NO_LOCK
	bpf_spin_unlock(&g->lock);
#endif

	count(ctr, d.outcome);
	if (d.outcome == C_COMPLETIONS || d.outcome == C_STALE_REDUCE)
		count_group(group, d.outcome == C_COMPLETIONS, d.outcome == C_STALE_REDUCE);
	if (d.timer)
		arm(ctr, group, d.timer_seq, epoch, generation, d.timer);
	if (!d.kind)
		return verdict(d.outcome, 0, 0, 0, XDP_DROP);

	// Build the frame over the received one: FrameRepr::emit's bytes, dst broadcast, src
	// this switch, no timestamp, 60 bytes.
	int delta = FRAME_LEN - (int)((long)data_end - (long)data);
	if (delta != 0 && bpf_xdp_adjust_tail(ctx, delta)) {
		count(ctr, C_TX_FAILED);
		return verdict(d.outcome, 0, 0, 0, XDP_DROP);
	}
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	p = data;
	if (p + FRAME_LEN > (__u8 *)data_end) {
		count(ctr, C_TX_FAILED);
		return verdict(d.outcome, 0, 0, 0, XDP_DROP);
	}
	struct nb_self *self = bpf_map_lookup_elem(&nb_self, &zero);
	if (!self)
		return verdict(d.outcome, 0, 0, 0, XDP_DROP);
	write_frame(p, self, d.kind, d.retransmit, group, epoch, d.seq, d.failure);

	long ret;
	__u32 set = children_set;
	__u64 rflags = BPF_F_BROADCAST;
	switch (d.to) {
	case TO_INGRESS:
		count_sent(ev.port, d.kind, d.retransmit);
		return verdict(d.outcome, 1, ev.port, 0, XDP_TX);
	case TO_PARENT:
		ret = bpf_redirect_map(&nb_tx, parent, XDP_DROP);
		if (ret != XDP_REDIRECT)
			count(ctr, C_TX_FAILED);
		else
			count_sent(parent, d.kind, d.retransmit);
		return verdict(d.outcome, 2, parent, 0, ret);
	case TO_CHILDREN_BUT_INGRESS:
		rflags |= BPF_F_EXCLUDE_INGRESS;
		break;
	case TO_MEMBERS:
		set = members_set;
		break;
	default:
		break;
	}
	void *devmap = bpf_map_lookup_elem(&nb_port_sets, &set);
	if (!devmap) {
		count(ctr, C_TX_FAILED);
		return verdict(d.outcome, 3, set, (__u32)rflags, XDP_DROP);
	}
	ret = bpf_redirect_map(devmap, 0, rflags);
	if (ret != XDP_REDIRECT) {
		count(ctr, C_TX_FAILED);
	} else {
		count_sent(SENT_SET + set, d.kind, d.retransmit);
		if (rflags & BPF_F_EXCLUDE_INGRESS)
			count_sent(SENT_EXCLUDED + ev.port, d.kind, d.retransmit);
	}
	return verdict(d.outcome, 3, set, (__u32)rflags, ret);
}


// ---- The timer side's entry point ------------------------------------------------------------
//
// Not attached anywhere: userspace runs it with BPF_PROG_TEST_RUN on a TIMER_BUF-byte buffer
// when a timer fires. The buffer holds a request (struct nb_timer_req at offset 0); the program
// decides switch::on_timer's row for it under the group's lock, changes the state as on_timer
// does, and overwrites the buffer with the reply: the frame to send (bytes 0..60) and struct
// nb_timer_reply at TIMER_REPLY. The verdict is XDP_TX when there is a frame, else XDP_DROP.

#define TIMER_MAGIC 0x4e42544dU // "NBTM": a buffer that is no request is refused
#define TIMER_BUF 88
#define TIMER_REPLY 64

// What the fired timer did (switch::on_timer's rows).
enum { T_NOTHING, T_RESENT_REDUCE, T_RESENT_ABORT, T_DECLARED };

struct nb_timer_req {
	__u32 magic;        // TIMER_MAGIC
	__u32 group;
	__u32 seq;          // the barrier the timer was armed for
	__u32 epoch;        // the run that armed it (struct nb_arm)
	__u32 generation;
	__u32 timer;        // TIMER_*
	__u32 attempt;      // TIMER_RESEND: re-sends before this one
};

struct nb_timer_reply {
	__u64 ports;        // port mask the frame goes to (0: no frame)
	__u32 result;       // T_*
	__u32 rearm;        // TIMER_RESEND: arm a re-send with rearm_attempt; 0: nothing
	__u32 rearm_attempt;
	__u32 pad;
};

// The lowest set bit's index of a non-zero x (the lowest silent child port).
static __always_inline __u32 lowest_bit(__u64 x)
{
	__u32 n = 0;
	if (!(x & 0xffffffffull)) { n += 32; x >>= 32; }
	if (!(x & 0xffffull)) { n += 16; x >>= 16; }
	if (!(x & 0xffull)) { n += 8; x >>= 8; }
	if (!(x & 0xfull)) { n += 4; x >>= 4; }
	if (!(x & 0x3ull)) { n += 2; x >>= 2; }
	if (!(x & 0x1ull)) { n += 1; }
	return n;
}

// on_timer: the rows of switch::on_timer, under the group's lock. A timer of another run
// (epoch or configuration generation) or of another barrier does nothing.
static __always_inline void decide_timer(const struct nb_group *g, const struct nb_timer_req *r,
					 __u64 me, __u64 *nword, struct decision *d,
					 struct nb_timer_reply *out)
{
	__u64 word = g->word;
	__u64 phase = word >> PHASE_SHIFT;
	__u64 arrived = word & ARRIVED_MASK;
	__u64 parent_bit = g->parent < MAX_PORT ? 1ull << g->parent : 0;
	__u32 next_attempt = r->attempt == 0xffffffffu ? r->attempt : r->attempt + 1;

	*nword = word;
	d->kind = 0;
	out->result = T_NOTHING;
	out->rearm = 0;
	out->rearm_attempt = 0;
	if (r->epoch != g->epoch || r->generation != g->generation)
		return;
#ifndef NB_BROKEN_STALE_TIMER
	if (r->seq != g->seq)
		return;
#endif
	if (r->timer == TIMER_RESEND && parent_bit) {
		// "Resend, AwaitingRelease": the reduce again, RETRANSMIT, to the parent (claim 3).
		if (phase == PH_AWAITING) {
			send(d, KIND_REDUCE, TO_PARENT, 1, g->seq, 0);
			out->result = T_RESENT_REDUCE;
			out->rearm = TIMER_RESEND;
			out->rearm_attempt = next_attempt;
			return;
		}
		// "Resend, Aborted, the parent does not know": the abort again, to the parent.
		if (phase == PH_ABORTED && !(word & ABORT_PARENT_KNOWS)) {
			send(d, KIND_ABORT, TO_PARENT, 0, g->seq, word & ((1ull << 56) - 1));
			out->result = T_RESENT_ABORT;
			out->rearm = TIMER_RESEND;
			out->rearm_attempt = next_attempt;
		}
		return;
	}
	// "Deadline, still gathering, some child reported, some did not": the lowest silent
	// child is declared failed; the abort goes to every member, and an intermediate keeps
	// re-sending it up.
	if (r->timer == TIMER_DEADLINE && (phase == PH_COLLECTING || phase == PH_UNKNOWN) &&
	    arrived && (g->children & ~arrived)) {
		__u64 failure = me | (__u64)lowest_bit(g->children & ~arrived) << ABORT_PORT_SHIFT;
		int knows = !parent_bit;
		*nword = PH_ABORTED << PHASE_SHIFT | failure | (knows ? ABORT_PARENT_KNOWS : 0);
		send(d, KIND_ABORT, TO_MEMBERS, 0, g->seq, failure);
		out->result = T_DECLARED;
		if (!knows) {
			out->rearm = TIMER_RESEND;
			out->rearm_attempt = 0;
		}
	}
}

SEC("xdp")
int nb_timer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 zero = 0;

	if (p + TIMER_BUF > (__u8 *)data_end)
		return XDP_ABORTED;
	struct nb_timer_req req = *(struct nb_timer_req *)p;
	if (req.magic != TIMER_MAGIC || req.group >= MAX_GROUPS)
		return XDP_ABORTED;
	struct nb_self *self = bpf_map_lookup_elem(&nb_self, &zero);
	struct nb_group *g = bpf_map_lookup_elem(&nb_groups, &req.group);
	if (!self || !g)
		return XDP_ABORTED;
	__u64 me = 0;
#pragma unroll
	for (int i = 0; i < 6; i++)
		me = me << 8 | self->mac[i];

	struct decision d = {};
	struct nb_timer_reply out = {};
	__u64 nword, children, parent_bit;
	__u32 epoch, members_set, norow = NO_PORT_ROW;
	__u8 parent;
	bpf_spin_lock(&g->lock);
	if (!g->configured) {
		bpf_spin_unlock(&g->lock);
		out.result = T_NOTHING;
		*(struct nb_timer_reply *)(p + TIMER_REPLY) = out;
		return XDP_DROP;
	}
	decide_timer(g, &req, me, &nword, &d, &out);
	g->word = nword;
	epoch = g->epoch;
	children = g->children;
	parent = g->parent;
	members_set = g->members_set;
	parent_bit = parent < MAX_PORT ? 1ull << parent : 0;
	bpf_spin_unlock(&g->lock);

	struct nb_counter_row *ctr = bpf_map_lookup_elem(&nb_counters, &norow);
	if (out.result == T_RESENT_REDUCE) {
		if (ctr)
			count(ctr, C_TIMER_RESENDS);
		count_group(req.group, 0, 1);
	} else if (out.result == T_DECLARED && ctr) {
		count(ctr, C_DECLARED);
	}
	if (!d.kind) {
		*(struct nb_timer_reply *)(p + TIMER_REPLY) = out;
		return XDP_DROP;
	}
	out.ports = d.to == TO_PARENT ? parent_bit : children | parent_bit;
	// Counted as sent when decided: the timer side sends it on each of these ports.
	count_sent(d.to == TO_PARENT ? parent : SENT_SET + members_set, d.kind, d.retransmit);
	write_frame(p, self, d.kind, d.retransmit, req.group, epoch, d.seq, d.failure);
	*(struct nb_timer_reply *)(p + TIMER_REPLY) = out;
	return XDP_TX;
}

// Passes everything. Attached to the far end of a veth pair, it gives that end the XDP receive
// queue a redirect into it needs (veth drops redirected frames toward a peer without one).
SEC("xdp")
int nb_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
