/*
 * barrier_example: a compute node that runs COUNT barriers of GROUP on interface IFACE through
 * libbarrier, printing one line per barrier and a summary.
 *
 *   cc barrier_example.c $(pkg-config --cflags --libs barrier) -o barrier_example
 *   ./barrier_example veth0 7 100 [records.csv]
 *
 * Exit status: 0 when every barrier completed, 1 on a barrier error (timeout, ...), 2 on setup
 * errors, 3 when the switch is at another barrier of the epoch (BARRIER_EEPOCHINUSE: an earlier
 * run used the group's epoch; reset the group to a new epoch and set opts.epoch to it).
 */
#include <barrier.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s IFACE GROUP COUNT [RECORDS_FILE]\n", argv[0]);
        return 2;
    }
    const char *iface = argv[1];
    uint32_t group = (uint32_t)strtoul(argv[2], NULL, 0);
    unsigned long count = strtoul(argv[3], NULL, 0);

    barrier_leaf_options opts;
    barrier_leaf_options_init(&opts);
    opts.resend_timeout_us = 2000;   /* re-send a lost reduce after 2 ms */
    opts.wait_timeout_us = 2000000;  /* give up on a barrier after 2 s */

    barrier_leaf *leaf = NULL;
    int rc = barrier_leaf_open(iface, &opts, &leaf);
    if (rc != BARRIER_OK) {
        fprintf(stderr, "barrier_leaf_open(%s): %s: %s\n", iface, barrier_strerror(rc), barrier_leaf_last_error());
        return 2;
    }
    rc = barrier_leaf_add_group(leaf, group);
    if (rc == BARRIER_OK && argc > 4)
        rc = barrier_leaf_records_to(leaf, argv[4]);
    if (rc != BARRIER_OK) {
        fprintf(stderr, "setup: %s: %s\n", barrier_strerror(rc), barrier_leaf_last_error());
        barrier_leaf_close(leaf);
        return 2;
    }

    int status = 0;
    for (unsigned long i = 0; i < count; i++) {
        barrier_record rec;
        rc = barrier_leaf_wait(leaf, group, 0, &rec);
        if (rc != BARRIER_OK) {
            fprintf(stderr, "barrier %lu: %s: %s\n", i, barrier_strerror(rc), barrier_leaf_last_error());
            status = rc == BARRIER_EEPOCHINUSE ? 3 : 1;
            break;
        }
        printf("barrier group=%" PRIu32 " seq=%" PRIu32 " latency_ns=%" PRIu64 " resends=%" PRIu32 "\n",
               rec.group, rec.seq, rec.release_ns - rec.first_reduce_ns, rec.resends);
    }

    barrier_stats st;
    uint32_t next = 0;
    if (barrier_leaf_stats(leaf, &st) == BARRIER_OK && barrier_leaf_seq(leaf, group, &next) == BARRIER_OK)
        printf("done: libbarrier %s, %" PRIu64 " releases, %" PRIu64 " re-sends, next seq %" PRIu32 "\n",
               barrier_version(), st.releases, st.resends, next);
    barrier_leaf_close(leaf);
    return status;
}
