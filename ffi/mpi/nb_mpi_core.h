/*
 * nb_mpi_core.h: what the Open MPI coll component (coll/netbarrier) and the PMPI interposition
 * library (libnbpmpi) share: the job's mapping from the environment, the rank's leaf, the
 * in-network barrier and the fallback agreement of docs/mpi.md. No MPI types here: each binding
 * passes its own software barrier and reductions in nb_ops, so that this file compiles the
 * same against Open MPI and MPICH.
 */
#ifndef NB_MPI_CORE_H
#define NB_MPI_CORE_H

#include <stdint.h>

#include <barrier.h>

/* The binding's software collectives, on the served communicator (MPI_COMM_WORLD) or a private
 * duplicate of it. Each returns 0 on success, nonzero (the MPI error code) on failure. */
typedef struct nb_ops {
    /* A software barrier over the served communicator (the next component's, or PMPI_Barrier). */
    int (*sw_barrier)(void *ctx);
    /* MAX over all ranks of `in`, into *out, on a communicator no application call uses. */
    int (*allreduce_max_u64)(void *ctx, uint64_t in, uint64_t *out);
    /* MIN over all ranks of `in`, into *out, on a communicator no application call uses. */
    int (*allreduce_min_int)(void *ctx, int in, int *out);
    void *ctx;
} nb_ops;

typedef enum nb_mode {
    NB_OFF = 0, /* not served: every barrier goes to the software path, no agreement was made */
    NB_NET = 1, /* served in the network */
    NB_SW = 2   /* was served, fell back: software barriers only, for good */
} nb_mode;

typedef struct nb_core {
    nb_mode mode;
    const char *who;      /* "coll/netbarrier" or "libnbpmpi", for messages */
    int rank;             /* rank in MPI_COMM_WORLD */
    int verbose;          /* NETBARRIER_VERBOSE (or the MCA verbose level) */
    uint32_t group;
    uint32_t epoch;
    char iface[64];
    uint64_t timeout_us;  /* the in-network barrier's timeout before the fallback */
    barrier_leaf *leaf;   /* NULL unless mode == NB_NET */
    uint64_t count;       /* barriers entered and completed on the communicator so far */
    uint64_t net_done;    /* of those, released by the network */
    uint64_t sw_done;     /* of those, completed in software */
    int64_t fell_back_at; /* the barrier number that entered the fallback, -1 if none */
    int warned;           /* one warning per process */
    barrier_stats stats;  /* the leaf's counters, taken when it is closed */
    nb_ops ops;
} nb_core;

/* 1 when the job asks for netbarrier: NETBARRIER_GROUP is set and NETBARRIER_DISABLE is not
 * (that one says so when NETBARRIER_VERBOSE is set). Every rank of a job has the same
 * environment (mpirun -x, Slurm), so every rank gets the same answer; the bindings make
 * collective calls only when it is 1. */
int nb_core_wanted(void);

/* Reads the environment (NETBARRIER_GROUP, _EPOCH, _IFACE, _TIMEOUT_MS, _DISABLE, _VERBOSE).
 * Returns 1 when the job asks for netbarrier (NETBARRIER_GROUP set, NETBARRIER_DISABLE not),
 * 0 when not (silently), -1 when the settings are wrong (one warning printed). In the last two
 * cases core->mode is NB_OFF. `local_rank` picks the entry of a comma list NETBARRIER_IFACE. */
int nb_core_configure(nb_core *core, const char *who, int rank, int local_rank);

/* Collective over the served communicator, after nb_core_configure returned 1 on every rank:
 * opens the leaf (epoch, group) and agrees with every rank whether all could (MIN over ranks).
 * On return core->mode is NB_NET on every rank or NB_OFF on every rank. Returns 0, or the MPI
 * error code of a failed agreement. */
int nb_core_open(nb_core *core, const nb_ops *ops, int configured);

/* One barrier on the served communicator: in the network while mode is NB_NET, with the
 * fallback agreement on a timeout or an error; in software once fallen back. 0 or an MPI error
 * code (an agreement that breaks its own invariant returns -1 after printing why). */
int nb_core_barrier(nb_core *core);

/* At MPI_Finalize, collective: while still served, the closing agreement (one MAX reduction on
 * the private communicator; docs/mpi.md: why MPI_Finalize is a position of the sequence), then
 * closes the leaf and prints the summary line when verbose. Returns as nb_core_barrier. */
int nb_core_finalize(nb_core *core);

#endif /* NB_MPI_CORE_H */
