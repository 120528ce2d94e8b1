/*
 * netbarrier's barrier protocol as the project implements it, for spin.
 *
 *   dataplane/protocol/src/switch.rs  on_event, complete_if_last, forward_release, on_timer
 *   dataplane/protocol/src/leaf.rs    Leaf::arrive, Leaf::poll, Leaf::on_release
 *   docs/protocol.md                  the rules, the assumptions (numbered as here)
 *   docs/reliability.md               "Model checking": what this model is and is not
 *
 * One group on one tree. Every node is a state machine inside one process; every event is
 * one d_step (one event applied wholly, as GroupTable::apply's compare-and-swap does).
 *
 * The frame a step delivers is chosen inside an atomic sequence (link, direction, frame, then
 * what the network does with it) and handled by one shared d_step: the switch and leaf logic
 * appear once in the verifier, not once per link and frame, so pan.c compiles in seconds.
 * pan stores no state inside an atomic sequence, and the choice variables (sel_*) are zero
 * again when the step ends, so they add no states.
 *
 * Compile-time switches (spin -D..., forwarded to the C preprocessor):
 *   TREE_BIG          root, 2 intermediates, 2 leaves each (default: root with one
 *                     intermediate of 2 leaves and one leaf directly under the root)
 *   FAULTY            leaf 0 may also send a reduce with any sequence number of its epoch once
 *                     every switch is known (assumption 3: a faulty member, known state);
 *                     no restarts, one epoch
 *   PROGRESS          bounded faults (FAULTS), then healing, then fair rounds; run pan with
 *                     -DNP and -l: every leaf must complete K barriers
 *   K, M, F, EPOCHS, FAULTS, CAP, CAPDN   sizes (see below)
 *   BROKEN_STALE_ANSWER_CURRENT   known state: a reduce behind is answered with release s
 *   BROKEN_ADOPT_KNOWN            the evidence rules applied in the known state too
 *   BROKEN_NO_EPOCH               the switches do not check the epoch
 *   BROKEN_NO_INTERMEDIATE_TIMER  the intermediate never re-sends its reduce (liveness)
 *   NO_QUIET_TIME                 a restart keeps the frames on their way to the switch
 *                                 (drops assumption 7; liveness)
 *   NO_STALE_RELEASE_GUARD        rule 4 without the guard of fuzz finding 2: an Unknown
 *                                 switch with arrivals at s also takes a parent release
 *                                 for t with t+1 behind s (the code before the guard)
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
 * assumption 5 with 2^32 replaced by M). F near M makes every run cross the wrap. */
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
/* distinct frames in flight per link: CAP upward (reduces), CAPDN downward (releases) */
#ifndef CAP
#define CAP 2
#endif
#ifndef CAPDN
#define CAPDN CAP
#endif

#if (K + 1) * 2 >= M
#error "need M/2 > K+1 for the modular order to be exact"
#endif
#if EPOCHS * M > 15
#error "a link holds EPOCHS*M <= 15 distinct frames (a short, sign bit unused)"
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
/* barriers this leaf completed in this epoch: it starts at F and advances by one per release */
#define LDONE(l) DIFF(lseq[l], F)
/* Ghost: the leaf sent a reduce for t in this epoch. An honest leaf sent exactly F .. lseq-1
 * (each released) and lseq while waiting; leaf 0 under FAULTY also every number it lied
 * (bit t of `lies`). Kept as a function of the state, not as state of its own. */
#define SENT(l, t) (DIFF(t, F) < LDONE(l) + lwait[l] || ((l) == 0 && HAS(lies, t)))
byte lies;            /* FAULTY: the numbers leaf 0 sent out of turn in this epoch */

short up[NU];         /* reduces in flight, bit e*M+t: epoch e, sequence t */
short dn[NU];         /* releases in flight */

/* the frame a step delivers, chosen inside an atomic sequence; 0 outside it */
unsigned sel_u : 3;   /* link */
bit sel_d;            /* 0: up (a reduce), 1: down (a release) */
unsigned sel_b : 4;   /* frame: e*M+t */

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
/* bounded links: a link holds at most CAP (CAPDN) distinct frames in each direction; a frame
 * sent onto a full link is lost (a loss the protocol must survive anyway); a copy of a frame
 * already in flight is absorbed (a set, see "Abstractions") */
/* ROOM(x, c): fewer than c frames in set x (c = 1, 2, 3; x & (x-1) clears the lowest) */
#define LESS1(x) ((x) == 0)
#define LESS2(x) (((x) & ((x) - 1)) == 0)
#define LESS3(x) ((((x) & ((x) - 1)) & (((x) & ((x) - 1)) - 1)) == 0)
#if CAP == 1
#define ROOMUP(x) LESS1(x)
#elif CAP == 2
#define ROOMUP(x) LESS2(x)
#elif CAP == 3
#define ROOMUP(x) LESS3(x)
#else
#error "CAP is 1, 2 or 3"
#endif
#if CAPDN == 1
#define ROOMDN(x) LESS1(x)
#elif CAPDN == 2
#define ROOMDN(x) LESS2(x)
#elif CAPDN == 3
#define ROOMDN(x) LESS3(x)
#else
#error "CAPDN is 1, 2 or 3"
#endif
/* would sending f onto a link holding `set` change it */
#define TAKES_UP(set, f) (((set) & (f)) == 0 && ROOMUP(set))
#define TAKES_DN(set, f) (((set) & (f)) == 0 && ROOMDN(set))
/* the printf lines (not run by pan, printed by `spin -t`) make the trails readable */
#define SEND_UP(u, t) \
  if \
  :: TAKES_UP(up[u], FRAME(epoch, t)) -> up[u] = up[u] | FRAME(epoch, t); \
     printf("     send reduce e%d:%d up link %d\n", epoch, t, u) \
  :: up[u] & FRAME(epoch, t) -> printf("     send reduce e%d:%d up link %d: absorbed (in flight)\n", epoch, t, u) \
  :: else -> printf("     send reduce e%d:%d up link %d: LOST, link full\n", epoch, t, u) \
  fi
#define SEND_DN(u, t) \
  if \
  :: TAKES_DN(dn[u], FRAME(epoch, t)) -> dn[u] = dn[u] | FRAME(epoch, t); \
     printf("     send release e%d:%d down link %d\n", epoch, t, u) \
  :: dn[u] & FRAME(epoch, t) -> printf("     send release e%d:%d down link %d: absorbed (in flight)\n", epoch, t, u) \
  :: else -> printf("     send release e%d:%d down link %d: LOST, link full\n", epoch, t, u) \
  fi
#define ALLCH(s) ((1 << nch[s]) - 1)
#define HAS(set, p) (((set) >> (p)) & 1)

#ifdef BROKEN_NO_EPOCH
#define EPOCH_OK(e) 1
#else
#define EPOCH_OK(e) ((e) == epoch)
#endif

/* ---------------------------------------------------------------- switch (switch.rs) */

/* Action::SendRelease { seq: t, ports: every child but `except` (NOPORT: none excepted) } */
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
     printf("   -> Completed %d\n", sseq[s]);
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

/* forward_release: release t to every child, seq = t+1, Collecting. The assertion is the
 * fuzzer's invariant 8 (dataplane/fuzz-check/src/events.rs) where rule 4 acts: an Unknown
 * switch with arrivals never moves its seq back by adopting a release; the guard of fuzz
 * finding 2 is what keeps it (NO_STALE_RELEASE_GUARD breaks it). In the known state the
 * correct rules forward only the current barrier's release; BROKEN_ADOPT_KNOWN is left to
 * the safety assertion. */
inline forward_release(s, t) {
  assert(sph[s] != UNKNOWN || sarr[s] == 0 || NEXT(t) == sseq[s] || AHEAD(NEXT(t), sseq[s]));
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
  printf("   S%d (phase %d seq %d arrived %d) gets reduce e%d:%d on port %d\n", s, sph[s], hcur, sarr[s], fe, t, p);
  if
  :: !EPOCH_OK(fe) -> printf("   -> Rejected(OtherEpoch)\n")  /* Rejected(OtherEpoch) */
  :: else ->
     if
     :: sph[s] == COLLECTING && t == hcur && !HAS(sarr[s], p) ->  /* claim 6 row 2: record */
        printf("   -> record\n");
        sarr[s] = sarr[s] | (1 << p);
        complete_if_last(s)
     :: sph[s] == COLLECTING && t == hcur && HAS(sarr[s], p) -> printf("   -> Duplicate\n")
     :: sph[s] == AWAITING && t == hcur -> printf("   -> Duplicate\n")
     :: sph[s] != UNKNOWN && t != hcur && !AHEAD(t, hcur) ->      /* StaleReduce */
        printf("   -> StaleReduce\n");
#ifdef BROKEN_STALE_ANSWER_CURRENT
        SEND_DN(chl[s * MAXC + p], hcur)
#else
        resend_previous(s, p)
#endif
     :: sph[s] != UNKNOWN && t != hcur && AHEAD(t, hcur) ->       /* AheadReduce */
        printf("   -> AheadReduce\n");
#ifdef BROKEN_ADOPT_KNOWN
        /* the old code: a reduce ahead proves t-1, even in the known state */
        release_to_children(s, PREV(t), p);
        sseq[s] = t; sarr[s] = (1 << p); sph[s] = COLLECTING;
        complete_if_last(s)
#else
        resend_previous(s, p)
#endif
     :: sph[s] == UNKNOWN && sarr[s] == 0 ->                      /* rule 1: gather at t */
        printf("   -> Unknown, rule 1: gather at %d\n", t);
        sseq[s] = t; sarr[s] = (1 << p);
        complete_if_last(s)
     :: sph[s] == UNKNOWN && sarr[s] != 0 && t == hcur ->         /* the highest heard */
        if
        :: HAS(sarr[s], p) -> printf("   -> Unknown, Duplicate\n")
        :: else -> printf("   -> Unknown, record\n"); sarr[s] = sarr[s] | (1 << p); complete_if_last(s)
        fi
     :: sph[s] == UNKNOWN && sarr[s] != 0 && t != hcur && AHEAD(t, hcur) -> /* rule 2 */
        printf("   -> Unknown, rule 2: release %d to the others, gather at %d\n", PREV(t), t);
        release_to_children(s, PREV(t), p);
        sseq[s] = t; sarr[s] = (1 << p);
        complete_if_last(s)
     :: sph[s] == UNKNOWN && sarr[s] != 0 && t != hcur && !AHEAD(t, hcur) -> /* rule 3 */
        printf("   -> Unknown, rule 3: StaleReduce\n");
        resend_previous(s, p)
     fi
  fi
}

inline on_release(s, fe, t) {
  hcur = sseq[s];
  printf("   S%d (phase %d seq %d arrived %d) gets release e%d:%d\n", s, sph[s], hcur, sarr[s], fe, t);
  if
  :: !EPOCH_OK(fe) -> printf("   -> Rejected(OtherEpoch)\n")
  :: else ->
     if
     :: sph[s] != UNKNOWN && t == hcur ->                         /* claim 6 row 3 */
        printf("   -> Released\n"); forward_release(s, t)
     :: sph[s] != UNKNOWN && t != hcur && t == PREV(hcur) -> printf("   -> Duplicate\n")
     :: sph[s] != UNKNOWN && t != hcur && t != PREV(hcur) && AHEAD(t, hcur) ->
#ifdef BROKEN_ADOPT_KNOWN
        printf("   -> AheadRelease, forwarded (broken)\n");
        forward_release(s, t)                                    /* old: evidence rule 4 */
#else
        printf("   -> AheadRelease\n")
#endif
     :: sph[s] != UNKNOWN && t != hcur && t != PREV(hcur) && !AHEAD(t, hcur) ->
        printf("   -> StaleRelease\n")
#ifndef NO_STALE_RELEASE_GUARD
     :: sph[s] == UNKNOWN && sarr[s] != 0 && NEXT(t) != hcur && !AHEAD(NEXT(t), hcur) ->
        /* the guard (fuzz finding 2): children heard at s, t+1 behind s: StaleRelease */
        printf("   -> Unknown, release behind the gathered %d: StaleRelease\n", hcur)
     :: sph[s] == UNKNOWN && (sarr[s] == 0 || NEXT(t) == hcur || AHEAD(NEXT(t), hcur)) ->
        printf("   -> Unknown, rule 4: Released\n"); forward_release(s, t)
#else
     :: sph[s] == UNKNOWN ->                                      /* rule 4, unguarded */
        printf("   -> Unknown, rule 4: Released\n"); forward_release(s, t)
#endif
     fi
  fi
}

/* ---------------------------------------------------------------- leaf (leaf.rs) */

/* Leaf::on_release: only the awaited seq of the leaf's own epoch. Safety: every leaf of the
 * epoch sent a reduce for t. Under FAULTY the claim is about the honest leaves (a faulty
 * member's lie counts as its reduce; what happens to the faulty member itself is not
 * claimed). */
#ifdef FAULTY
#define CLAIMED(l) ((l) != 0)
#else
#define CLAIMED(l) 1
#endif
inline leaf_release(l, fe, t) {
  if
  :: fe == epoch && lwait[l] && lseq[l] == t ->
     printf("   L%d released from %d\n", l, t);
     hk = 0;
     do
     :: hk < NL -> assert(!CLAIMED(l) || SENT(hk, t)); hk++
     :: else -> break
     od;
     lwait[l] = 0; lseq[l] = NEXT(t)
  :: else -> printf("   L%d (epoch %d seq %d waiting %d) ignores release e%d:%d\n", l, epoch, lseq[l], lwait[l], fe, t)
  fi
}

/* ---------------------------------------------------------------- delivery */

/* a fault is allowed (FG) and booked (FD): in the progress runs at most FAULTS of them */
#ifdef PROGRESS
#define FG (faults > 0)
#define FD faults--
#else
#define FG 1
#define FD skip
#endif

/* the chosen frame (sel_u, sel_d, sel_b) arrives at the end of its link */
inline deliver() {
  hfe = sel_b / M; ht = sel_b % M;
  if
  :: sel_d == 0 -> hs = lpar[sel_u]; hp = lport[sel_u]; on_reduce(hs, hp, hfe, ht)
  :: sel_d == 1 && lkind[sel_u] == LEAF -> leaf_release(lchild[sel_u], hfe, ht)
  :: sel_d == 1 && lkind[sel_u] == SWITCH -> hs = lchild[sel_u]; on_release(hs, hfe, ht)
  fi
}

/* the chosen frame leaves its link */
inline take() {
  if
  :: sel_d == 0 -> up[sel_u] = up[sel_u] & ~(1 << sel_b)
  :: sel_d == 1 -> dn[sel_u] = dn[sel_u] & ~(1 << sel_b)
  fi
}

inline unselect() { sel_u = 0; sel_d = 0; sel_b = 0 }

#define SAYFRAME(fup, fdn) \
  if \
  :: sel_d == 0 -> printf(fup, sel_b / M, sel_b % M, sel_u) \
  :: else -> printf(fdn, sel_b / M, sel_b % M, sel_u) \
  fi

#define INFLIGHT(d, u) ((d) == 0 -> up[u] : dn[u])
#define PICK_LINK(u) \
  :: (ok) && up[u] != 0 -> sel_u = u; sel_d = 0 \
  :: (ok) && dn[u] != 0 -> sel_u = u; sel_d = 1
#define PICK_FRAME(b) :: (INFLIGHT(sel_d, sel_u) >> (b)) & 1 -> sel_b = b

/* One frame step: any frame in flight on any link may go next (reordering); it is delivered,
 * or (when `faulty` and FG allow a fault, which FD books) delivered and kept in flight
 * (duplication), or lost. The step is enabled when some frame is in flight and `ok` holds (the first statement
 * of the atomic sequence must carry both, or the sequence could block half-way). */
inline frame_step(ok, faulty) {
  atomic {
    if
    PICK_LINK(0) PICK_LINK(1) PICK_LINK(2) PICK_LINK(3)
#if NU > 4
    PICK_LINK(4) PICK_LINK(5)
#endif
    fi;
    if
    PICK_FRAME(0) PICK_FRAME(1) PICK_FRAME(2) PICK_FRAME(3)
    PICK_FRAME(4) PICK_FRAME(5) PICK_FRAME(6) PICK_FRAME(7)
#if EPOCHS * M > 8
    PICK_FRAME(8) PICK_FRAME(9) PICK_FRAME(10) PICK_FRAME(11)
    PICK_FRAME(12) PICK_FRAME(13) PICK_FRAME(14) PICK_FRAME(15)
#endif
    fi;
    if
    :: d_step { SAYFRAME("deliver reduce e%d:%d on link %d\n", "deliver release e%d:%d on link %d\n"); take(); deliver(); unselect() }
    :: (faulty) && FG -> d_step { FD; SAYFRAME("deliver reduce e%d:%d on link %d, a copy stays\n", "deliver release e%d:%d on link %d, a copy stays\n"); deliver(); unselect() }
    :: (faulty) && FG -> d_step { FD; SAYFRAME("lose reduce e%d:%d on link %d\n", "lose release e%d:%d on link %d\n"); take(); unselect() }
    fi
  }
}

/* ---------------------------------------------------------------- other events */

#if NL > 3
#define ALLDONE (LDONE(0) >= K && LDONE(1) >= K && LDONE(2) >= K && LDONE(3) >= K)
#else
#define ALLDONE (LDONE(0) >= K && LDONE(1) >= K && LDONE(2) >= K)
#endif
#define CANARRIVE(l) (!lwait[l] && LDONE(l) <= K)

/* Leaf::arrive */
#define ARRIVE(G, l) \
  :: d_step { (G) && CANARRIVE(l) -> printf("L%d arrives at %d\n", l, lseq[l]); lwait[l] = 1; SEND_UP(lup[l], lseq[l]) }
/* Leaf::poll at the deadline: re-send. The timers are enabled only when the re-send changes
 * the link: a copy of a frame in flight, or one onto a full link, would change nothing (a
 * self-loop, left out of the search; the state space is the same). */
#define LEAF_TIMER(G, l) \
  :: d_step { (G) && lwait[l] && TAKES_UP(up[lup[l]], FRAME(epoch, lseq[l])) -> printf("L%d re-sends %d\n", l, lseq[l]); SEND_UP(lup[l], lseq[l]) }
/* on_timer: an intermediate in AwaitingRelease re-sends its reduce */
#ifdef BROKEN_NO_INTERMEDIATE_TIMER
#define SW_TIMER(G, s)
#else
#define SW_TIMER(G, s) \
  :: d_step { (G) && sph[s] == AWAITING && TAKES_UP(up[sup[s]], FRAME(epoch, sseq[s])) -> printf("S%d timer: re-sends %d\n", s, sseq[s]); SEND_UP(sup[s], sseq[s]) }
#endif

/* a switch restarts: GroupState::fresh(), timers gone. Assumption 7 (liveness): what was on
 * its way to the switch is lost with it. Safety does not rest on it, so the safety runs keep
 * those frames in flight (they can still arrive after the restart). */
/* a restart of a switch that is fresh already changes nothing in the safety runs (a
 * self-loop, left out); in the progress runs it books a fault and may empty links */
#ifdef PROGRESS
#define USEFUL_RESTART(s) 1
#else
#define USEFUL_RESTART(s) (sph[s] != UNKNOWN || sarr[s] != 0)
#endif
#if defined(PROGRESS) && !defined(NO_QUIET_TIME)
inline quiet(s) {
  hi = 0;
  do
  :: hi < NU -> if :: lpar[hi] == s -> up[hi] = 0 :: else -> skip fi; hi++
  :: else -> break
  od;
  if :: s != 0 -> dn[sup[s]] = 0 :: else -> skip fi
}
#else
inline quiet(s) { skip }
#endif
#ifdef FAULTY
#define RESTART(G, D, s)
#else
#define RESTART(G, D, s) \
  :: d_step { (G) && USEFUL_RESTART(s) -> D; printf("S%d restarts\n", s); sseq[s] = 0; sph[s] = UNKNOWN; sarr[s] = 0; quiet(s) }
#endif
#if NS > 2
#define RESTARTS(G, D) RESTART(G, D, 0) RESTART(G, D, 1) RESTART(G, D, 2)
#else
#define RESTARTS(G, D) RESTART(G, D, 0) RESTART(G, D, 1)
#endif

/* a new run (a leaf restarted: management resets the group on every switch to a new
 * epoch, then every leaf starts over at F). Frames of the old epoch stay in flight. */
inline new_run() {
  epoch++; lies = 0;
  printf("new run: epoch %d\n", epoch);
  hi = 0;
  do :: hi < NS -> sseq[hi] = 0; sph[hi] = UNKNOWN; sarr[hi] = 0; hi++ :: else -> break od;
  hi = 0;
  do :: hi < NL -> lseq[hi] = F; lwait[hi] = 0; hi++
     :: else -> break od;
  skip
}
#define NEWRUN(G, D) :: d_step { (G) && epoch < EPOCHS - 1 -> D; new_run() }

#ifdef FAULTY
#define ALLKNOWN (sph[0] != UNKNOWN && sph[1] != UNKNOWN && (NS < 3 || sph[NS-1] != UNKNOWN))
#define LIE(v) :: d_step { ALLKNOWN && (!HAS(lies, v) || TAKES_UP(up[lup[0]], FRAME(epoch, v))) -> printf("L0 (faulty) sends reduce %d\n", v); lies = lies | (1 << (v)); SEND_UP(lup[0], v) }
#if M == 7
#define LIES LIE(0) LIE(1) LIE(2) LIE(3) LIE(4) LIE(5) LIE(6)
#elif M == 8
#define LIES LIE(0) LIE(1) LIE(2) LIE(3) LIE(4) LIE(5) LIE(6) LIE(7)
#else
#error "FAULTY is written for M = 7 or 8"
#endif
#endif

#if NL > 3
#define ALL_LEAVES(X, G) X(G, 0) X(G, 1) X(G, 2) X(G, 3)
#else
#define ALL_LEAVES(X, G) X(G, 0) X(G, 1) X(G, 2)
#endif
#if NS > 2
#define INTERMEDIATES(X, G) X(G, 1) X(G, 2)
#else
#define INTERMEDIATES(X, G) X(G, 1)
#endif


/* ---------------------------------------------------------------- healed rounds */
#ifdef PROGRESS
#if NU > 4
#define NETEMPTY (up[0] == 0 && up[1] == 0 && up[2] == 0 && up[3] == 0 && up[4] == 0 && up[5] == 0 && dn[0] == 0 && dn[1] == 0 && dn[2] == 0 && dn[3] == 0 && dn[4] == 0 && dn[5] == 0)
#else
#define NETEMPTY (up[0] == 0 && up[1] == 0 && up[2] == 0 && up[3] == 0 && dn[0] == 0 && dn[1] == 0 && dn[2] == 0 && dn[3] == 0)
#endif
#if NL > 3
#define NODUE (ldue[0] == 0 && ldue[1] == 0 && ldue[2] == 0 && ldue[3] == 0 && sdue[1] == 0 && sdue[2] == 0)
#define NOARRIVE (!CANARRIVE(0) && !CANARRIVE(1) && !CANARRIVE(2) && !CANARRIVE(3))
#else
#define NODUE (ldue[0] == 0 && ldue[1] == 0 && ldue[2] == 0 && sdue[1] == 0)
#define NOARRIVE (!CANARRIVE(0) && !CANARRIVE(1) && !CANARRIVE(2))
#endif
/* a due timer fires (once per round); stale if the leaf or switch moved on */
#define HLEAF_TIMER(G, l) \
  :: d_step { (G) && ldue[l] != 0 -> if :: lwait[l] && lseq[l] + 1 == ldue[l] -> printf("L%d re-sends %d\n", l, lseq[l]); SEND_UP(lup[l], lseq[l]) :: else -> skip fi; ldue[l] = 0 }
#ifdef BROKEN_NO_INTERMEDIATE_TIMER
#define HSW_TIMER(G, s) :: d_step { (G) && sdue[s] != 0 -> sdue[s] = 0 }
#else
#define HSW_TIMER(G, s) \
  :: d_step { (G) && sdue[s] != 0 -> if :: sph[s] == AWAITING && sseq[s] + 1 == sdue[s] -> printf("S%d timer: re-sends %d\n", s, sseq[s]); SEND_UP(sup[s], sseq[s]) :: else -> skip fi; sdue[s] = 0 }
#endif
inline tick() {
  printf("healed: timeouts of the next round\n");
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
  :: frame_step(true, true)
  ALL_LEAVES(ARRIVE, true)
  ALL_LEAVES(LEAF_TIMER, true)
  INTERMEDIATES(SW_TIMER, true)
  RESTARTS(FG, FD)
  NEWRUN(FG, FD)
  :: printf("the network heals\n"); break
  od;
  /* healed: no loss, no duplication, no restart; frames in any order; rounds: the next
   * timeouts only once every frame of the round is delivered and every due timer fired, a
   * leaf at its barrier point arrives before the next timeout */
  do
  :: ALLDONE -> break
  :: frame_step(!ALLDONE, false)
  ALL_LEAVES(ARRIVE, !ALLDONE)
  ALL_LEAVES(HLEAF_TIMER, !ALLDONE)
  INTERMEDIATES(HSW_TIMER, !ALLDONE)
  :: d_step { !ALLDONE && NETEMPTY && NODUE && NOARRIVE -> tick() }
  :: timeout -> assert(ALLDONE)                       /* stuck without a cycle */
  od
  /* every leaf completed K barriers: the process ends (a valid end state) */
#else
  /* every leaf past its last barrier, nothing in flight: a valid end */
end_idle:
  do
  :: frame_step(true, true)
  ALL_LEAVES(ARRIVE, true)
  ALL_LEAVES(LEAF_TIMER, true)
  INTERMEDIATES(SW_TIMER, true)
  RESTARTS(true, skip)
  NEWRUN(true, skip)
#ifdef FAULTY
  LIES
#endif
  od
#endif
}
