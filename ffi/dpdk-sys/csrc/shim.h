/* Hand-written C helpers for what bindgen cannot wrap: `rte_errno` is a thread-local macro, so a
 * function reads it on the calling thread. */
#ifndef DPDK_SYS_SHIM_H
#define DPDK_SYS_SHIM_H

/* The calling thread's rte_errno. */
int dpdk_sys_rte_errno(void);

/* Sets the calling thread's rte_errno (tests use it to check the getter reads the right slot). */
void dpdk_sys_set_rte_errno(int value);

#endif
