/*
 * netbarrier's barrier protocol as the project implements it, for spin.
 *
 *   dataplane/protocol/src/switch.rs  on_event, complete_if_last, forward_release, on_timer
 *   dataplane/protocol/src/leaf.rs    Leaf::arrive, Leaf::poll, Leaf::on_release
 *   docs/protocol.md                  the rules, the assumptions (numbered as here)
 *   docs/reliability.md               "Model checking": what this model is and is not
 *
 * One group on one tree. Every node is a state machine inside one process; every step is
 * one d_step (one event applied wholly, as GroupTable::apply's compare-and-swap does).
 *
 * Compile-time switches (spin -D..., forwarded to the C preprocessor):
 *   TREE_BIG          root, 2 intermediates, 2 leaves each (default: root with one
 *                     intermediate of 2 leaves and one leaf directly under the root)
 *   FAULTY            leaf 0 may also send a reduce with any sequence number of its epoch once
 *                     every switch is known (assumption 3: a faulty member, known state);
 *                     no restarts, one epoch
 *   PROGRESS          bounded faults (FAULTS), then healing, then fair rounds; run pan with
 *                     -DNP and -l: every leaf must complete K barriers
 *   K, M, F, EPOCHS, FAULTS   sizes (see below)
 *   BROKEN_STALE_ANSWER_CURRENT   known state: a reduce behind is answered with release s
 *   BROKEN_ADOPT_KNOWN            the evidence rules applied in the known state too
 *   BROKEN_NO_EPOCH               the switches do not check the epoch
 *   BROKEN_NO_INTERMEDIATE_TIMER  the intermediate never re-sends its reduce (liveness)
 *   NO_QUIET_TIME                 a restart keeps the frames on their way to the switch
 *                                 (drops assumption 7; liveness)
 */

/* ---------------------------------------------------------------- sizes */

/* K: leaves must complete K barriers; a leaf arrives at K+1 at most (the (K+1)-th is the
 * "one barrier past the last" that docs/protocol.md's known limit asks for). */
#ifndef K
#define K 2
#endif
/* Sequence numbers modulo M with the code's half-range rule (ahead: difference in
 * 1..M/2-1). Live values of one epoch are F-1 .. F+K, K+2 values; M/2 > K+1 makes the
 * modular order agree with the integer order on every pair that can meet (the code's
 * assumption 5 with 2^32 replaced by M). F = M-2 makes every run cross the wrap. */
#ifndef M
#define M 8
#endif
#ifndef F
#define F 6
#endif
/* epochs 0 .. EPOCHS-1: EPOCHS-1 new runs at most (assumption 2: one run, one epoch) */
#ifndef EPOCHS
#define EPOCHS 2
#endif
#ifndef FAULTS
#define FAULTS 2
#endif
/* distinct frames in flight per link and direction */
#ifndef CAP
#define CAP 2
#endif

#if (K + 1) * 2 >= M
#error "need M/2 > K+1 for the modular order to be exact"
#endif
#if EPOCHS * M > 16
#error "a link holds EPOCHS*M <= 16 distinct frames (the delivery options are written for 16)"
#endif

/* ---------------------------------------------------------------- topology */
/* Links are numbered by their lower end: link u joins a child (switch or leaf) to its
 * parent switch lpar[u] on port lport[u]. up[u] holds the reduces in flight on it (child to
 * parent), dn[u] the releases (parent to child). */

#ifdef TREE_BIG
#define NS 3
#define NL 4
#define NU 6
#else
#define NS 2
#define NL 3
#define NU 4
#endif
#define MAXC 2 /* children per switch */

#define LEAF 0
#define SWITCH 1

hidden byte lpar[NU];
hidden byte lport[NU];
hidden byte lkind[NU];
hidden byte lchild[NU];
hidden byte sup[NS];          /* a switch's link to its parent (intermediates) */
hidden byte nch[NS];          /* number of children */
hidden byte chl[NS * MAXC];   /* link of child port p of switch s: chl[s*MAXC+p] */
hidden byte lup[NL];          /* a leaf's link to its parent */

inline link(u, parent, port, kind, child) {
  lpar[u] = parent; lport[u] = port; lkind[u] = kind; lchild[u] = child;
  chl[parent * MAXC + port] = u;
  if
  :: kind == LEAF -> lup[child] = u
  :: else -> sup[child] = u
  fi
}

inline topology() {
#ifdef TREE_BIG
  nch[0] = 2; nch[1] = 2; nch[2] = 2;
  link(0, 0, 0, SWITCH, 1);
  link(1, 0, 1, SWITCH, 2);
  link(2, 1, 0, LEAF, 0);
  link(3, 1, 1, LEAF, 1);
  link(4, 2, 0, LEAF, 2);
  link(5, 2, 1, LEAF, 3);
#else
  nch[0] = 2; nch[1] = 2;
  link(0, 0, 0, SWITCH, 1);
  link(1, 0, 1, LEAF, 0);
  link(2, 1, 0, LEAF, 1);
  link(3, 1, 1, LEAF, 2);
#endif
}

/* ---------------------------------------------------------------- state */

#define UNKNOWN 0
#define COLLECTING 1
#define AWAITING 2

byte epoch;           /* the group's current run: every switch's GroupConfig::epoch */

byte sseq[NS];        /* GroupState::seq */
byte sph[NS];         /* GroupState::phase */
byte sarr[NS];        /* GroupState::arrived (bit p: child port p) */

byte lseq[NL];        /* Leaf::seq */
bool lwait[NL];       /* LeafState::Waiting */
byte ldone[NL];       /* barriers this leaf completed in this epoch */
byte lred[NL];        /* ghost: bit t set when the leaf sent a reduce for t in this epoch */

int up[NU];           /* reduces in flight, bit e*M+t: epoch e, sequence t */
int dn[NU];           /* releases in flight */
byte nup[NU];         /* frames in up[u] (a function of up[u]: adds no state) */
byte ndn[NU];         /* frames in dn[u] */

#ifdef PROGRESS
byte faults = FAULTS; /* faults left before the network heals */
byte ldue[NL];        /* healed rounds: leaf timer due for lseq+1 (0: none) */
byte sdue[NS];        /* healed rounds: intermediate timer due for sseq+1 (0: none) */
#endif

hidden byte hs, hp, ht, hcur, hi, hk, hfe;   /* temporaries inside one d_step */

/* ---------------------------------------------------------------- sequence numbers */

#define NEXT(a) (((a) + 1) % M)
#define PREV(a) (((a) + M - 1) % M)
#define DIFF(a, b) (((a) + M - (b)) % M)
/* Seq::is_ahead_of: the wrapping difference is in 1..M/2 (exclusive) */
#define AHEAD(a, b) (DIFF(a, b) != 0 && DIFF(a, b) < M / 2)

#define FRAME(e, t) (1 << ((e) * M + (t)))
/* bounded buffers: a link holds at most CAP distinct frames in each direction; a frame sent
 * onto a full link is lost (a loss the protocol must survive anyway) */
#define PUT(set, n, f) \
  if :: (set & (f)) -> skip :: n < CAP -> set = set | (f); n++ :: else -> skip fi
#define SEND_UP(u, t) PUT(up[u], nup[u], FRAME(epoch, t))
#define SEND_DN(u, t) PUT(dn[u], ndn[u], FRAME(epoch, t))
#define ALLCH(s) ((1 << nch[s]) - 1)
#define HAS(set, p) (((set) >> (p)) & 1)

#ifdef BROKEN_NO_EPOCH
#define EPOCH_OK(e) 1
#else
#define EPOCH_OK(e) ((e) == epoch)
#endif

/* ---------------------------------------------------------------- switch (switch.rs) */

/* Action::SendRelease { seq: t, ports: every child but `except` (NCH: none excepted) } */
#define NOPORT 255
inline release_to_children(s, t, except) {
  hi = 0;
  do
  :: hi < nch[s] ->
     if
     :: hi != except -> SEND_DN(chl[s * MAXC + hi], t)
     :: else -> skip
     fi;
     hi++
  :: else -> break
  od
}

/* complete_if_last: Recorded while a child is missing; then root: release seq to every
 * child, seq+1, Collecting; intermediate: reduce seq to the parent, AwaitingRelease (the
 * ArmTimer action: the timer is modelled as enabled exactly in AwaitingRelease, which is
 * when on_timer acts). */
inline complete_if_last(s) {
  if
  :: sarr[s] == ALLCH(s) ->
     if
     :: s == 0 ->
        release_to_children(s, sseq[s], NOPORT);
        sseq[s] = NEXT(sseq[s]); sarr[s] = 0; sph[s] = COLLECTING
     :: else ->
        SEND_UP(sup[s], sseq[s]);
        sph[s] = AWAITING
     fi
  :: else -> skip
  fi
}

/* forward_release: release t to every child, seq = t+1, Collecting */
inline forward_release(s, t) {
  release_to_children(s, t, NOPORT);
  sseq[s] = NEXT(t); sarr[s] = 0; sph[s] = COLLECTING
}

/* resend_previous: release s-1 to that child only */
inline resend_previous(s, p) {
  SEND_DN(chl[s * MAXC + p], PREV(sseq[s]))
}

/* on_event for a frame of epoch fe, sequence t, from child port p (reduce) or from the
 * parent (release). Membership (NotAChild, NotTheParent) cannot fail here: every link ends
 * on the right port. The arms are on_event's, in its order. */
inline on_reduce(s, p, fe, t) {
  hcur = sseq[s];
  if
  :: !EPOCH_OK(fe) -> skip                                       /* Rejected(OtherEpoch) */
  :: else ->
     if
     :: sph[s] == COLLECTING && t == hcur && !HAS(sarr[s], p) ->  /* claim 6 row 2: record */
        sarr[s] = sarr[s] | (1 << p);
        complete_if_last(s)
     :: sph[s] == COLLECTING && t == hcur && HAS(sarr[s], p) -> skip   /* Duplicate */
     :: sph[s] == AWAITING && t == hcur -> skip                   /* Duplicate */
     :: sph[s] != UNKNOWN && t != hcur && !AHEAD(t, hcur) ->      /* StaleReduce */
#ifdef BROKEN_STALE_ANSWER_CURRENT
        SEND_DN(chl[s * MAXC + p], hcur)
#else
        resend_previous(s, p)
#endif
     :: sph[s] != UNKNOWN && t != hcur && AHEAD(t, hcur) ->       /* AheadReduce */
#ifdef BROKEN_ADOPT_KNOWN
        /* the old code: a reduce ahead proves t-1, even in the known state */
        release_to_children(s, PREV(t), p);
        sseq[s] = t; sarr[s] = (1 << p); sph[s] = COLLECTING;
        complete_if_last(s)
#else
        resend_previous(s, p)
#endif
     :: sph[s] == UNKNOWN && sarr[s] == 0 ->                      /* rule 1: gather at t */
        sseq[s] = t; sarr[s] = (1 << p);
        complete_if_last(s)
     :: sph[s] == UNKNOWN && sarr[s] != 0 && t == hcur ->         /* the highest heard */
        if
        :: HAS(sarr[s], p) -> skip                                /* Duplicate */
        :: else -> sarr[s] = sarr[s] | (1 << p); complete_if_last(s)
        fi
     :: sph[s] == UNKNOWN && sarr[s] != 0 && t != hcur && AHEAD(t, hcur) -> /* rule 2 */
        release_to_children(s, PREV(t), p);
        sseq[s] = t; sarr[s] = (1 << p);
        complete_if_last(s)
     :: sph[s] == UNKNOWN && sarr[s] != 0 && t != hcur && !AHEAD(t, hcur) -> /* rule 3 */
        resend_previous(s, p)
     fi
  fi
}

inline on_release(s, fe, t) {
  hcur = sseq[s];
  if
  :: !EPOCH_OK(fe) -> skip                                       /* Rejected(OtherEpoch) */
  :: else ->
     if
     :: sph[s] != UNKNOWN && t == hcur -> forward_release(s, t)   /* claim 6 row 3 */
     :: sph[s] != UNKNOWN && t != hcur && t == PREV(hcur) -> skip /* Duplicate */
     :: sph[s] != UNKNOWN && t != hcur && t != PREV(hcur) && AHEAD(t, hcur) ->
#ifdef BROKEN_ADOPT_KNOWN
        forward_release(s, t)                                    /* old: evidence rule 4 */
#else
        skip                                                     /* AheadRelease */
#endif
     :: sph[s] != UNKNOWN && t != hcur && t != PREV(hcur) && !AHEAD(t, hcur) -> skip
                                                                 /* StaleRelease */
     :: sph[s] == UNKNOWN -> forward_release(s, t)                /* rule 4 */
     fi
  fi
}

/* ---------------------------------------------------------------- leaf (leaf.rs) */

/* Leaf::on_release: only the awaited seq of the leaf's own epoch. Safety: every leaf of the
 * epoch sent a reduce for t. */
inline leaf_release(l, fe, t) {
  if
  :: fe == epoch && lwait[l] && lseq[l] == t ->
     hk = 0;
     do
     :: hk < NL -> assert(HAS(lred[hk], t)); hk++
     :: else -> break
     od;
     lwait[l] = 0; lseq[l] = NEXT(t); ldone[l]++
  :: else -> skip
  fi
}

/* ---------------------------------------------------------------- delivery */

inline deliver_up(u, b) {
  hfe = (b) / M; ht = (b) % M;
  hs = lpar[u]; hp = lport[u];
  on_reduce(hs, hp, hfe, ht)
}

inline deliver_dn(u, b) {
  hfe = (b) / M; ht = (b) % M;
  if
  :: lkind[u] == LEAF -> leaf_release(lchild[u], hfe, ht)
  :: else -> hs = lchild[u]; on_release(hs, hfe, ht)
  fi
}

/* one frame b on link u: deliver it (reordering: any frame in flight may go next),
 * duplicate it (deliver, keep it in flight), lose it */
#define DELIVER(G, u, b) \
  :: d_step { (G) && ((up[u] >> (b)) & 1) -> up[u] = up[u] & ~(1 << (b)); nup[u]--; deliver_up(u, b) } \
  :: d_step { (G) && ((dn[u] >> (b)) & 1) -> dn[u] = dn[u] & ~(1 << (b)); ndn[u]--; deliver_dn(u, b) }
#define FAULT(G, D, u, b) \
  :: d_step { (G) && ((up[u] >> (b)) & 1) -> D; deliver_up(u, b) } \
  :: d_step { (G) && ((dn[u] >> (b)) & 1) -> D; deliver_dn(u, b) } \
  :: d_step { (G) && ((up[u] >> (b)) & 1) -> D; up[u] = up[u] & ~(1 << (b)); nup[u]-- } \
  :: d_step { (G) && ((dn[u] >> (b)) & 1) -> D; dn[u] = dn[u] & ~(1 << (b)); ndn[u]-- }

#define BITS8(X, u, o) X(u, o+0) X(u, o+1) X(u, o+2) X(u, o+3) X(u, o+4) X(u, o+5) X(u, o+6) X(u, o+7)
#if EPOCHS * M > 8
#define BITS(X, u) BITS8(X, u, 0) BITS8(X, u, 8)
#else
#define BITS(X, u) BITS8(X, u, 0)
#endif
#if NU > 4
#define LINKS(X) BITS(X, 0) BITS(X, 1) BITS(X, 2) BITS(X, 3) BITS(X, 4) BITS(X, 5)
#else
#define LINKS(X) BITS(X, 0) BITS(X, 1) BITS(X, 2) BITS(X, 3)
#endif

/* ---------------------------------------------------------------- other events */

#define ALLDONE (ldone[0] >= K && ldone[1] >= K && ldone[2] >= K && (NL < 4 || ldone[NL-1] >= K))
#define CANARRIVE(l) (!lwait[l] && ldone[l] <= K)

/* Leaf::arrive */
#define ARRIVE(G, l) \
  :: d_step { (G) && CANARRIVE(l) -> lwait[l] = 1; lred[l] = lred[l] | (1 << lseq[l]); SEND_UP(lup[l], lseq[l]) }
/* Leaf::poll at the deadline: re-send */
#define LEAF_TIMER(G, l) \
  :: d_step { (G) && lwait[l] -> SEND_UP(lup[l], lseq[l]) }
/* on_timer: an intermediate in AwaitingRelease re-sends its reduce */
#ifdef BROKEN_NO_INTERMEDIATE_TIMER
#define SW_TIMER(G, s)
#else
#define SW_TIMER(G, s) \
  :: d_step { (G) && sph[s] == AWAITING -> SEND_UP(sup[s], sseq[s]) }
#endif

/* a switch restarts: GroupState::fresh(), timers gone. Assumption 7 (liveness): what was on
 * its way to the switch is lost with it. Safety does not rest on it, so the safety runs keep
 * those frames in flight (they can still arrive after the restart). */
#if defined(PROGRESS) && !defined(NO_QUIET_TIME)
inline quiet(s) {
  hi = 0;
  do
  :: hi < NU -> if :: lpar[hi] == s -> up[hi] = 0; nup[hi] = 0 :: else -> skip fi; hi++
  :: else -> break
  od;
  if :: s != 0 -> dn[sup[s]] = 0; ndn[sup[s]] = 0 :: else -> skip fi
}
#else
inline quiet(s) { skip }
#endif
#ifdef FAULTY
#define RESTART(G, D, s)
#else
#define RESTART(G, D, s) \
  :: d_step { (G) -> D; sseq[s] = 0; sph[s] = UNKNOWN; sarr[s] = 0; quiet(s) }
#endif
#if NS > 2
#define RESTARTS(G, D) RESTART(G, D, 0) RESTART(G, D, 1) RESTART(G, D, 2)
#else
#define RESTARTS(G, D) RESTART(G, D, 0) RESTART(G, D, 1)
#endif

/* a new run (a leaf restarted: management resets the group on every switch to a new
 * epoch, then every leaf starts over at F). Frames of the old epoch stay in flight. */
inline new_run() {
  epoch++;
  hi = 0;
  do :: hi < NS -> sseq[hi] = 0; sph[hi] = UNKNOWN; sarr[hi] = 0; hi++ :: else -> break od;
  hi = 0;
  do :: hi < NL -> lseq[hi] = F; lwait[hi] = 0; ldone[hi] = 0; lred[hi] = 0; hi++
     :: else -> break od;
  skip
}
#define NEWRUN(G, D) :: d_step { (G) && epoch < EPOCHS - 1 -> D; new_run() }

#ifdef FAULTY
#define ALLKNOWN (sph[0] != UNKNOWN && sph[1] != UNKNOWN && (NS < 3 || sph[NS-1] != UNKNOWN))
#define LIE(v) :: d_step { ALLKNOWN -> lred[0] = lred[0] | (1 << (v)); SEND_UP(lup[0], v) }
#define LIES LIE(0) LIE(1) LIE(2) LIE(3) LIE(4) LIE(5) LIE(6) LIE(7)
#if M != 8
#error "FAULTY is written for M = 8"
#endif
#endif

#define ALL_LEAVES(X, G) X(G, 0) X(G, 1) X(G, 2) X(G, NL-1)
#if NS > 2
#define INTERMEDIATES(X, G) X(G, 1) X(G, 2)
#else
#define INTERMEDIATES(X, G) X(G, 1)
#endif

/* the steps of the unhealed network: G guards faults, D books one */
#define DELIVER1(u, b) DELIVER(1, u, b)
#define STEPS \
  LINKS(DELIVER1) \
  ALL_LEAVES(ARRIVE, 1) \
  ALL_LEAVES(LEAF_TIMER, 1) \
  INTERMEDIATES(SW_TIMER, 1)

#ifdef PROGRESS
#define FG (faults > 0)
#define FD faults--
#else
#define FG 1
#define FD skip
#endif
#define FAULT1(u, b) FAULT(FG, FD, u, b)

/* ---------------------------------------------------------------- healed rounds */
#ifdef PROGRESS
#define NETEMPTY (up[0] == 0 && up[1] == 0 && up[2] == 0 && up[3] == 0 && dn[0] == 0 && dn[1] == 0 && dn[2] == 0 && dn[3] == 0 && (NU < 6 || (up[4] == 0 && up[5] == 0 && dn[4] == 0 && dn[5] == 0)))
#define NODUE (ldue[0] == 0 && ldue[1] == 0 && ldue[2] == 0 && ldue[NL-1] == 0 && sdue[1] == 0 && sdue[NS-1] == 0)
#define NOARRIVE (!CANARRIVE(0) && !CANARRIVE(1) && !CANARRIVE(2) && !CANARRIVE(NL-1))
#define HDELIVER(u, b) DELIVER(!ALLDONE, u, b)
#define HARRIVE(G, l) ARRIVE(G, l)
/* a due timer fires (once per round); stale if the leaf or switch moved on */
#define HLEAF_TIMER(G, l) \
  :: d_step { (G) && ldue[l] != 0 -> if :: lwait[l] && lseq[l] + 1 == ldue[l] -> SEND_UP(lup[l], lseq[l]) :: else -> skip fi; ldue[l] = 0 }
#ifdef BROKEN_NO_INTERMEDIATE_TIMER
#define HSW_TIMER(G, s) :: d_step { (G) && sdue[s] != 0 -> sdue[s] = 0 }
#else
#define HSW_TIMER(G, s) \
  :: d_step { (G) && sdue[s] != 0 -> if :: sph[s] == AWAITING && sseq[s] + 1 == sdue[s] -> SEND_UP(sup[s], sseq[s]) :: else -> skip fi; sdue[s] = 0 }
#endif
inline tick() {
  hi = 0;
  do :: hi < NL -> if :: lwait[hi] -> ldue[hi] = lseq[hi] + 1 :: else -> skip fi; hi++
     :: else -> break od;
  hi = 1;
  do :: hi < NS -> if :: sph[hi] == AWAITING -> sdue[hi] = sseq[hi] + 1 :: else -> skip fi; hi++
     :: else -> break od;
  skip
}
#endif

active proctype barrier() {
  d_step {
    topology();
    hi = 0;
    do :: hi < NL -> lseq[hi] = F; hi++ :: else -> break od;
    hi = 0
  }
#ifdef PROGRESS
  /* faults (at most FAULTS), any timing; a run that never heals owes nothing, so this
   * loop is a progress state */
progress_faulty:
  do
  STEPS
  LINKS(FAULT1)
  RESTARTS(FG, FD)
  NEWRUN(FG, FD)
  :: break                                            /* the network heals */
  od;
  /* healed: no loss, no duplication, no restart; frames in any order; rounds: the next
   * timeouts only once every frame of the round is delivered and every due timer fired, a
   * leaf at its barrier point arrives before the next timeout */
  do
  :: ALLDONE -> break
  LINKS(HDELIVER)
  ALL_LEAVES(HARRIVE, !ALLDONE)
  ALL_LEAVES(HLEAF_TIMER, !ALLDONE)
  INTERMEDIATES(HSW_TIMER, !ALLDONE)
  :: d_step { !ALLDONE && NETEMPTY && NODUE && NOARRIVE -> tick() }
  :: timeout -> assert(ALLDONE)                       /* stuck without a cycle */
  od;
progress_done:
  do :: skip od
#else
  do
  STEPS
  LINKS(FAULT1)
  RESTARTS(FG, FD)
  NEWRUN(FG, FD)
#ifdef FAULTY
  LIES
#endif
  od
#endif
}
