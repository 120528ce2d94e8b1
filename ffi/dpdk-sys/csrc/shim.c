/* See shim.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t, hence rte_cpuset_t and rte_lcore_cpuset */
#endif
#include <sched.h>
#include <rte_lcore.h>
#include <rte_errno.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include "shim.h"

int dpdk_sys_rte_errno(void) { return rte_errno; }

void dpdk_sys_set_rte_errno(int value) { rte_errno = value; }

const char *dpdk_sys_port_devargs(uint16_t port_id) {
    struct rte_eth_dev_info info;
    if (rte_eth_dev_info_get(port_id, &info) != 0 || info.device == NULL)
        return NULL;
    const struct rte_devargs *da = rte_dev_devargs(info.device);
    return da == NULL ? NULL : da->args;
}

unsigned int dpdk_sys_lcore_cpuset(unsigned int lcore_id, uint64_t *words, unsigned int n) {
    rte_cpuset_t set = rte_lcore_cpuset(lcore_id);
    for (unsigned int i = 0; i < n; i++)
        words[i] = 0;
    for (unsigned int cpu = 0; cpu < CPU_SETSIZE && cpu / 64 < n; cpu++)
        if (CPU_ISSET(cpu, &set))
            words[cpu / 64] |= (uint64_t)1 << (cpu % 64);
    return CPU_SETSIZE / 64;
}
