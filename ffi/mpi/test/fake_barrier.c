/*
 * fake_barrier.c: a stand-in libbarrier.so.0 for testing the fallback agreement of ffi/mpi
 * deterministically (scripts/tests/mpi_barrier.sh, "fake" cases). Same ABI as barrier.h, but
 * the "network" is a counter per barrier in a shared file (NBM_FAKE_FILE) that NBM_FAKE_NP
 * leaves (interfaces fake0, fake1, ...) count up; a barrier is released when all arrived.
 * NBM_FAKE_FAULT="LEAF:SEQ:MODE" breaks leaf LEAF's barrier SEQ:
 *   noarrive  returns BARRIER_ETIMEDOUT at once without arriving (nobody is released)
 *   lost      arrives, returns BARRIER_ETIMEDOUT without waiting (the others are released:
 *             a lost release followed by a dead switch)
 *   eio       arrives, returns BARRIER_EIO
 * and every later wait for that barrier on that leaf times out (or fails) the same way.
 * Polls with 20 us sleeps: for tests only.
 */
#include <barrier.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 4096

struct barrier_leaf {
    int idx;
    uint32_t seq;
    uint64_t timeout_us;
    int *arrivals; /* shared: arrivals[seq % SLOTS] */
    int np;
    int fault_seq;
    int arrived; /* at barrier seq (a wait after a timeout does not arrive again) */
    char fault_mode[16];
    barrier_stats stats;
};

static __thread char last_error[256];

void barrier_leaf_options_init(barrier_leaf_options *o)
{
    memset(o, 0, sizeof *o);
    o->resend_timeout_us = 1000;
    o->wait_timeout_us = 10000000;
    o->epoch = 1;
}

int barrier_leaf_open(const char *ifname, const barrier_leaf_options *opts, barrier_leaf **out)
{
    const char *file = getenv("NBM_FAKE_FILE"), *np = getenv("NBM_FAKE_NP");
    const char *fault = getenv("NBM_FAKE_FAULT");
    barrier_leaf *l;
    int fd, fl, fs;
    char mode[16];
    if (strncmp(ifname, "fake", 4) != 0 || file == NULL || np == NULL) {
        snprintf(last_error, sizeof last_error, "fake: no such interface %s", ifname);
        return BARRIER_ENODEV;
    }
    l = calloc(1, sizeof *l);
    l->idx = atoi(ifname + 4);
    l->np = atoi(np);
    l->timeout_us = opts != NULL ? opts->wait_timeout_us : 10000000;
    l->fault_seq = -1;
    if (fault != NULL && sscanf(fault, "%d:%d:%15s", &fl, &fs, mode) == 3 && fl == l->idx) {
        l->fault_seq = fs;
        snprintf(l->fault_mode, sizeof l->fault_mode, "%s", mode);
    }
    fd = open(file, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, SLOTS * sizeof(int)) != 0) {
        snprintf(last_error, sizeof last_error, "fake: cannot open %s", file);
        free(l);
        return BARRIER_EIO;
    }
    l->arrivals = mmap(NULL, SLOTS * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    *out = l;
    return BARRIER_OK;
}

int barrier_leaf_add_group(barrier_leaf *leaf, uint32_t group)
{
    (void)leaf;
    (void)group;
    return BARRIER_OK;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int barrier_leaf_wait(barrier_leaf *l, uint32_t group, uint64_t timeout_us, barrier_record *rec)
{
    int *slot = &l->arrivals[l->seq % SLOTS];
    uint64_t end;
    (void)group;
    (void)rec;
    if ((int)l->seq == l->fault_seq) {
        /* The faulty barrier, however often it is waited for: never released here. */
        if (!l->arrived && strcmp(l->fault_mode, "noarrive") != 0) {
            __atomic_add_fetch(slot, 1, __ATOMIC_SEQ_CST);
            l->stats.reduces++;
        }
        l->arrived = 1;
        snprintf(last_error, sizeof last_error, "fake: leaf %d %s at %u", l->idx, l->fault_mode, l->seq);
        return strcmp(l->fault_mode, "eio") == 0 ? BARRIER_EIO : BARRIER_ETIMEDOUT;
    }
    if (!l->arrived) { /* like the real leaf, a wait after a timeout goes on waiting */
        __atomic_add_fetch(slot, 1, __ATOMIC_SEQ_CST);
        l->stats.reduces++;
        l->arrived = 1;
    }
    end = now_us() + (timeout_us ? timeout_us : l->timeout_us);
    while (__atomic_load_n(slot, __ATOMIC_SEQ_CST) < l->np) {
        if (now_us() > end) {
            snprintf(last_error, sizeof last_error, "fake: group %u barrier %u timed out", group, l->seq);
            return BARRIER_ETIMEDOUT;
        }
        usleep(20);
    }
    l->stats.releases++;
    l->arrived = 0;
    l->seq++;
    return BARRIER_OK;
}

int barrier_leaf_stats(const barrier_leaf *l, barrier_stats *out)
{
    *out = l->stats;
    return BARRIER_OK;
}

void barrier_leaf_close(barrier_leaf *l)
{
    if (l == NULL)
        return;
    munmap(l->arrivals, SLOTS * sizeof(int));
    free(l);
}

const char *barrier_leaf_last_error(void) { return last_error; }

const char *barrier_strerror(int s)
{
    switch (s) {
    case BARRIER_OK: return "ok";
    case BARRIER_ETIMEDOUT: return "timed out";
    case BARRIER_EIO: return "I/O error";
    case BARRIER_ENODEV: return "no such device";
    default: return "error";
    }
}

const char *barrier_version(void) { return "fake"; }
