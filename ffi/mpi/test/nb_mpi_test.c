/*
 * nb_mpi_test.c: a plain MPI program (it knows nothing of netbarrier) for the MPI barrier test
 * (scripts/tests/mpi_barrier.sh): N barriers on MPI_COMM_WORLD, each rank sleeping a random
 * short time before most of them (none before about a third), its CLOCK_MONOTONIC enter and
 * exit stamps per barrier written to PREFIX.RANK ("barrier enter_ns exit_ns" lines), checked
 * afterwards by scripts/tools/check_mpi_stamps.py. Every 97 barriers an MPI_Allreduce on
 * MPI_COMM_WORLD and a barrier on a duplicate of it check that the other collectives still
 * match.
 *
 * usage: nb_mpi_test BARRIERS PREFIX [SEED] [MARK_AT MARK_FILE]
 *   MARK_AT/MARK_FILE: rank 0 creates MARK_FILE after barrier MARK_AT (the test kills the
 *   switch then), and from there every rank sleeps 1 ms before each barrier so that the run
 *   is still going when the switch dies.
 */
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    long n, mark_at = -1;
    unsigned seed = 1;
    const char *prefix, *mark_file = NULL;
    uint64_t *enter, *leave;
    char path[4096];
    FILE *f;
    MPI_Comm dup;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 && argc != 4 && argc != 6) {
        if (rank == 0)
            fprintf(stderr, "usage: %s BARRIERS PREFIX [SEED] [MARK_AT MARK_FILE]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    n = atol(argv[1]);
    prefix = argv[2];
    if (argc >= 4)
        seed = (unsigned)strtoul(argv[3], NULL, 10);
    if (argc == 6) {
        mark_at = atol(argv[4]);
        mark_file = argv[5];
    }
    if (n <= 0 || n > 100000000) {
        fprintf(stderr, "nb_mpi_test: BARRIERS must be 1..100000000\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }
    enter = calloc((size_t)n, sizeof *enter);
    leave = calloc((size_t)n, sizeof *leave);
    if (enter == NULL || leave == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    srand(seed * 7919u + (unsigned)rank * 104729u);

    for (long k = 0; k < n; k++) {
        int r = rand() % 3;
        if (mark_at >= 0 && k > mark_at)
            sleep_us(1000);
        else if (r != 0)
            sleep_us(rand() % (r == 1 ? 50 : 400));
        enter[k] = now_ns();
        if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
            fprintf(stderr, "nb_mpi_test: rank %d: MPI_Barrier %ld failed\n", rank, k);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        leave[k] = now_ns();
        if (rank == 0 && k == mark_at && mark_file != NULL) {
            f = fopen(mark_file, "w");
            if (f != NULL)
                fclose(f);
        }
        if (k % 97 == 96) {
            long in = k + rank, sum = 0, want = (long)size * k + (long)size * (size - 1) / 2;
            MPI_Allreduce(&in, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
            if (sum != want) {
                fprintf(stderr, "nb_mpi_test: rank %d: MPI_Allreduce after barrier %ld gave "
                        "%ld, not %ld\n", rank, k, sum, want);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            MPI_Barrier(dup);
        }
    }

    snprintf(path, sizeof path, "%s.%d", prefix, rank);
    f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "nb_mpi_test: rank %d: cannot write %s: %s\n", rank, path,
                strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(f, "# rank %d of %d: barrier enter_ns exit_ns (CLOCK_MONOTONIC)\n", rank, size);
    for (long k = 0; k < n; k++)
        fprintf(f, "%ld %llu %llu\n", k, (unsigned long long)enter[k],
                (unsigned long long)leave[k]);
    if (fclose(f) != 0) {
        fprintf(stderr, "nb_mpi_test: rank %d: writing %s failed\n", rank, path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_free(&dup);
    free(enter);
    free(leave);
    MPI_Finalize();
    return 0;
}
