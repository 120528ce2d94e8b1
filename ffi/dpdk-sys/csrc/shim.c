/* See shim.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* cpu_set_t, hence rte_cpuset_t and rte_lcore_cpuset */
#endif
#include <sched.h>
#include <rte_lcore.h>
#include <errno.h>
#include <rte_errno.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
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

struct rte_mempool *dpdk_sys_pktmbuf_pool_create_packed(const char *name, unsigned int n,
                                                        unsigned int cache_size,
                                                        uint16_t priv_size, uint16_t data_room_size,
                                                        int socket_id) {
    struct rte_pktmbuf_pool_private priv = {
        .mbuf_data_room_size = data_room_size,
        .mbuf_priv_size = priv_size,
        .flags = 0,
    };
    unsigned int elt_size = sizeof(struct rte_mbuf) + (unsigned int)priv_size + data_room_size;
    struct rte_mempool *mp =
        rte_mempool_create_empty(name, n, elt_size, cache_size, sizeof(priv), socket_id,
                                 RTE_MEMPOOL_F_NO_IOVA_CONTIG);
    if (mp == NULL)
        return NULL;
    if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL) != 0)
        goto fail_einval;
    rte_pktmbuf_pool_init(mp, &priv);
    int ret = rte_mempool_populate_default(mp);
    if (ret < 0) {
        rte_mempool_free(mp);
        rte_errno = -ret;
        return NULL;
    }
    if (mp->nb_mem_chunks != 1) {
        rte_mempool_free(mp);
        rte_errno = EFBIG;
        return NULL;
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
    return mp;
fail_einval:
    rte_mempool_free(mp);
    rte_errno = EINVAL;
    return NULL;
}
