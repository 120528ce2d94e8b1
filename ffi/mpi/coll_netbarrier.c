/*
 * coll_netbarrier.c: coll/netbarrier, an Open MPI 4.1 collective component that serves
 * MPI_Barrier on MPI_COMM_WORLD in the network (netbarrier's leaf through libbarrier), built out
 * of tree against Debian's Open MPI headers as mca_coll_netbarrier.so. Selected the way coll/ucc
 * is: MCA parameters coll_netbarrier_enable, _priority, _min_size, _verbose. Every other
 * communicator and collective stays with the components below it; on an offload error or a
 * timeout the barrier falls back to the previous component's barrier (docs/mpi.md).
 */
#include "ompi_config.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/base/base.h"
#include "ompi/mca/coll/coll.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/proc.h"

#include "nb_mpi_core.h"

typedef struct mca_coll_netbarrier_component_t {
    mca_coll_base_component_2_0_0_t super;
    int priority;
    int verbose;
    int enable;
    int min_size;
} mca_coll_netbarrier_component_t;

typedef struct mca_coll_netbarrier_module_t {
    mca_coll_base_module_t super;
    /* the barrier below this one: the software path of the fallback */
    mca_coll_base_module_barrier_fn_t previous_barrier;
    mca_coll_base_module_t *previous_barrier_module;
    struct ompi_communicator_t *comm; /* MPI_COMM_WORLD */
    MPI_Comm agree;                   /* private duplicate of it, for the agreements */
    int started;                      /* the lazy start (first barrier) has run */
    int local_rank;
    nb_core core;
} mca_coll_netbarrier_module_t;

static void nbm_construct(mca_coll_netbarrier_module_t *m);
static void nbm_destruct(mca_coll_netbarrier_module_t *m);
OBJ_CLASS_INSTANCE(mca_coll_netbarrier_module_t, mca_coll_base_module_t, nbm_construct,
                   nbm_destruct);

static int nb_register(void);
static int nb_init_query(bool enable_progress_threads, bool enable_mpi_threads);
static mca_coll_base_module_t *nb_comm_query(struct ompi_communicator_t *comm, int *priority);

/* The name Open MPI looks up in mca_coll_netbarrier.so. */
mca_coll_netbarrier_component_t mca_coll_netbarrier_component = {
    .super = {
        .collm_version = {
            MCA_COLL_BASE_VERSION_2_0_0,
            .mca_component_name = "netbarrier",
            MCA_BASE_MAKE_VERSION(component, OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
                                  OMPI_RELEASE_VERSION),
            .mca_register_component_params = nb_register,
        },
        .collm_data = { MCA_BASE_METADATA_PARAM_NONE },
        .collm_init_query = nb_init_query,
        .collm_comm_query = nb_comm_query,
    },
    .priority = 90, /* above tuned (30), han (35), sm and libnbc: it takes MPI_Barrier only */
    .verbose = 0,
    .enable = 1,    /* still needs NETBARRIER_GROUP in the environment to serve anything */
    .min_size = 2,
};

static int nb_register(void)
{
    mca_coll_netbarrier_component_t *cm = &mca_coll_netbarrier_component;
    mca_base_component_t *c = &cm->super.collm_version;
    mca_base_component_var_register(c, "priority", "Priority of the netbarrier coll component",
                                    MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
                                    OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_ALL, &cm->priority);
    mca_base_component_var_register(c, "verbose",
                                    "Verbose level of the netbarrier coll component (0: "
                                    "warnings only; 1: start-up and a summary per rank at "
                                    "MPI_Finalize; NETBARRIER_VERBOSE does the same)",
                                    MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
                                    OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_ALL, &cm->verbose);
    mca_base_component_var_register(c, "enable",
                                    "[0|1] Enable/Disable the netbarrier coll component (it "
                                    "serves only jobs with NETBARRIER_GROUP set)",
                                    MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
                                    OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_ALL, &cm->enable);
    mca_base_component_var_register(c, "min_size",
                                    "Minimal communicator size for the netbarrier coll "
                                    "component",
                                    MCA_BASE_VAR_TYPE_INT, NULL, 0, MCA_BASE_VAR_FLAG_SETTABLE,
                                    OPAL_INFO_LVL_9, MCA_BASE_VAR_SCOPE_ALL, &cm->min_size);
    return OMPI_SUCCESS;
}

static int nb_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}

static void nbm_construct(mca_coll_netbarrier_module_t *m)
{
    m->previous_barrier = NULL;
    m->previous_barrier_module = NULL;
    m->comm = NULL;
    m->agree = MPI_COMM_NULL;
    m->started = 0;
    m->local_rank = -1;
    m->core.mode = NB_OFF;
    m->core.leaf = NULL;
}

static void nbm_destruct(mca_coll_netbarrier_module_t *m)
{
    /* MPI_Finalize ran the last barrier (nb_finalize_cb); a leaf still open here belongs to a
     * job that never got that far: close it without another barrier. */
    if (m->core.leaf != NULL) {
        barrier_leaf_close(m->core.leaf);
        m->core.leaf = NULL;
    }
    if (m->previous_barrier_module != NULL)
        OBJ_RELEASE(m->previous_barrier_module);
}

/* The software collectives of the fallback. */
static int nb_sw_barrier(void *ctx)
{
    mca_coll_netbarrier_module_t *m = ctx;
    return m->previous_barrier(m->comm, m->previous_barrier_module);
}

static int nb_max_u64(void *ctx, uint64_t in, uint64_t *out)
{
    mca_coll_netbarrier_module_t *m = ctx;
    unsigned long long i = in, o = 0;
    int rc = PMPI_Allreduce(&i, &o, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, m->agree);
    *out = o;
    return rc;
}

static int nb_min_int(void *ctx, int in, int *out)
{
    mca_coll_netbarrier_module_t *m = ctx;
    return PMPI_Allreduce(&in, out, 1, MPI_INT, MPI_MIN, m->agree);
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still works: the closing
 * agreement of the barrier sequence runs there (docs/mpi.md, "The fallback", step 4). */
static int nb_finalize_cb(MPI_Comm comm, int keyval, void *value, void *extra)
{
    mca_coll_netbarrier_module_t *m = value;
    (void)comm;
    (void)keyval;
    (void)extra;
    (void)nb_core_finalize(&m->core);
    if (m->agree != MPI_COMM_NULL)
        PMPI_Comm_free(&m->agree);
    OBJ_RELEASE(m); /* nb_start's reference; MPI_COMM_WORLD still holds its own */
    return MPI_SUCCESS;
}

/* The first MPI_Barrier on MPI_COMM_WORLD: every rank calls it at the same point, so the
 * collective start-up (a private duplicate, the leaf, the agreement) happens here rather than
 * in module_enable, where the communicator's collectives are not set up yet. */
static void nb_start(mca_coll_netbarrier_module_t *m)
{
    mca_coll_netbarrier_component_t *cm = &mca_coll_netbarrier_component;
    static const nb_ops ops_template = { nb_sw_barrier, nb_max_u64, nb_min_int, NULL };
    nb_ops ops = ops_template;
    int configured, keyval;

    m->started = 1;
    configured = nb_core_configure(&m->core, "coll/netbarrier", ompi_comm_rank(m->comm),
                                   m->local_rank);
    if (cm->verbose > m->core.verbose)
        m->core.verbose = cm->verbose;
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &m->agree) != MPI_SUCCESS) {
        fprintf(stderr, "netbarrier: coll/netbarrier: rank %d: warning: cannot duplicate "
                "MPI_COMM_WORLD; MPI_Barrier stays in software\n", m->core.rank);
        m->agree = MPI_COMM_NULL;
        m->core.mode = NB_OFF;
        return;
    }
    ops.ctx = m;
    (void)nb_core_open(&m->core, &ops, configured);
    if (m->core.mode != NB_NET)
        return;
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, nb_finalize_cb, &keyval, NULL)
            != MPI_SUCCESS
        || PMPI_Comm_set_attr(MPI_COMM_SELF, keyval, m) != MPI_SUCCESS) {
        /* Without the hook there is no closing agreement in MPI_Finalize, and a timeout at
         * the program's last barrier could hang. Neither call fails short of running out of
         * memory (then other ranks may disagree: the run is lost anyway). */
        fprintf(stderr, "netbarrier: coll/netbarrier: rank %d: warning: cannot hook "
                "MPI_Finalize; MPI_Barrier stays in software\n", m->core.rank);
        barrier_leaf_close(m->core.leaf);
        m->core.leaf = NULL;
        m->core.mode = NB_OFF;
        return;
    }
    /* The module must outlive MPI_COMM_WORLD's destruction until the callback ran. */
    OBJ_RETAIN(m);
}

static int nb_barrier(struct ompi_communicator_t *comm, mca_coll_base_module_t *module)
{
    mca_coll_netbarrier_module_t *m = (mca_coll_netbarrier_module_t *)module;
    int rc;
    if (!m->started)
        nb_start(m);
    if (m->core.mode == NB_OFF)
        return m->previous_barrier(comm, m->previous_barrier_module);
    rc = nb_core_barrier(&m->core);
    if (rc != 0)
        return rc > 0 ? rc : OMPI_ERROR;
    return OMPI_SUCCESS;
}

static int nb_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_netbarrier_module_t *m = (mca_coll_netbarrier_module_t *)module;
    /* Modules are enabled from the lowest priority up: the table holds the barrier below. */
    if (comm->c_coll->coll_barrier == NULL || comm->c_coll->coll_barrier_module == NULL) {
        opal_output(0, "coll/netbarrier: no barrier below this component; not enabled");
        return OMPI_ERROR;
    }
    m->previous_barrier = comm->c_coll->coll_barrier;
    m->previous_barrier_module = comm->c_coll->coll_barrier_module;
    OBJ_RETAIN(m->previous_barrier_module);
    m->comm = comm;
    /* The node-local rank as the runtime knows it (mpirun, or PMIx under a direct launch):
     * the rank in MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), which cannot be called before
     * the communicator's collectives are set up. */
    m->local_rank = opal_process_info.my_local_rank;
    return OMPI_SUCCESS;
}

static mca_coll_base_module_t *nb_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    mca_coll_netbarrier_component_t *cm = &mca_coll_netbarrier_component;
    mca_coll_netbarrier_module_t *m;

    *priority = 0;
    /* One barrier group per job: MPI_COMM_WORLD only (docs/mpi.md, "What is served"). */
    if (!cm->enable || comm != &ompi_mpi_comm_world.comm || OMPI_COMM_IS_INTER(comm)
        || ompi_comm_size(comm) < cm->min_size || ompi_comm_size(comm) < 2
        || !nb_core_wanted())
        return NULL;
    /* libnbpmpi (LD_PRELOAD) serves MPI_Barrier already: two leaves of one rank in one group
     * would each count the rank's barriers. */
    if (dlsym(RTLD_DEFAULT, "netbarrier_pmpi_loaded") != NULL) {
        if (cm->verbose > 0)
            opal_output(0, "coll/netbarrier: libnbpmpi is loaded and serves MPI_Barrier; "
                        "this component stands aside");
        return NULL;
    }
    m = OBJ_NEW(mca_coll_netbarrier_module_t);
    if (m == NULL)
        return NULL;
    m->super.coll_module_enable = nb_module_enable;
    m->super.coll_barrier = nb_barrier;
    /* MPI_Ibarrier is not served: docs/mpi.md, "What is served". */
    *priority = cm->priority;
    return &m->super;
}
