# Sourced by netbarrier's Slurm scripts: the site configuration and its checks.
# shellcheck shell=bash
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
NB_SLURM_CONF=${NETBARRIER_SLURM_CONF:-/etc/netbarrier/slurm.conf}

# A line on stderr (Slurm drops the controller scripts' output) and, with NB_LOG set in the site
# configuration, appended to that file with the time.
nb_say() {
  local line="netbarrier slurm ${NB_WHO:-script} (job ${SLURM_JOB_ID:-?}): $*"
  echo "$line" >&2
  [ -z "${NB_LOG:-}" ] || echo "$(date -u '+%Y-%m-%dT%H:%M:%SZ') $line" >> "$NB_LOG" 2>/dev/null || true
}

# nb_load KEY...: source the site configuration; every KEY named must be set.
nb_load() {
  if [ ! -r "$NB_SLURM_CONF" ]; then
    nb_say "cannot read the site configuration $NB_SLURM_CONF"
    return 1
  fi
  # shellcheck source=/dev/null
  source "$NB_SLURM_CONF" || { nb_say "$NB_SLURM_CONF: does not source"; return 1; }
  local k
  for k in "$@"; do
    if [ -z "${!k:-}" ]; then
      nb_say "$NB_SLURM_CONF: $k is not set"
      return 1
    fi
  done
}

# nb_node_ranks NODE: the node's HOST:IFACE entries, one per line, in SLURM_LOCALID order.
nb_node_ranks() {
  local e
  for e in $NB_NODES; do
    if [ "${e%%=*}" = "$1" ]; then
      tr ',' '\n' <<< "${e#*=}"
      return 0
    fi
  done
  return 1
}

# nb_wanted: true when the job's partition gets a group.
nb_wanted() {
  [ -z "${NB_PARTITIONS:-}" ] && return 0
  local p
  for p in $NB_PARTITIONS; do
    [ "$p" = "${SLURM_JOB_PARTITION:-}" ] && return 0
  done
  return 1
}
