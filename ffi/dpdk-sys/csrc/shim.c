/* See shim.h. */
#include <rte_errno.h>
#include "shim.h"

int dpdk_sys_rte_errno(void) { return rte_errno; }

void dpdk_sys_set_rte_errno(int value) { rte_errno = value; }
