#!/usr/bin/env bash
# scripts/systemd/barrier-switch@.service under a real systemd: a systemd booted as PID 1 of new
# PID, mount and network namespaces (no container runtime needed), with /etc and /var as
# overlays (what it writes there stays in the test's folder), /run and /tmp private tmpfs, and a
# minimal default target, so that it starts nothing but what the test asks for.
#
# - `systemctl start barrier-switch@t` returns only once the switch is ready (Type=notify:
#   READY=1 comes with the ready line), and the unit is active (running);
# - RuntimeDirectory made /run/netbarrier (mode 0755) and the control socket is in it;
# - killed (SIGKILL), it is started again (Restart=on-failure);
# - `systemctl stop` stops it cleanly (SIGTERM, exit 0) and /run/netbarrier stays
#   (RuntimeDirectoryPreserve=yes, other instances' sockets);
# - a refused configuration (exit 2) fails the unit and is not restarted
#   (RestartPreventExitStatus=2); a missing /etc/netbarrier/NAME.toml fails the start at once.
#
# - scripts/systemd/barrier-xdp@.service the same way for the XDP switch on a veth pair of the
#   namespace: start returns once it is ready, SIGKILL restarts it (the BPF link went with the
#   killed process, so the new one attaches), stop exits 0 and leaves no program on the
#   interfaces.
#
# - as shipped, output to the journal (journald started for it): the records without a time of
#   their own (the journal stamps them) and without colour.
#
# The one change to the shipped unit is a drop-in that sets DefaultDependencies=no (the unit
# would otherwise pull sysinit.target: udev, sysctl, every service the machine enables), and
# for the instances but `j` one that sends the switch's stdout/stderr to files.
#
# Needs root, util-linux's unshare and nsenter, systemd installed (/lib/systemd/systemd; it
# need not be running) and a build of barrier-switch (target/release or target/debug, or
# NB_BUILD_DIR); says "skipped" otherwise.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
ok=0 bad=0
pass() { ok=$((ok + 1)); echo "  ok: $1"; }
fail() { bad=$((bad + 1)); echo "  FAILED: $1"; }
# Skipped only outside CI: with NB_REQUIRE_BINARIES=1 (scripts/test.sh) a missing piece fails.
skip() {
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then
    echo "systemd_unit: FAIL $1"; echo "systemd_unit: 0 passed, 1 failed"; exit 1
  fi
  echo "systemd_unit: skipped: $1"; exit 0
}

[ "$(id -u)" -eq 0 ] || skip "needs root"
systemd=/lib/systemd/systemd
[ -x "$systemd" ] || skip "systemd is not installed ($systemd)"
command -v unshare >/dev/null && command -v nsenter >/dev/null || skip "needs unshare and nsenter"
build=${NB_BUILD_DIR:-}
if [ -z "$build" ]; then
  t=${CARGO_TARGET_DIR:-$repo/target}
  for d in "$t/release" "$t/debug"; do
    [ -x "$d/barrier-switch" ] || continue
    if [ -z "$build" ] || [ "$d/barrier-switch" -nt "$build/barrier-switch" ]; then build=$d; fi
  done
fi
[ -n "$build" ] && [ -x "$build/barrier-switch" ] || skip "build barrier-switch first"
[ -x "$build/barrier-xdp" ] || skip "build barrier-xdp first ($build)"
build=$(cd "$build" && pwd)
echo "systemd_unit: barrier-switch from $build, $("$systemd" --version | head -n1)"

mkdir -p "$repo/target"
state=$(mktemp -d "$repo/target/nb-systemd-test.XXXXXX")
upid=
# The namespaced systemd makes its cgroups in the machine's hierarchies (they are not
# namespaced here); the ones it made are removed, deepest first, once its processes are gone.
hier=$(for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
  [ -f "$h/cgroup.procs" ] && echo "$h"; done | head -n2)
cgroups() { [ -z "$hier" ] || find $hier -mindepth 1 -type d 2>/dev/null | sort; }
cgroups > "$state.cg" 2>/dev/null
cleanup() {
  if [ -n "$upid" ]; then kill "$upid" 2>/dev/null; wait "$upid" 2>/dev/null; fi
  # the namespace's processes take a moment to be reaped: retry for up to 5 s
  local left
  for _ in $(seq 50); do
    left=$(cgroups | comm -13 "$state.cg" - | awk '{ print length, $0 }' | sort -rn \
      | cut -d' ' -f2- | while IFS= read -r d; do rmdir "$d" 2>/dev/null || echo "$d"; done)
    [ -n "$left" ] || break
    sleep 0.1
  done
  [ -z "$left" ] || echo "systemd_unit: cgroups left: $left"
  rm -rf "$state" "$state.cg"
}
trap cleanup EXIT
mkdir -p "$state/etc" "$state/etc.work" "$state/var" "$state/var.work" "$state/in"

# Inside the namespace the build folder is bound at /run/nbbin (it may lie under /tmp, which the
# namespace hides; a CI checkout often does).
for unit in barrier-switch@.service barrier-xdp@.service; do
  sed -e "s|@BINDIR@|/run/nbbin|g" "$repo/scripts/systemd/$unit" > "$state/in/$unit"
done
cat > "$state/in/test.conf" <<'EOF'
[Unit]
DefaultDependencies=no
EOF
cat > "$state/in/files.conf" <<'EOF'
[Service]
StandardOutput=append:/run/nbtest/%i.out
StandardError=append:/run/nbtest/%i.err
EOF
cat > "$state/in/nb-test.target" <<'EOF'
[Unit]
Description=barrier-switch unit test: nothing else
DefaultDependencies=no
EOF
cat > "$state/in/t.toml" <<'EOF'
[eal]
args = ["--no-huge", "-m", "256", "--no-shconf", "--file-prefix", "nb-systemd-t", "--no-pci",
        "--iova-mode=va", "--no-telemetry", "-l", "0,1"]

[[ports]]
name = "a"
vdev = "net_ring0"

[[ports]]
name = "b"
vdev = "net_ring1"

[lcores]
scheduler = 1
rx = [ { lcore = 0, poll = ["a", "b"] } ]
idle = "sleep"

[[groups]]
number = 5
role = "root"
children = ["a", "b"]

[control]
socket = "/run/netbarrier/t.sock"
EOF
printf 'this is not toml [\n' > "$state/in/bad.toml"
cat > "$state/in/x.toml" <<'EOF'
[[ports]]
name = "a"
iface = "nbx0"

[[ports]]
name = "b"
iface = "nbx1"

[[groups]]
number = 5
role = "root"
children = ["a", "b"]

[control]
socket = "/run/netbarrier/x.sock"
EOF

cat > "$state/boot.sh" <<'EOF'
set -e
state=$1 systemd=$2 build=$3
for d in etc var; do
  mount -t overlay nbsystemd -o "lowerdir=/$d,upperdir=$state/$d,workdir=$state/$d.work" "/$d"
done
mount -t tmpfs tmpfs /run
# the test's files and the build stay reachable once /tmp is hidden (either may be under it)
mkdir -p /run/nbstate /run/nbbin
mount --bind "$state" /run/nbstate
mount --bind "$build" /run/nbbin
state=/run/nbstate
mount -t tmpfs tmpfs /tmp
mkdir -p /run/lock /run/nbtest /run/systemd/system/barrier-switch@.service.d \
  /run/systemd/system/barrier-xdp@.service.d /run/systemd/system/barrier-xdp@x.service.d /etc/netbarrier
cp "$state/in/barrier-switch@.service" "$state/in/barrier-xdp@.service" "$state/in/nb-test.target" /run/systemd/system/
cp "$state/in/test.conf" /run/systemd/system/barrier-switch@.service.d/
cp "$state/in/test.conf" /run/systemd/system/barrier-xdp@.service.d/
for i in t bad none; do
  mkdir -p "/run/systemd/system/barrier-switch@$i.service.d"
  cp "$state/in/files.conf" "/run/systemd/system/barrier-switch@$i.service.d/"
done
cp "$state/in/files.conf" /run/systemd/system/barrier-xdp@x.service.d/
cp "$state/in/t.toml" "$state/in/bad.toml" "$state/in/x.toml" /etc/netbarrier/
cp "$state/in/t.toml" /etc/netbarrier/j.toml
export container=other
exec "$systemd" --system --unit=nb-test.target --log-target=null
EOF

timeout -k 5 300 unshare --pid --fork --kill-child --mount --net --propagation private \
  --mount-proc bash "$state/boot.sh" "$state" "$systemd" "$build" > "$state/boot.log" 2>&1 &
upid=$!
sp=
for _ in $(seq 100); do
  # timeout -> unshare -> systemd (boot.sh exec'd it)
  uns=$(pgrep -P "$upid" -x unshare || true)
  sp=
  [ -z "$uns" ] || sp=$(pgrep -P "$uns" -x systemd || true)
  if [ -n "$sp" ] && nsenter -t "$sp" -m -p systemctl is-system-running >/dev/null 2>&1; then break; fi
  sleep 0.1
done
ns() { nsenter -t "$sp" -m -p -n "$@"; }
state_of() { ns systemctl show -p "$2" --value "barrier-switch@$1.service"; }
if [ -z "$sp" ] || ! ns systemctl is-system-running >/dev/null 2>&1; then
  fail "systemd did not come up: $(ns systemctl is-system-running 2>&1) $(cat "$state/boot.log")"
  echo "systemd_unit: $ok passed, $bad failed"
  exit 1
fi
pass "systemd up as PID 1 of its namespaces ($(ns systemctl is-system-running))"

if ns timeout 90 systemctl start barrier-switch@t; then
  # Type=notify: start returned on READY=1, which is sent after the ready line
  if ns grep -q '^barrier-switch: ready' /run/nbtest/t.err; then
    pass "systemctl start returned once the switch was ready"
  else
    fail "start returned before the ready line: $(ns cat /run/nbtest/t.err)"
  fi
else
  fail "systemctl start barrier-switch@t: $(ns systemctl status barrier-switch@t 2>&1; ns cat /run/nbtest/t.err)"
fi
[ "$(state_of t ActiveState)/$(state_of t SubState)" = active/running ] \
  && pass "active (running)" || fail "state: $(state_of t ActiveState)/$(state_of t SubState)"
mode=$(ns stat -c %a /run/netbarrier 2>/dev/null)
[ "$mode" = 755 ] && pass "RuntimeDirectory /run/netbarrier, mode 0755" || fail "/run/netbarrier: mode '$mode'"
ns test -S /run/netbarrier/t.sock && pass "control socket /run/netbarrier/t.sock" \
  || fail "no control socket: $(ns ls -la /run/netbarrier)"
if [ -x "$build/barrierctl" ]; then
  out=$(ns /run/nbbin/barrierctl --socket /run/netbarrier/t.sock groups 2>&1)
  [ $? -eq 0 ] && pass "barrierctl reaches it" || fail "barrierctl: $out"
fi
if ns grep -q $'\x1b' /run/nbtest/t.err; then fail "colour codes in the log file"; else pass "no colour in the log file"; fi

pid=$(state_of t MainPID)
ns systemctl kill -s KILL barrier-switch@t
restarted=0
for _ in $(seq 150); do
  if [ "$(state_of t NRestarts)" = 1 ] && [ "$(state_of t ActiveState)" = active ] \
    && [ "$(state_of t MainPID)" != "$pid" ]; then restarted=1; break; fi
  sleep 0.1
done
[ "$restarted" = 1 ] && pass "killed: started again (Restart=on-failure)" \
  || fail "not restarted: NRestarts=$(state_of t NRestarts) $(state_of t ActiveState)/$(state_of t SubState)"
for _ in $(seq 100); do [ "$(state_of t SubState)" = running ] && break; sleep 0.1; done

ns timeout 90 systemctl stop barrier-switch@t
[ "$(state_of t ActiveState)" = inactive ] && [ "$(state_of t Result)" = success ] \
  && [ "$(state_of t ExecMainStatus)" = 0 ] \
  && pass "systemctl stop: SIGTERM, exit 0" \
  || fail "stop: $(state_of t ActiveState) result $(state_of t Result) status $(state_of t ExecMainStatus)"
ns test -d /run/netbarrier && ! ns test -e /run/netbarrier/t.sock \
  && pass "/run/netbarrier kept, the socket removed" || fail "after stop: $(ns ls -la /run/netbarrier 2>&1)"

ns timeout 30 systemctl start barrier-switch@bad 2>/dev/null && fail "a refused file started"
sleep 3
[ "$(state_of bad ExecMainStatus)" = 2 ] && [ "$(state_of bad NRestarts)" = 0 ] \
  && [ "$(state_of bad ActiveState)" = failed ] \
  && pass "refused file: exit 2, failed, not restarted" \
  || fail "bad: status $(state_of bad ExecMainStatus) restarts $(state_of bad NRestarts) $(state_of bad ActiveState)"
ns timeout 30 systemctl start barrier-switch@none 2>/dev/null && fail "a missing file started"
[ "$(state_of none AssertResult)" = no ] && [ "$(state_of none ActiveState)" != active ] \
  && [ "$(state_of none NRestarts)" = 0 ] \
  && pass "missing /etc/netbarrier/none.toml: the start fails at once (assertion)" \
  || fail "none: assert $(state_of none AssertResult) $(state_of none ActiveState) restarts $(state_of none NRestarts)"

# The XDP switch's unit, on a veth pair of the namespace.
xstate() { ns systemctl show -p "$1" --value barrier-xdp@x.service; }
xdp_on() { ns ip -d link show nbx0 | grep -c 'prog/xdp'; }
ns ip link add nbx0 type veth peer name nbx1 && ns ip link set nbx0 up && ns ip link set nbx1 up
if ns timeout 60 systemctl start barrier-xdp@x; then
  ns grep -q '^barrier-xdp: ready' /run/nbtest/x.err \
    && [ "$(xstate ActiveState)/$(xstate SubState)" = active/running ] && [ "$(xdp_on)" = 1 ] \
    && pass "barrier-xdp@x: start returned once it was ready, active (running), the program on nbx0" \
    || fail "barrier-xdp@x: $(xstate ActiveState)/$(xstate SubState), xdp $(xdp_on): $(ns cat /run/nbtest/x.err)"
else
  fail "systemctl start barrier-xdp@x: $(ns systemctl status barrier-xdp@x 2>&1; ns cat /run/nbtest/x.err)"
fi
xpid=$(xstate MainPID)
ns systemctl kill -s KILL barrier-xdp@x
restarted=0
for _ in $(seq 150); do
  if [ "$(xstate NRestarts)" = 1 ] && [ "$(xstate SubState)" = running ] \
    && [ "$(xstate MainPID)" != "$xpid" ] && [ "$(xdp_on)" = 1 ]; then restarted=1; break; fi
  sleep 0.1
done
[ "$restarted" = 1 ] && pass "barrier-xdp@x killed: started again, attached again" \
  || fail "barrier-xdp@x not restarted: NRestarts=$(xstate NRestarts) $(xstate SubState) xdp $(xdp_on): $(ns tail -5 /run/nbtest/x.err)"
ns timeout 60 systemctl stop barrier-xdp@x
[ "$(xstate ActiveState)" = inactive ] && [ "$(xstate Result)" = success ] \
  && [ "$(xstate ExecMainStatus)" = 0 ] && [ "$(xdp_on)" = 0 ] \
  && pass "barrier-xdp@x stop: exit 0, no program left on nbx0" \
  || fail "barrier-xdp@x stop: $(xstate ActiveState) result $(xstate Result) status $(xstate ExecMainStatus) xdp $(xdp_on)"

# The unit as shipped sends stdout and stderr to the journal: the records carry no time of
# their own there (the journal's JOURNAL_STREAM names stderr) and no colour.
if ns timeout 30 systemctl start systemd-journald.socket systemd-journald.service 2>/dev/null; then
  if ns timeout 90 systemctl start barrier-switch@j; then
    ns timeout 90 systemctl stop barrier-switch@j
    ns journalctl --sync 2>/dev/null
    log=$(ns journalctl -q -u barrier-switch@j -o cat --no-pager 2>&1)
    if grep -q '^barrier-switch: ready' <<< "$log" && grep -q '^ *INFO ' <<< "$log" \
      && ! grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' <<< "$log" && ! grep -q $'\x1b' <<< "$log"; then
      pass "journal: the records, without a time of their own, without colour"
    else
      fail "journal: $log"
    fi
  else
    fail "systemctl start barrier-switch@j (journal): $(ns systemctl status barrier-switch@j 2>&1)"
  fi
else
  echo "  (journald did not start here: the journal case is not checked)"
fi

echo "systemd_unit: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
