/* MPI_Barrier latency, for the performance suite (perf/run.sh, perf/README.md).
 *
 * usage: mpirun -np N mpi_barrier [ITERATIONS [WARMUP]] > out.json
 *
 * Every rank times each MPI_Barrier call (clock_gettime CLOCK_MONOTONIC around the call) after
 * WARMUP untimed calls. Rank 0 gathers all samples and prints one JSON object: the statistics
 * the OSU micro-benchmarks' osu_barrier prints (the average over iterations on each rank, then
 * min, max and mean of those averages over the ranks) and IMB-MPI1 Barrier's (t_min, t_max,
 * t_avg over ranks of each rank's average), plus p50, p99 and p99.9 of every call on every rank
 * pooled. Times in microseconds.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(const double *sorted, long n, double q) {
    long i = (long)(q * (double)(n - 1) + 0.5);
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return sorted[i];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long iters = argc > 1 ? atol(argv[1]) : 10000;
    long warmup = argc > 2 ? atol(argv[2]) : 1000;
    if (iters <= 0 || warmup < 0) {
        if (rank == 0) fprintf(stderr, "mpi_barrier: ITERATIONS must be > 0, WARMUP >= 0\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!t) MPI_Abort(MPI_COMM_WORLD, 3);

    for (long i = 0; i < warmup; i++) MPI_Barrier(MPI_COMM_WORLD);
    double sum = 0;
    for (long i = 0; i < iters; i++) {
        double a = now_us();
        MPI_Barrier(MPI_COMM_WORLD);
        t[i] = now_us() - a;
        sum += t[i];
    }
    double avg = sum / (double)iters, tmin, tmax, tsum;
    MPI_Reduce(&avg, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&avg, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&avg, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double *all = NULL;
    if (rank == 0) {
        all = malloc(sizeof(double) * (size_t)iters * (size_t)size);
        if (!all) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Gather(t, (int)iters, MPI_DOUBLE, all, (int)iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long n = iters * size;
        qsort(all, (size_t)n, sizeof(double), cmp);
        printf("{\"ranks\": %d, \"iterations\": %ld, \"warmup\": %ld, "
               "\"osu\": {\"avg_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f}, "
               "\"imb\": {\"repetitions\": %ld, \"t_min_us\": %.3f, \"t_max_us\": %.3f, \"t_avg_us\": %.3f}, "
               "\"p50_us\": %.3f, \"p99_us\": %.3f, \"p999_us\": %.3f, \"max_us\": %.3f}\n",
               size, iters, warmup, tsum / size, tmin, tmax, iters, tmin, tmax, tsum / size,
               quantile(all, n, 0.5), quantile(all, n, 0.99), quantile(all, n, 0.999),
               all[n - 1]);
        free(all);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
