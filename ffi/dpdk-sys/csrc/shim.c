/* See shim.h. */
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
