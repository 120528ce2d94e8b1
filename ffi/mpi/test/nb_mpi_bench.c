/*
 * nb_mpi_bench.c: MPI_Barrier latency on MPI_COMM_WORLD, back to back (perf/mpi.sh). Each rank
 * times every call after WARMUP untimed ones; rank 0 prints p50, p99 and max of the per-call
 * times over all ranks' samples, and the mean.
 *
 * usage: nb_mpi_bench ITERATIONS [WARMUP] [LABEL]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rank, size, n, warm;
    double *t, *all = NULL, sum = 0;
    const char *label;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    n = argc > 1 ? atoi(argv[1]) : 10000;
    warm = argc > 2 ? atoi(argv[2]) : 100;
    label = argc > 3 ? argv[3] : "MPI_Barrier";
    if (n <= 0 || n > 10000000 || warm < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: nb_mpi_bench ITERATIONS [WARMUP] [LABEL]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }
    t = malloc((size_t)n * sizeof *t);
    if (rank == 0)
        all = malloc((size_t)n * (size_t)size * sizeof *all);
    if (t == NULL || (rank == 0 && all == NULL))
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < warm; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        double s = now_us();
        MPI_Barrier(MPI_COMM_WORLD);
        t[i] = now_us() - s;
    }
    MPI_Gather(t, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        size_t m = (size_t)n * (size_t)size;
        for (size_t i = 0; i < m; i++)
            sum += all[i];
        qsort(all, m, sizeof *all, cmp);
        printf("%s: %d ranks, %d barriers: p50 %.1f us  p99 %.1f us  max %.1f us  mean %.1f us\n",
               label, size, n, all[m / 2], all[(m * 99) / 100], all[m - 1], sum / (double)m);
        free(all);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
