/* The DPDK headers bindgen reads for dpdk-sys. Every item the Rust side uses must be reachable
 * from here and named in build.rs's allowlists; the generated static-inline wrappers include this
 * file by absolute path, so it must compile on its own with `pkg-config --cflags libdpdk`. */
#include <rte_config.h>
#include <rte_errno.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ether.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <rte_eth_ring.h>
#include <rte_bus_vdev.h>
#include <rte_telemetry.h>
#include <rte_pdump.h>

#include "shim.h"
