/*
 * nb_mpi_core.c: the mapping, the leaf, the in-network barrier and the fallback agreement
 * shared by coll/netbarrier and libnbpmpi. The agreement and its proof are in docs/mpi.md,
 * "The fallback"; the comments here name its steps.
 */
#include "nb_mpi_core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB_DEFAULT_TIMEOUT_MS 10000u
#define NB_LAST_LOOK_US 2000u

static void nb_say(const nb_core *core, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line on stderr, prefixed with the library and the rank. */
static void nb_say(const nb_core *core, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "netbarrier: %s: rank %d: %s\n", core->who, core->rank, line);
    fflush(stderr);
}

/* The one warning of a process (later ones only when verbose). */
static void nb_warn(nb_core *core, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void nb_warn(nb_core *core, const char *fmt, ...)
{
    char line[900];
    va_list ap;
    if (core->warned && !core->verbose)
        return;
    core->warned = 1;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    nb_say(core, "warning: %s", line);
}

/* A decimal u32 from the environment: 1 and *out when set and valid, 0 when unset, -1 when
 * set but not a number (the caller warns). */
static int env_u32(const char *name, uint32_t *out)
{
    const char *s = getenv(name);
    char *end;
    unsigned long long v;
    if (s == NULL || *s == '\0')
        return 0;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s || s[0] == '-' || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 1;
}

static int env_flag(const char *name)
{
    const char *s = getenv(name);
    return s != NULL && *s != '\0' && strcmp(s, "0") != 0;
}

int nb_core_wanted(void)
{
    const char *g = getenv("NETBARRIER_GROUP");
    if (g == NULL || *g == '\0')
        return 0;
    if (env_flag("NETBARRIER_DISABLE")) {
        if (env_flag("NETBARRIER_VERBOSE"))
            fprintf(stderr, "netbarrier: NETBARRIER_DISABLE is set: MPI_COMM_WORLD not served\n");
        return 0;
    }
    return 1;
}

int nb_core_configure(nb_core *core, const char *who, int rank, int local_rank)
{
    const char *list;
    uint32_t timeout_ms = NB_DEFAULT_TIMEOUT_MS;
    uint32_t verbose = 0;
    int r, n;
    const char *p;

    memset(core, 0, sizeof *core);
    core->mode = NB_OFF;
    core->who = who;
    core->rank = rank;
    core->fell_back_at = -1;
    core->epoch = 1;
    if (env_u32("NETBARRIER_VERBOSE", &verbose) < 0)
        verbose = 1;
    if (verbose > (uint32_t)core->verbose)
        core->verbose = (int)verbose;

    if (!nb_core_wanted())
        return 0; /* not a netbarrier job: silence */
    r = env_u32("NETBARRIER_GROUP", &core->group);
    if (r < 0 || core->group >= (1u << 20)) {
        nb_warn(core, "NETBARRIER_GROUP=%s is not a group number (0..1048575); "
                "MPI_Barrier stays in software", getenv("NETBARRIER_GROUP"));
        return -1;
    }
    if (env_u32("NETBARRIER_EPOCH", &core->epoch) < 0) {
        nb_warn(core, "NETBARRIER_EPOCH=%s is not a number (0..4294967295); "
                "MPI_Barrier stays in software", getenv("NETBARRIER_EPOCH"));
        return -1;
    }
    r = env_u32("NETBARRIER_TIMEOUT_MS", &timeout_ms);
    if (r < 0 || (r > 0 && timeout_ms == 0)) {
        nb_warn(core, "NETBARRIER_TIMEOUT_MS=%s is not a timeout in ms (1..4294967295); "
                "MPI_Barrier stays in software", getenv("NETBARRIER_TIMEOUT_MS"));
        return -1;
    }
    core->timeout_us = (uint64_t)timeout_ms * 1000u;

    /* NETBARRIER_IFACE: one name, or a comma list indexed by the node-local rank. */
    list = getenv("NETBARRIER_IFACE");
    if (list == NULL || *list == '\0') {
        nb_warn(core, "NETBARRIER_GROUP is set but NETBARRIER_IFACE is not; "
                "MPI_Barrier stays in software");
        return -1;
    }
    p = list;
    if (strchr(list, ',') != NULL) {
        for (n = 0; n < local_rank && p != NULL; n++) {
            p = strchr(p, ',');
            if (p != NULL)
                p++;
        }
        if (p == NULL || local_rank < 0) {
            nb_warn(core, "NETBARRIER_IFACE=%s has no entry for node-local rank %d; "
                    "MPI_Barrier stays in software", list, local_rank);
            return -1;
        }
    }
    n = (int)strcspn(p, ",");
    if (n == 0 || (size_t)n >= sizeof core->iface) {
        nb_warn(core, "NETBARRIER_IFACE=%s: entry %d is empty or too long; "
                "MPI_Barrier stays in software", list, local_rank);
        return -1;
    }
    memcpy(core->iface, p, (size_t)n);
    core->iface[n] = '\0';
    return 1;
}

int nb_core_open(nb_core *core, const nb_ops *ops, int configured)
{
    barrier_leaf_options opts;
    int ok = 0, all = 0, rc;

    core->ops = *ops;
    core->mode = NB_OFF;
    if (configured > 0) {
        barrier_leaf_options_init(&opts);
        opts.epoch = core->epoch;
        opts.wait_timeout_us = core->timeout_us;
        rc = barrier_leaf_open(core->iface, &opts, &core->leaf);
        if (rc != BARRIER_OK) {
            nb_warn(core, "cannot open a leaf on %s (%s: %s); MPI_Barrier on MPI_COMM_WORLD "
                    "stays in software", core->iface, barrier_strerror(rc),
                    barrier_leaf_last_error());
            core->leaf = NULL;
        } else if ((rc = barrier_leaf_add_group(core->leaf, core->group)) != BARRIER_OK) {
            nb_warn(core, "cannot join group %" PRIu32 " on %s (%s: %s); MPI_Barrier on "
                    "MPI_COMM_WORLD stays in software", core->group, core->iface,
                    barrier_strerror(rc), barrier_leaf_last_error());
            barrier_leaf_close(core->leaf);
            core->leaf = NULL;
        } else {
            ok = 1;
        }
    }
    /* Served only when every rank has its leaf: a barrier with some ranks in the network and
     * others in software would never complete. */
    rc = core->ops.allreduce_min_int(core->ops.ctx, ok, &all);
    if (rc != 0) {
        nb_warn(core, "the start-up agreement failed (MPI error %d); MPI_Barrier stays in "
                "software", rc);
        all = 0;
    }
    if (all == 1) {
        core->mode = NB_NET;
        if (core->verbose)
            nb_say(core, "MPI_COMM_WORLD served: group %" PRIu32 " epoch %" PRIu32
                   " on %s, timeout %" PRIu64 " ms", core->group, core->epoch, core->iface,
                   core->timeout_us / 1000u);
    } else {
        if (ok) {
            nb_warn(core, "another rank could not open its leaf; MPI_Barrier on "
                    "MPI_COMM_WORLD stays in software");
        }
        if (core->leaf != NULL) {
            barrier_leaf_close(core->leaf);
            core->leaf = NULL;
        }
    }
    return rc;
}

/* Closes the leaf, keeping its counters. A release that comes later goes nowhere. */
static void nb_close_leaf(nb_core *core)
{
    if (core->leaf == NULL)
        return;
    (void)barrier_leaf_stats(core->leaf, &core->stats);
    barrier_leaf_close(core->leaf);
    core->leaf = NULL;
}

static int nb_sw_barrier(nb_core *core)
{
    int rc = core->ops.sw_barrier(core->ops.ctx);
    if (rc == 0) {
        core->count++;
        core->sw_done++;
    }
    return rc;
}

/* The agreement (docs/mpi.md, "The fallback"): this rank is at position v of the barrier
 * sequence (barrier v, or MPI_Finalize when v == the number of barriers) and will never be
 * released there by the network. Every rank of the communicator comes here exactly once. */
static int nb_agree(nb_core *core, uint64_t v, int at_finalize)
{
    uint64_t m = 0;
    int rc;

    nb_close_leaf(core);
    core->mode = NB_SW;
#ifdef NB_BROKEN_NAIVE_FALLBACK
    /* Test only (scripts/tests/mpi_barrier.sh's control): the naive fallback, a software
     * barrier on the spot with no agreement, which the test must catch. */
    (void)m;
    (void)rc;
    return at_finalize ? 0 : nb_sw_barrier(core);
#endif
    rc = core->ops.allreduce_max_u64(core->ops.ctx, v, &m);
    if (rc != 0) {
        nb_say(core, "error: the fallback agreement at barrier %" PRIu64 " failed (MPI error "
               "%d)", v, rc);
        return rc;
    }
    if (m == v + 1 && !at_finalize) {
        /* Some rank is past barrier v, so the network released v: every rank entered it.
         * This rank returns from v; its next barrier (or MPI_Finalize) is in software. */
        core->count++;
        return 0;
    }
    if (m == v) {
        /* The ranks at v-1, if any, return from v-1; their next position is v, this one:
         * a software barrier on both sides, or MPI_Finalize on both sides (no barrier). */
        return at_finalize ? 0 : nb_sw_barrier(core);
    }
    nb_say(core, "error: fallback agreement broken: this rank is at barrier %" PRIu64
           " and another at %" PRIu64 " (docs/mpi.md, \"The fallback\"); refusing to guess",
           v, m);
    return -1;
}

int nb_core_barrier(nb_core *core)
{
    uint64_t v;
    int rc;

    if (core->mode == NB_OFF)
        return core->ops.sw_barrier(core->ops.ctx);
    if (core->mode == NB_SW)
        return nb_sw_barrier(core);

    rc = barrier_leaf_wait(core->leaf, core->group, core->timeout_us, NULL);
    if (rc == BARRIER_ETIMEDOUT) {
        /* A last look before the fallback: the leaf checks its deadline before it reads its
         * socket, so a process descheduled past the deadline can time out with its release
         * queued there. One more short wait reads what is queued (the leaf still waits at
         * this barrier after a timeout). */
        rc = barrier_leaf_wait(core->leaf, core->group, NB_LAST_LOOK_US, NULL);
    }
    if (rc == BARRIER_OK) {
        core->count++;
        core->net_done++;
        return 0;
    }

    /* The fallback: barrier v did not complete in the network. */
    v = core->count;
    if (rc == BARRIER_ETIMEDOUT)
        nb_warn(core, "barrier %" PRIu64 " of group %" PRIu32 " not released within %" PRIu64
                " ms (%s); falling back to the software barrier for the rest of the run",
                v, core->group, core->timeout_us / 1000u, barrier_leaf_last_error());
    else
        nb_warn(core, "barrier %" PRIu64 " of group %" PRIu32 " failed: %s (%d): %s; falling "
                "back to the software barrier for the rest of the run", v, core->group,
                barrier_strerror(rc), rc, barrier_leaf_last_error());
    core->fell_back_at = (int64_t)v;
    return nb_agree(core, v, 0);
}

int nb_core_finalize(nb_core *core)
{
    int rc = 0;
    if (core->mode == NB_OFF)
        return 0;
    /* MPI_Finalize is the last position of the sequence, and no network barrier: a rank still
     * served enters the agreement here (v = the number of barriers), where a rank that timed
     * out at the program's last barrier, after others were released from it, meets it. A rank
     * that fell back already has nothing to do. */
    if (core->mode == NB_NET)
        rc = nb_agree(core, core->count, 1);
    nb_close_leaf(core);
    if (core->verbose) {
        char fb[48];
        if (core->fell_back_at < 0)
            snprintf(fb, sizeof fb, "none");
        else
            snprintf(fb, sizeof fb, "at barrier %" PRId64, core->fell_back_at);
        nb_say(core, "summary: group %" PRIu32 " iface %s barriers %" PRIu64 " in-network %"
               PRIu64 " software %" PRIu64 " fallback %s; leaf reduces %" PRIu64 " resends %"
               PRIu64 " releases %" PRIu64 " stale %" PRIu64, core->group, core->iface,
               core->count, core->net_done, core->sw_done, fb, core->stats.reduces,
               core->stats.resends, core->stats.releases, core->stats.stale_releases);
    }
    core->mode = NB_OFF;
    return rc;
}
