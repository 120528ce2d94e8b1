/* Hand-written C helpers for what bindgen cannot wrap: `rte_errno` is a thread-local macro, so a
 * function reads it on the calling thread. */
#ifndef DPDK_SYS_SHIM_H
#define DPDK_SYS_SHIM_H

/* The calling thread's rte_errno. */
int dpdk_sys_rte_errno(void);

/* Sets the calling thread's rte_errno (tests use it to check the getter reads the right slot). */
void dpdk_sys_set_rte_errno(int value);

/* The device arguments the port was created with (`rx_pcap=in.pcap,tx_pcap=out.pcap` for
 * `--vdev net_pcap0,rx_pcap=...`), or NULL when the port is invalid or has none. The string
 * belongs to DPDK and lives as long as the device. (`struct rte_device` is internal in 22.11, so
 * its devargs are reached through `rte_dev_devargs`, whose `struct rte_devargs` bindgen keeps
 * out of the allowlist.) */
#include <stdint.h>
const char *dpdk_sys_port_devargs(uint16_t port_id);

/* The CPUs lcore `lcore_id` runs on (`rte_lcore_cpuset`, which rte_lcore.h declares only with
 * _GNU_SOURCE, so bindgen does not see it): CPU c is bit c % 64 of words[c / 64]; `n` words are
 * written (zeroed first; CPUs past them are left out). Returns the words a whole set takes
 * (CPU_SETSIZE / 64). `lcore_id` must be below RTE_MAX_LCORE. */
unsigned int dpdk_sys_lcore_cpuset(unsigned int lcore_id, uint64_t *words, unsigned int n);

#endif
