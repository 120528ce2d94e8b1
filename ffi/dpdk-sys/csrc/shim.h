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

/* A packet-mbuf pool whose objects lie back to back in one piece of virtual memory, object i
 * at (first object) + i * (its whole size): what DPDK 22.11's net_af_xdp assumes when it maps a
 * pool as its UMEM (populated_size * object size from the first chunk, `xdp_umem_configure`;
 * fixed upstream in 24.07). `rte_pktmbuf_pool_create` does not give that on 4 KiB pages
 * (`--no-huge`): an object may not cross a page there, so each 2,368-byte mbuf takes a page of
 * its own and the last ~40% of the pool lies past the UMEM. The pool is created with
 * RTE_MEMPOOL_F_NO_IOVA_CONTIG (objects may cross pages: fine for AF_XDP, which copies or maps
 * by virtual address, not for a PCI device's DMA in IOVA-as-PA mode) and refused with EFBIG in
 * rte_errno when it did not come in one chunk. Same arguments as rte_pktmbuf_pool_create. */
struct rte_mempool *dpdk_sys_pktmbuf_pool_create_packed(const char *name, unsigned int n,
                                                        unsigned int cache_size,
                                                        uint16_t priv_size, uint16_t data_room_size,
                                                        int socket_id);

#endif
