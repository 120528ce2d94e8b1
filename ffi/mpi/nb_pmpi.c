/*
 * nb_pmpi.c: libnbpmpi, the PMPI interposition library (LD_PRELOAD) that serves MPI_Barrier on
 * MPI_COMM_WORLD in the network. Built once per MPI library (MPICH and Open MPI have different
 * ABIs): libnbpmpi-mpich.so, libnbpmpi-openmpi.so. See docs/mpi.md.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nb_mpi_core.h"

/* coll/netbarrier looks this up and stands aside when the library is loaded: one leaf per rank. */
int netbarrier_pmpi_loaded = 1;

static nb_core core;
static MPI_Comm nb_private = MPI_COMM_NULL; /* a duplicate of MPI_COMM_WORLD for agreements */

static int pm_sw_barrier(void *ctx)
{
    (void)ctx;
    return PMPI_Barrier(MPI_COMM_WORLD);
}

static int pm_max_u64(void *ctx, uint64_t in, uint64_t *out)
{
    unsigned long long i = in, o = 0;
    int rc;
    (void)ctx;
    rc = PMPI_Allreduce(&i, &o, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, nb_private);
    *out = o;
    return rc;
}

static int pm_min_int(void *ctx, int in, int *out)
{
    (void)ctx;
    return PMPI_Allreduce(&in, out, 1, MPI_INT, MPI_MIN, nb_private);
}

static void nb_pmpi_start(void)
{
    static const nb_ops ops = { pm_sw_barrier, pm_max_u64, pm_min_int, NULL };
    int rank = 0, local = 0, configured, rc;
    MPI_Comm node;

    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    core.rank = rank;
    if (!nb_core_wanted())
        return; /* no NETBARRIER_GROUP (or disabled): the same on every rank */
    /* The node-local rank picks this rank's entry of NETBARRIER_IFACE. */
    rc = PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    if (rc == MPI_SUCCESS) {
        PMPI_Comm_rank(node, &local);
        PMPI_Comm_free(&node);
    } else {
        local = -1; /* only a single interface name will do */
    }
    configured = nb_core_configure(&core, "libnbpmpi", rank, local);
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &nb_private) != MPI_SUCCESS) {
        fprintf(stderr, "netbarrier: libnbpmpi: rank %d: warning: cannot duplicate "
                "MPI_COMM_WORLD; MPI_Barrier stays in software\n", rank);
        core.mode = NB_OFF;
        return;
    }
    (void)nb_core_open(&core, &ops, configured);
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS)
        nb_pmpi_start();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        nb_pmpi_start();
    return rc;
}

int MPI_Barrier(MPI_Comm comm)
{
    int rc;
    if (comm != MPI_COMM_WORLD || core.mode == NB_OFF)
        return PMPI_Barrier(comm);
    rc = nb_core_barrier(&core);
    if (rc != 0)
        return rc > 0 ? rc : MPI_ERR_INTERN;
    return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
    (void)nb_core_finalize(&core);
    if (nb_private != MPI_COMM_NULL)
        PMPI_Comm_free(&nb_private);
    return PMPI_Finalize();
}
