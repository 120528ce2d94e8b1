#!/usr/bin/env bash
# The README's first command: set up the machine, build barrier-demo (the test bed's program,
# barrier-testbed), and run a whole barrier tree in one process on DPDK net_ring ports (no NIC,
# no hugepages needed).
#
#   bash scripts/demo.sh                       # root + 2 intermediates + 8 leaves, 1 group, 3 s
#   bash scripts/demo.sh --groups 1000 --count 100
#   bash scripts/demo.sh --fanout 4 --duration 5 --counters
#
# Arguments are passed to `barrier-demo` (see `barrier-demo --help`). The demo
# busy-polls at most 2 cores by default (--lcores); DPDK needs root.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

if [ "$(id -u)" -ne 0 ]; then
  echo "demo.sh: DPDK needs root for its virtual devices; run as root (or use --io mem)" >&2
fi

exec cargo run --quiet --release -p barrier-testbed --bin barrier-demo -- "$@"
