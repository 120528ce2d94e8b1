#!/usr/bin/env bash
# Runs the documentation's walkthroughs as written, so that a doc step that stops working fails
# CI. A walkthrough is a fenced block whose info string is `sh walkthrough NAME`:
#
#   ```sh walkthrough switch-by-hand
#   ...commands...
#   ```
#
# The blocks of one NAME in one page are joined in page order (prose and other blocks may sit
# between them) and run as one bash script with `set -eo pipefail` and `set -x`, from the
# repository root, in a bed of its own (scripts/lib/bed.sh): new PID, mount and network
# namespaces, private /tmp, /run/netns, /run/dpdk and /run/netbarrier, a timeout
# (NB_WALKTHROUGH_TIMEOUT, default 180 s), and everything it started killed at its end. A
# walkthrough fails on a failing command, on the timeout, and on a DPDK runtime folder left in
# /run/dpdk.
#
# The programs come the way the install story says: `bash scripts/install.sh` to the default
# prefix /usr/local (in a bed of its own first, whose /usr/local and /etc, with ldconfig's cache,
# every walkthrough's bed then sees), from an existing build (nb_build_dir: target/release or
# target/debug, or NB_BUILD_DIR) instead of building release again.
#
# usage: doc_walkthroughs.sh [PAGE:NAME ...]   (default: every walkthrough of the pages below)
# NB_WALKTHROUGH_LOGS=DIR keeps each walkthrough's output (its commands traced) in DIR.
# Needs root and a build; without a build it says "skipped", and fails when
# NB_REQUIRE_BINARIES=1.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=../lib/bed.sh
source "$here/../lib/bed.sh"
pages=(docs/operations.md docs/leaf.md)
timeout=${NB_WALKTHROUGH_TIMEOUT:-180}

if [ "$(id -u)" -ne 0 ]; then echo "doc_walkthroughs: skipped: needs root"; exit 0; fi
build=$(nb_build_dir)
if [ -z "$build" ]; then
  if [ "${NB_REQUIRE_BINARIES:-0}" = 1 ]; then
    echo "doc_walkthroughs: FAILED: nothing built"; exit 1
  fi
  echo "doc_walkthroughs: skipped: build the workspace first"; exit 0
fi
mkdir -p "$repo/target"
work=$(mktemp -d "$repo/target/nb-walkthroughs.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Extract: one script per PAGE:NAME, in $work/scripts/<page>--<name>.sh; a list in $work/list.
mkdir -p "$work/scripts"
for page in "${pages[@]}"; do
  awk -v page="$page" -v dir="$work/scripts" -v list="$work/list" '
    /^```/ && !inblock {
      if ($1 == "```sh" && $2 == "walkthrough" && $3 != "") {
        inblock = 1; name = $3
        base = page; gsub(/[^A-Za-z0-9]/, "_", base)
        file = dir "/" base "--" name ".sh"
        if (!(file in seen)) { seen[file] = 1; print page ":" name "\t" file >> list }
        printf "# --- %s line %d\n", page, NR >> file
        next
      }
      fence = 1; next
    }
    /^```/ && inblock { inblock = 0; next }
    /^```/ && fence { fence = 0; next }
    inblock { print >> file }
  ' "$repo/$page"
done
[ -s "$work/list" ] || { echo "doc_walkthroughs: FAILED: no walkthrough found"; exit 1; }
for page in "${pages[@]}"; do
  grep -q "^$page:" "$work/list" || { echo "doc_walkthroughs: FAILED: $page has none"; exit 1; }
done

echo "doc_walkthroughs: installing from $build (bash scripts/install.sh, prefix /usr/local, in a bed)"
cat > "$work/install.sh" <<'EOF'
bash scripts/install.sh --build-dir "$1"
EOF
if ! nb_bed_run "$work/base" "" 300 "$work/install.sh" "$build" > "$work/install.log" 2>&1; then
  cat "$work/install.log"
  echo "doc_walkthroughs: FAILED: install"; exit 1
fi

ok=0 bad=0 n=0
while IFS=$'\t' read -r id file; do
  if [ $# -gt 0 ]; then
    want=0
    for a in "$@"; do [ "$a" = "$id" ] && want=1; done
    [ "$want" = 1 ] || continue
  fi
  n=$((n + 1))
  { echo 'set -eo pipefail'; echo 'set -x'; cat "$file"; } > "$file.run"
  start=$(date +%s)
  nb_bed_run "$work/bed-$n" "$work/base" "$timeout" "$file.run" > "$file.log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ]; then
    ok=$((ok + 1)); echo "  ok: $id (${took} s)"
  else
    bad=$((bad + 1))
    case $rc in 124|137) why="timeout after ${timeout} s" ;; 3) why="DPDK runtime folder left" ;; *) why="exit $rc" ;; esac
    echo "  FAILED: $id ($why, ${took} s); the end of its log:"
    tail -n 40 "$file.log" | sed 's/^/    | /'
  fi
  if [ -n "${NB_WALKTHROUGH_LOGS:-}" ]; then
    mkdir -p "$NB_WALKTHROUGH_LOGS" && cp "$file.log" "$NB_WALKTHROUGH_LOGS/$(basename "$file" .sh).log"
  fi
  rm -rf "$work/bed-$n"
done < "$work/list"
[ "$n" -gt 0 ] || { echo "doc_walkthroughs: FAILED: no walkthrough matched $*"; exit 1; }
echo "doc_walkthroughs: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
