#!/usr/bin/env python3
"""The performance suite's report (perf/run.sh): reads the JSON results in a results folder,
writes report.md, the plots (gnuplot, SVG) and summary.md, and with --docs replaces the summary
table between the markers in docs/performance.md.

usage: perf/report.py RESULTS_DIR [--docs docs/performance.md]
"""
import json
import statistics
import os
import subprocess
import sys

BEGIN = "<!-- perf-summary:begin (perf/run.sh writes this table) -->"
END = "<!-- perf-summary:end -->"


def load(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    try:
        with open(p) as f:
            return json.load(f)
    except (ValueError, OSError):
        return None


def load_lines(d, name):
    """Concatenated JSON values (one per simulator run, each pretty-printed)."""
    p = os.path.join(d, name)
    out = []
    if os.path.exists(p):
        txt = open(p).read()
        dec = json.JSONDecoder()
        i = 0
        while True:
            while i < len(txt) and txt[i].isspace():
                i += 1
            if i >= len(txt):
                break
            try:
                v, i = dec.raw_decode(txt, i)
            except ValueError:
                sys.stderr.write("report.py: %s: unreadable JSON at %d\n" % (name, i))
                break
            out.append(v)
    return out


def m(x):
    return "%.2f M" % (x / 1e6) if x is not None else "n/a"


def us(ns):
    return "%.2f" % (ns / 1e3) if ns is not None else "n/a"


def usu(ns):
    return us(ns) + " µs"


def ratio(a, b):
    if a is None or b in (None, 0):
        return None
    return a / b


def fr(x, digits=3):
    return ("%." + str(digits) + "f") % x if x is not None else "n/a"


def verdict(ok, val):
    if "n/a" in str(val):
        return "not measured in this run"
    return "met" if ok else "not met"


def gnuplot(d, name, script):
    path = os.path.join(d, name + ".gp")
    with open(path, "w") as f:
        f.write(script)
    try:
        subprocess.run(["gnuplot", path], cwd=d, check=True, capture_output=True, timeout=60)
        return name + ".svg"
    except (OSError, subprocess.SubprocessError) as e:
        sys.stderr.write("report.py: gnuplot %s: %s\n" % (name, e))
        return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = os.path.abspath(sys.argv[1])
    docs = sys.argv[sys.argv.index("--docs") + 1] if "--docs" in sys.argv else None
    meta = load(d, "meta.json") or {}
    alone = load(d, "alone.json")
    tp = load(d, "testpmd.json")
    scale = load(d, "scale.json")
    tree = load(d, "tree.json")
    gen = {g: load(d, "gen-%d.json" % g) for g in (1, 1024)}
    mpi_shm = load(d, "mpi-shm.json")
    mpi_tcp = load(d, "mpi-tcp.json")
    mpich = load(d, "mpich.json")
    kern = load(d, "kernel.json")
    sim = load_lines(d, "sim.jsonl")

    def la(name):
        p = os.path.join(d, name)
        return open(p).read().split()[:3] if os.path.exists(p) else ["?"] * 3

    L = []
    w = L.append
    w("# netbarrier performance report")
    w("")
    w("%s run, %s UTC, commit %s, %s CPUs (%s), DPDK %s, %s." % (
        "quick" if meta.get("quick") else "full", meta.get("date", "?"), meta.get("commit", "?"),
        meta.get("cpus", "?"), meta.get("cpu", "?"), meta.get("dpdk", "?"),
        meta.get("openmpi", "Open MPI ?")))
    w("Load average (1, 5, 15 min) at start %s, at end %s: the machine is shared, so read the "
      "ratios (baseline and subject measured side by side in the same run), not the absolute "
      "figures." % (" ".join(la("loadavg-start.txt")), " ".join(la("loadavg-end.txt"))))
    w("")

    targets = []
    summary = []

    # 1. The switch alone.
    w("## 1. The switch alone against the floor")
    w("")
    sw_hot = bare_hot = None
    if alone:
        if alone.get("started_utc"):
            w("Measured from %s UTC." % alone["started_utc"])
        w("Fan-in %d, %d groups, %s; %s. Frames/s in (reduces received and fully processed), "
          "median of the repetitions." % (alone["fanin"], alone["groups"], alone["device"],
                                          alone["lcore"]))
        w("")
        w("| shape | bare rx_burst+free | full switch path | switch / bare |")
        w("| --- | --- | --- | --- |")
        for s in alone["shapes"]:
            w("| %s (%d frames a port per chunk, %d mbufs) | %sfps | %sfps | %s |" % (
                s["shape"], s["chunk_frames_per_port"], s["mbufs"], m(s["bare_fps"]),
                m(s["switch_fps"]), fr(s["ratio_switch_bare"])))
            if s["shape"] == "hot":
                sw_hot, bare_hot = s["switch_fps"], s["bare_fps"]
            summary.append(("switch alone, %s shape, fan-in %d" % (s["shape"], alone["fanin"]),
                            "bare rx_burst+free loop, same input",
                            "%sfps vs %sfps: **%s**" % (m(s["switch_fps"]), m(s["bare_fps"]),
                                                       fr(s["ratio_switch_bare"]))))
        w("")
    tpps = tp["pps_per_core"] if tp and tp.get("ok") else None
    if tp:
        w("dpdk-testpmd `--forward-mode=macswap`, 2 `net_ring` ports, one forwarding core, "
          "hot shape (`start tx_first`: one burst per port circulates): %spps per core (median of %d one-second samples)." % (
              m(tpps), len(tp.get("pps_per_core_samples", []))))
        if sw_hot is not None and tpps:
            w("Switch (hot) / testpmd macswap: **%s**." % fr(sw_hot / tpps, 4))
            summary.append(("switch alone, hot shape", "dpdk-testpmd macswap, 2 net_ring ports, 1 core",
                            "%sfps vs %spps: **%s**" % (m(sw_hot), m(tpps), fr(sw_hot / tpps, 4))))
        w("")
    r1 = ratio(sw_hot, tpps)
    # Issue 23's targets. The bare loop stays in the report as the floor (it does not read the
    # frames), not as a target.
    targets.append(("hot shape: full switch path per RX lcore >= 1.0x testpmd macswap",
                    r1 is not None and r1 >= 1.0, "%s" % fr(r1, 4)))

    # 2. Scale.
    w("## 2. Scale")
    w("")
    plot_groups = plot_fanin = None
    if scale:
        if scale.get("started_utc"):
            w("Measured from %s UTC; each sweep's cases interleaved, repetition by repetition, "
              "so a change of the machine's load touches them alike." % scale["started_utc"])
            w("")
        w("%s; %s. Every group runs barriers (a round sends each group's reduces in a new "
          "random order; `rounds` = full rounds completed in the switch measurements); each "
          "chunk is one 32-frame burst a port at every point (the same hot input throughout, "
          "so only the state varies). The "
          "smallest case is 32 groups, one RX burst of them: with fewer groups than a burst a "
          "prepared stream would put a group's next reduce in the same burst as the one "
          "before it, which no leaf can send (it waits for the release), so 32 groups is the "
          "hot-table baseline the issue calls the 1-group case." % (scale["io"], scale["lcore"]))
        w("")
        w("| groups | fan-in | bare | switch | switch / bare | switch / 32-group switch | rounds |")
        w("| --- | --- | --- | --- | --- | --- | --- |")
        bg = scale["by_groups"]
        base = bg[0]["switch_fps"] if bg else None
        with open(os.path.join(d, "groups.dat"), "w") as f:
            for r in bg:
                f.write("%d %f %f\n" % (r["groups"], r["switch_fps"] / 1e6, r["bare_fps"] / 1e6))
                w("| %s | %d | %sfps | %sfps | %s | %s | %d |" % (
                    format(r["groups"], ","), r["fanin"], m(r["bare_fps"]), m(r["switch_fps"]),
                    fr(r["ratio_switch_bare"]), fr(ratio(r["switch_fps"], base)), r["rounds"]))
        w("")
        big = [r for r in bg if r["groups"] == 1048576]
        rbig = ratio(big[0]["switch_fps"], base) if big and base else None
        rtp = ratio(big[0]["switch_fps"], tpps) if big and tpps else None
        targets.append(("cold shape, 1,048,576 live groups: >= 0.7x testpmd macswap",
                        rtp is not None and rtp >= 0.7, fr(rtp, 4)))
        if big:
            summary.append(("switch at 1,048,576 live groups", "the same at 32 groups (hot table)",
                            "%sfps vs %sfps: **%s**" % (m(big[0]["switch_fps"]), m(base), fr(rbig))))
        w("| fan-in | groups | bare | switch | switch / bare | switch / fan-in 2 |")
        w("| --- | --- | --- | --- | --- | --- |")
        bf = scale["by_fanin"]
        fbase = bf[0]["switch_fps"] if bf else None
        with open(os.path.join(d, "fanin.dat"), "w") as f:
            for r in bf:
                f.write("%d %f %f\n" % (r["fanin"], r["switch_fps"] / 1e6, r["bare_fps"] / 1e6))
                w("| %d | %d | %sfps | %sfps | %s | %s |" % (
                    r["fanin"], r["groups"], m(r["bare_fps"]), m(r["switch_fps"]),
                    fr(r["ratio_switch_bare"]), fr(ratio(r["switch_fps"], fbase))))
        w("")
        b = scale["bytes_per_group"]
        w("Bytes of state per group (from the structures): table slot %d + per-group counters %d "
          "= **%d** always; while a barrier is in flight also a timer-wheel entry (%d, "
          "intermediates) and a queued send (%d, while a frame waits for its port)." % (
              b["table_slot"], b["counters"], b["static_total"], b["timer_entry_in_flight"],
              b["pending_send_in_flight"]))
        if b.get("rss"):
            w("Measured: the process grew by %.1f bytes per group over %s groups (RSS before the "
              "table was built and after every group ran barriers)." % (
                  b["rss"]["rss_growth_per_group"], format(b["rss"]["groups"], ",")))
        w("")
        targets.append(("<= 64 bytes of state per group", b["static_total"] <= 64,
                        "%d bytes" % b["static_total"]))
        summary.append(("state per group", "target 64 bytes",
                        "%d bytes (slot %d + counters %d)" % (b["static_total"], b["table_slot"],
                                                               b["counters"])))
        plot_groups = gnuplot(d, "groups", """set terminal svg size 640,400
set output 'groups.svg'
set logscale x
set xlabel 'groups (all running barriers)'
set ylabel 'M frames/s in'
set title 'Throughput against groups (fan-in 2, one lcore)'
set key top right
plot 'groups.dat' u 1:2 w lp t 'switch', '' u 1:3 w lp t 'bare rx_burst+free'
""")
        plot_fanin = gnuplot(d, "fanin", """set terminal svg size 640,400
set output 'fanin.svg'
set logscale x 2
set xlabel 'fan-in (children per group)'
set ylabel 'M frames/s in'
set title 'Throughput against fan-in (1,024 groups, one lcore)'
plot 'fanin.dat' u 1:2 w lp t 'switch', '' u 1:3 w lp t 'bare rx_burst+free'
""")
        if plot_groups:
            w("![throughput against groups](%s)" % plot_groups)
        if plot_fanin:
            w("![throughput against fan-in](%s)" % plot_fanin)
        w("")

    # 3. Latency.
    w("## 3. Latency")
    w("")
    cdf_files = []
    if scale:
        sl = scale["switch_latency"]
        w("The switch's own latency, frame in to frame out (one barrier at a time, its reduces "
          "waiting in the RX queues when the clock starts, out = the TX flush of the release), "
          "%s samples: p50 %s µs, p99 %s µs, p99.9 %s µs, max %s µs (`switch-latency.hlog`)." % (
              format(sl["count"], ","), us(sl["p50_ns"]), us(sl["p99_ns"]), us(sl["p999_ns"]),
              us(sl["max_ns"])))
        w("")
        with open(os.path.join(d, "cdf-switch.dat"), "w") as f:
            for q, v in sl["cdf"]:
                f.write("%f %f\n" % (v / 1e3, q))
        cdf_files.append(("cdf-switch.dat", "switch in-out"))
    if tree:
        w("Barrier round latency (first reduce sent to last release received) in in-process "
          "trees (`tree-latency.hlog`):")
        w("")
        w("| tree (fan-out, root first) | levels | leaves | barriers | barriers/s | p50 µs | p99 µs | p99.9 µs | max µs |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for t in tree["trees"]:
            name = ",".join(str(x) for x in t["fanout"])
            w("| %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
                name, t["levels"], t["leaves"], format(t["count"], ","),
                "%.0f" % t["barriers_per_s"], us(t["p50_ns"]), us(t["p99_ns"]), us(t["p999_ns"]),
                us(t["max_ns"])))
            fn = "cdf-tree-%s.dat" % name.replace(",", "x")
            with open(os.path.join(d, fn), "w") as f:
                for q, v in t["cdf"]:
                    f.write("%f %f\n" % (v / 1e3, q))
            cdf_files.append((fn, "tree %s" % name))
            summary.append(("barrier round, in-process tree %s (%d level%s, %d leaves)" % (
                name, t["levels"], "" if t["levels"] == 1 else "s", t["leaves"]),
                            "-", "p50 %s µs, p99 %s µs, p99.9 %s µs" % (
                                us(t["p50_ns"]), us(t["p99_ns"]), us(t["p999_ns"]))))
        w("")
    for g, r in gen.items():
        if r:
            rep = r["report"]
            lb = rep["latency_barrier"]
            w("barrier-gen closed loop, in-process switch, %d ports, %d group(s): %.0f barriers/s, "
              "barrier latency p50 %s µs, p99 %s µs, p99.9 %s µs (`gen-%d.hlog`)." % (
                  len(r["config"]["ports"]), g, rep["barriers"]["per_s"], us(lb["p50_ns"]),
                  us(lb["p99_ns"]), us(lb["p99_9_ns"]), g))
    w("")
    if cdf_files:
        plot = "set terminal svg size 640,400\nset output 'latency-cdf.svg'\nset logscale x\n" \
               "set xlabel 'latency (µs)'\nset ylabel 'fraction'\nset key bottom right\n" \
               "set title 'Latency CDFs'\nplot " + ", ".join(
                   "'%s' u 1:2 w l t '%s'" % (fn, t) for fn, t in cdf_files) + "\n"
        p = gnuplot(d, "latency-cdf", plot)
        if p:
            w("![latency CDFs](%s)" % p)
            w("")

    # 4. MPI.
    w("## 4. What a user would pick instead (same machine, same run, same participants)")
    w("")
    rows = []
    if mpi_shm:
        rows.append(("Open MPI MPI_Barrier, shared memory (btl vader)", mpi_shm))
    if mpi_tcp:
        rows.append(("Open MPI MPI_Barrier, TCP loopback (btl tcp, lo)", mpi_tcp))
    if mpich and "absent" not in mpich:
        rows.append(("MPICH MPI_Barrier", mpich))
    if kern:
        rows.append(("netbarrier over kernel sockets (barrier-leaf AF_PACKET, switch on net_af_packet, namespaces)",
                     {"ranks": kern["leaves"], "iterations": kern["samples"] // max(kern["leaves"], 1),
                      "osu": {"avg_us": kern["avg_us"], "min_us": kern["min_us"], "max_us": kern["max_us"]},
                      "p50_us": kern["p50_us"], "p99_us": kern["p99_us"]}))
    tree4 = None
    if tree:
        for t in tree["trees"]:
            if t["fanout"] == [4]:
                tree4 = t
    g1 = gen.get(1)
    if g1:
        lb = g1["report"]["latency_barrier"]
        rows.append(("netbarrier in-network, DPDK (barrier-gen closed loop, in-process switch, net_ring)",
                     {"ranks": len(g1["config"]["ports"]), "iterations": lb["samples"],
                      "osu": {"avg_us": lb["mean_ns"] / 1e3, "min_us": lb["min_ns"] / 1e3,
                              "max_us": lb["max_ns"] / 1e3},
                      "p50_us": lb["p50_ns"] / 1e3, "p99_us": lb["p99_ns"] / 1e3}))
    if tree4:
        rows.append(("netbarrier in-network, DPDK (in-process tree, fan-out 4)",
                     {"ranks": tree4["leaves"], "iterations": tree4["count"],
                      "osu": {"avg_us": tree4["mean_ns"] / 1e3, "min_us": tree4["min_ns"] / 1e3,
                              "max_us": tree4["max_ns"] / 1e3},
                      "p50_us": tree4["p50_ns"] / 1e3, "p99_us": tree4["p99_ns"] / 1e3}))
    if rows:
        w("| barrier | participants | iterations | avg µs | p50 µs | p99 µs |")
        w("| --- | --- | --- | --- | --- | --- |")
        for name, r in rows:
            w("| %s | %d | %s | %.2f | %.2f | %.2f |" % (name, r["ranks"], format(r["iterations"], ","),
                                                     r["osu"]["avg_us"], r["p50_us"], r["p99_us"]))
        w("")
        w("The MPI rows time each `MPI_Barrier` call on every rank (perf/mpi/mpi_barrier.c); the "
          "netbarrier rows time each barrier at each leaf, first reduce sent to release "
          "received. `MPICH`: %s." % ((mpich or {}).get("absent", "measured")))
        w("")
        w("In the OSU `osu_barrier` layout (the average over iterations per rank; min and max over "
          "ranks; for the netbarrier rows min and max are over barriers):")
        w("")
        w("```text")
        for name, r in rows:
            w("# %s" % name)
            w("# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations")
            w("%16.2f %17.2f %17.2f %11d" % (r["osu"]["avg_us"], r["osu"]["min_us"],
                                             r["osu"]["max_us"], r["iterations"]))
        w("```")
        w("")
        w("In the IMB-MPI1 `Barrier` layout (MPI rows; plus p50 and p99):")
        w("")
        w("```text")
        for name, r in rows:
            if "imb" not in r:
                continue
            i = r["imb"]
            w("# %s, #processes = %d" % (name, r["ranks"]))
            w(" #repetitions  t_min[usec]  t_max[usec]  t_avg[usec]  p50[usec]  p99[usec]")
            w("%13d %12.2f %12.2f %12.2f %10.2f %10.2f" % (i["repetitions"], i["t_min_us"],
                                                           i["t_max_us"], i["t_avg_us"],
                                                           r["p50_us"], r["p99_us"]))
        w("```")
        w("")
    innet = None
    innet_name = ""
    if g1:
        innet = g1["report"]["latency_barrier"]["p50_ns"] / 1e3
        innet_name = "barrier-gen closed loop, %d ports" % len(g1["config"]["ports"])
    elif tree4:
        innet = tree4["p50_ns"] / 1e3
        innet_name = "in-process tree fan-out 4"
    rmpi = ratio(mpi_tcp["p50_us"], innet) if mpi_tcp and innet else None
    targets.append(("in-network barrier p50 >= 10x lower than Open MPI over TCP (%d participants)" % (
        mpi_tcp["ranks"] if mpi_tcp else 0), rmpi is not None and rmpi >= 10,
        "Open MPI TCP p50 / in-network p50 (%s) = %s" % (innet_name, fr(rmpi, 1))))
    if mpi_tcp and innet:
        summary.append(("barrier p50, in-network DPDK (%s)" % innet_name,
                        "Open MPI MPI_Barrier, %d ranks, TCP loopback / shared memory" % mpi_tcp["ranks"],
                        "%.2f µs vs %.2f / %.2f µs: **%sx / %sx lower**" % (
                            innet, mpi_tcp["p50_us"], mpi_shm["p50_us"] if mpi_shm else 0,
                            fr(rmpi, 1), fr(ratio(mpi_shm["p50_us"], innet) if mpi_shm else None, 1))))
    if kern and mpi_tcp:
        summary.append(("barrier p50, netbarrier over kernel sockets (AF_PACKET, %d leaves)" % kern["leaves"],
                        "Open MPI TCP loopback", "p50 %.2f µs vs %.2f µs: MPI / kernel-socket tree %s" % (
                            kern["p50_us"], mpi_tcp["p50_us"], fr(ratio(mpi_tcp["p50_us"], kern["p50_us"]), 2))))

    # 5. Microbenchmarks.
    micro = os.path.join(d, "micro.txt")
    if os.path.exists(micro) and os.path.getsize(micro) > 0:
        w("## 5. Microbenchmarks (perf/micro.rs, this run)")
        w("")
        w("`cargo bench -p barrier-switch --bench micro`: each per-frame step next to its "
          "baseline in the same process (perf/micro.md says what each baseline is).")
        w("")
        w("```text")
        w(open(micro).read().rstrip())
        w("```")
        w("")

    # 6. Simulator.
    w("## 6. Scale past this machine: the simulator")
    w("")
    if sim:
        hop = sim[0]["link"]["latency_ns"]
        w("`barrier-sim compare`: the real protocol code over modelled links, per-hop latency "
          "%d ns (the switch's frame-in to frame-out p50 from `scale.json` when the simulator "
          "ran, see section 3) for every hop, tree and dissemination alike; %d barriers per "
          "point." % (hop, sim[0]["barriers"]))
        w("")
        w("| leaves | tree | tree p50 µs | dissemination p50 µs | latency ratio (mean) | tree frames/barrier | dissemination frames/barrier |")
        w("| --- | --- | --- | --- | --- | --- | --- |")
        with open(os.path.join(d, "sim.dat"), "w") as f:
            for s in sim:
                t = s["in_network"]
                dd = s["dissemination"]
                f.write("%d %f %f %f %f\n" % (s["tree"]["leaves"], t["latency"]["p50_ns"] / 1e3,
                                              dd["latency"]["p50_ns"] / 1e3,
                                              t["link_frames_per_barrier"],
                                              dd["link_frames_per_barrier"]))
                w("| %s | %s | %s | %s | %s | %s | %s |" % (
                    format(s["tree"]["leaves"], ","), s["tree"]["spec"], us(t["latency"]["p50_ns"]),
                    us(dd["latency"]["p50_ns"]), fr(s["latency_ratio"], 1),
                    format(int(t["link_frames_per_barrier"]), ","),
                    format(int(dd["link_frames_per_barrier"]), ",")))
        w("")
        last = sim[-1]
        summary.append(("simulated barrier at %s leaves (per hop %d ns)" % (
            format(last["tree"]["leaves"], ","), hop), "dissemination barrier, same links",
            "%s µs vs %s µs; %s vs %s frames per barrier" % (
                us(last["in_network"]["latency"]["p50_ns"]), us(last["dissemination"]["latency"]["p50_ns"]),
                format(int(last["in_network"]["link_frames_per_barrier"]), ","),
                format(int(last["dissemination"]["link_frames_per_barrier"]), ","))))
        p = gnuplot(d, "sim", """set terminal svg size 640,400
set output 'sim.svg'
set logscale xy
set xlabel 'leaves'
set ylabel 'p50 latency (µs)'
set y2label 'link frames per barrier'
set y2tics
set logscale y2
set key top left
set title 'Simulated barrier: in-network tree vs dissemination'
plot 'sim.dat' u 1:2 w lp t 'tree latency', '' u 1:3 w lp t 'dissemination latency', \\
     '' u 1:4 axes x1y2 w lp dt 2 t 'tree frames', '' u 1:5 axes x1y2 w lp dt 2 t 'dissemination frames'
""")
        if p:
            w("![simulator scaling](%s)" % p)
            w("")

    two = load(d, os.path.join("twoproc", "result.json"))
    if two:
        w("## The generator against a switch process, quiet and loaded")
        w("")
        w(open(os.path.join(d, "twoproc", "summary.md")).read().split("\n", 2)[2].rstrip())
        w("")
        r = two["ratio_loaded_over_quiet"]["barriers_per_s"]
        summary.append(("barrier-gen vs a barrier-switch process (net_af_packet), busy loop per CPU",
                        "the same, quiet", "barriers/s **%s**" % fr(r)))

    # Issue 23: the switch's own latency at half its peak, from another process (step 1c).
    lat = load(d, "latency.json")
    rlat, rlat_note = None, None
    if lat and lat.get("absent"):
        w("Latency at half load (step 1c): %s." % lat["absent"])
        w("")
    elif lat:
        w("## Frame-in to frame-out latency at half of each system's peak")
        w("")
        w("`barrier-perf probe` on CPU 0, one `net_memif` port to the system under test on CPU 1: "
          "one reduce per group in flight (1,024 groups), the answer matched by group and "
          "sequence (testpmd macswap returns the reduce, the barrier-switch root its release); "
          "the peak phase sends as fast as answers return, the measured phase at half of that "
          "peak, paced. The peak is the lower of the system's and the probe's own. A measured "
          "phase that reached less than 0.9 of its pace was disturbed (on a shared machine, "
          "another process took the probe's or the system's CPU for milliseconds): its "
          "percentiles are the kernel scheduler's, and the target is not judged from them.")
        w("")
        w("The two systems alternate, %d times; the target is judged on the median of the "
          "undisturbed repetitions' p99 ratios." % len(lat["reps"]))
        w("")
        w("| rep | system | peak | measured at | of its pace | p50 | p99 | p99.9 | max | re-sent |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        r50s, r99s, disturbed = [], [], 0
        for i, rep in enumerate(lat["reps"], 1):
            for k in ("testpmd", "switch"):
                x = rep.get(k, {})
                if x.get("absent"):
                    w("| %d | %s | %s | | | | | | | |" % (i, k, x["absent"]))
                    continue
                l = x["latency"]
                w("| %d | %s | %sfps | %sfps | %s | %s | %s | %s | %s | %d |" % (
                    i, k, m(x["peak_fps"]), m(x["measured"]["answered_per_s"]),
                    fr(x["achieved_ratio"]), usu(l["p50_ns"]), usu(l["p99_ns"]),
                    usu(l["p999_ns"]), usu(l["max_ns"]), x["measured"]["resent"]))
            t, s_ = rep.get("testpmd", {}), rep.get("switch", {})
            if "latency" not in t or "latency" not in s_:
                continue
            if min(t["achieved_ratio"], s_["achieved_ratio"]) < 0.9:
                disturbed += 1
                continue
            r50s.append(ratio(s_["latency"]["p50_ns"], t["latency"]["p50_ns"]))
            r99s.append(ratio(s_["latency"]["p99_ns"], t["latency"]["p99_ns"]))
        w("")
        if r99s:
            rlat = statistics.median(r99s)
            w("Switch / testpmd, each undisturbed repetition: p50 %s, p99 %s; medians: p50 **%s**, "
              "p99 **%s**%s." % (", ".join(fr(x) for x in r50s), ", ".join(fr(x) for x in r99s),
                                 fr(statistics.median(r50s)), fr(rlat),
                                 "" if not disturbed else " (%d disturbed, left out)" % disturbed))
            summary.append(("switch frame-in to frame-out at half its peak, net_memif from another process",
                            "dpdk-testpmd macswap, same probe, alternated",
                            "median ratio p50 %s, p99 **%s** (%d repetitions)" % (
                                fr(statistics.median(r50s)), fr(rlat), len(r99s))))
        else:
            rlat_note = "n/a: no undisturbed repetition (%d disturbed)" % disturbed
            w("No undisturbed repetition: not judged.")
        w("")
    targets.append(("switch frame-in to frame-out p99 at half its peak <= 2x testpmd macswap's "
                    "on the same input", rlat is not None and rlat <= 2.0, rlat_note or fr(rlat)))

    # Issue 23: the generator's ceiling against testpmd txonly (step 1d).
    txo, gm = load(d, "txonly.json"), load(d, "genmax.json")
    rgen = None
    if txo and gm:
        w("## The generator's ceiling")
        w("")
        rgen = ratio(gm["tx_fps"], txo["pps"])
        w("`dpdk-testpmd --forward-mode=txonly`, 64 B into `net_null` (the device frees them), "
          "one forwarding core: %spps. barrier-gen on one lcore, closed loop, %d ports x %d groups "
          "against a reflector on the other lcore (net_ring pairs): %sfps sent, %s barriers/s, "
          "%d lost; it also receives and checks every release. Ratio **%s**." % (
              m(txo["pps"]), gm["ports"], gm["groups"], m(gm["tx_fps"]),
              m(gm["barriers_per_s"]), gm["lost"], fr(rgen)))
        w("")
        summary.append(("barrier-gen frames sent on one lcore (closed loop, reflector on the other)",
                        "dpdk-testpmd txonly 64 B, net_null, 1 core",
                        "%sfps vs %spps: **%s**" % (m(gm["tx_fps"]), m(txo["pps"]), fr(rgen))))
    targets.append(("barrier-gen on one TX lcore >= 1.0x testpmd txonly at 64 B",
                    rgen is not None and rgen >= 1.0, fr(rgen)))
    pmu = load(d, "pmu.json")
    if pmu and pmu.get("absent"):
        w("PMU: %s; no instructions or cycles per frame in this report." % pmu["absent"])
        w("")
    elif pmu and pmu.get("instructions_per_frame"):
        w("PMU, the switch's timed loops (both shapes, %s frames): **%.0f instructions and %.0f "
          "cycles per frame**." % (format(pmu["frames"], ","), pmu["instructions_per_frame"],
                                   pmu["cycles_per_frame"]))
        summary.append(("switch alone, instructions / cycles per frame", "(PMU)",
                        "%.0f / %.0f" % (pmu["instructions_per_frame"], pmu["cycles_per_frame"])))
        w("")

    # Issue 24: the XDP switch against an XDP reflector (step 3d).
    xd = load(d, "xdp.json")
    rx = None
    if xd:
        rx = xd["ratio"]
        w("## The XDP switch against an XDP reflector (issue 24)")
        w("")
        w("%s; %s; batch %d, %d groups (%s). Reflector %sfps (range %s-%s), switch %sfps "
          "(range %s-%s); switch / reflector, median of %d alternated repetitions: **%s** "
          "(range %s-%s). Switch completions per frame: %s. State per group %d bytes, slot %d "
          "bytes, counts %d bytes (%d MiB at 2^20 groups)." % (
              xd["device"], xd["load"], xd["batch_size"], xd["groups"], xd["switch_config"],
              m(xd["reflector_fps"]), m(xd["reflector_fps_range"][0]), m(xd["reflector_fps_range"][1]),
              m(xd["switch_fps"]), m(xd["switch_fps_range"][0]), m(xd["switch_fps_range"][1]),
              len(xd["reps"]), fr(rx), fr(xd["ratio_range"][0]), fr(xd["ratio_range"][1]),
              fr(xd["completions_per_frame"]), xd["state_bytes_per_group"],
              xd["slot_bytes_per_group"], xd.get("counts_bytes_per_group", 0),
              xd["map_bytes_at_2_20_groups"] >> 20))
        w("")
        summary.append(("XDP switch frames/s on one CPU (veth, live frames)", "XDP reflector, same bed",
                        "%sfps vs %sfps: **%s**" % (m(xd["switch_fps"]), m(xd["reflector_fps"]), fr(rx))))
        dp = xd.get("dpdk_af_packet") or {}
        if dp.get("fps"):
            w("barrier-switch (DPDK): %s; %s; %s. %sfps (range %s-%s, %d runs); "
              "barrier-switch / reflector: **%s** (the XDP switch's: %s). Not alternated with the "
              "reflector (the ratio is to the reflector's median above), and its load is a closed "
              "loop, not live frames." % (
                  dp["device"], dp["load"], dp["switch_config"], m(dp["fps"]),
                  m(dp["fps_range"][0]), m(dp["fps_range"][1]), len(dp["runs_fps"]),
                  fr(dp["ratio_to_reflector"]), fr(rx)))
            w("")
            summary.append(("barrier-switch on net_af_packet frames/s on one CPU (same veth bed, closed loop)",
                            "XDP reflector, same bed",
                            "%sfps vs %sfps: **%s**" % (m(dp["fps"]), m(xd["reflector_fps"]),
                                                       fr(dp["ratio_to_reflector"]))))
        elif dp:
            w("barrier-switch on net_af_packet on the same bed: not measured (%s)." %
              (dp.get("error") or dp.get("skipped")))
            w("")
    targets.append(("XDP switch frames/s per core >= 0.5x an XDP reflector on the same veth bed",
                    rx is not None and rx >= 0.5, fr(rx)))
    targets.append(("XDP switch: <= 16 bytes of state per group",
                    bool(xd) and xd["state_bytes_per_group"] <= 16,
                    "%d bytes" % xd["state_bytes_per_group"] if xd else "n/a"))
    targets.append(("XDP switch: a million groups in <= 16 MiB of map",
                    bool(xd) and xd["map_bytes_at_2_20_groups"] <= 16 << 20,
                    "%d MiB (slot %d bytes, counts %d)" % (xd["map_bytes_at_2_20_groups"] >> 20, xd["slot_bytes_per_group"], xd.get("counts_bytes_per_group", 0)) if xd else "n/a"))

    # Issue 24: a 2,2 tree of XDP switches against the same tree of DPDK switches (step 3e).
    xt = load(d, "xdptree.json")
    if xt:
        w("## A 2,2 tree of XDP switches against the same tree of DPDK switches (issue 24)")
        w("")
        w("`scripts/topo.sh --fanout 2,2`: three switches and four `barrier-leaf` processes in "
          "network namespaces on veth, the DPDK tree (barrier-switch on `net_af_packet`, idle "
          "policy chosen by topo.sh) and the XDP tree (`--xdp all`) alternated %d times; the "
          "round is the last leaf's arrival to the last leaf's release (check_records). Medians: "
          "DPDK p50 %.1f us, p99 %.1f us; XDP p50 %.1f us, p99 %.1f us; XDP / DPDK: p50 **%s**, "
          "p99 **%s**; early releases %d." % (
              len(xt["reps"]["xdp"]), xt["dpdk_p50_us"], xt["dpdk_p99_us"], xt["xdp_p50_us"],
              xt["xdp_p99_us"], fr(xt["xdp_p50_us"] / xt["dpdk_p50_us"]),
              fr(xt["xdp_p99_us"] / xt["dpdk_p99_us"]), xt["early_releases"]))
        w("")
        summary.append(("2,2 tree of XDP switches, barrier round p50 / p99 (veth, real leaves)",
                        "the same tree of DPDK switches on net_af_packet",
                        "%.0f / %.0f us vs %.0f / %.0f us: **%s** / **%s**" % (
                            xt["xdp_p50_us"], xt["xdp_p99_us"], xt["dpdk_p50_us"], xt["dpdk_p99_us"],
                            fr(xt["xdp_p50_us"] / xt["dpdk_p50_us"]),
                            fr(xt["xdp_p99_us"] / xt["dpdk_p99_us"]))))

    # Issue 25: links shared with ordinary traffic (step 3f, perf/shared_link.sh).
    sl = load(d, "shared_link.json")
    if sl:
        md = sl["modes"]
        br = md.get("bridge", {}).get("tcp_mbps")
        w("## Links shared with ordinary traffic (issue 25)")
        w("")
        w("Two host namespaces exchange TCP (`iperf3`, offloads off) through a plain Linux bridge "
          "(the baseline), through barrier-switch's AF_XDP ports (the ports bridged by the kernel) "
          "and through its TAP exception path (`net_af_packet` ports, the TAP interfaces "
          "bridged); with a switch, `barrier-leaf` in both hosts runs barriers of group 7 quiet "
          "and while `iperf3` runs. Medians of %d sitting(s):" % (
              len([r for r in sl["rows"] if r[1] == "bridge"])))
        w("")
        w("| mode | TCP Mbit/s | TCP / bridge | barrier p50 / p99 quiet (us) | under TCP (us) | p99 under TCP / quiet |")
        w("| --- | --- | --- | --- | --- | --- |")
        for mode in ("bridge", "af_xdp", "tap"):
            x = md.get(mode) or {}
            t = x.get("tcp_mbps")
            q50, q99, l50, l99 = (x.get(k) for k in ("quiet_p50_us", "quiet_p99_us", "loaded_p50_us", "loaded_p99_us"))
            w("| %s | %s | %s | %s | %s | %s |" % (
                mode, "%.0f" % t if t else "n/a", fr(t / br) if t and br else "n/a",
                "%.0f / %.0f" % (q50, q99) if q50 else "-", "%.0f / %.0f" % (l50, l99) if l50 else "-",
                fr(l99 / q99) if l99 and q99 else "-"))
            if mode != "bridge" and t and br:
                summary.append(("TCP through the switch's %s ports (iperf3, veth)" % mode,
                                "a plain Linux bridge, same bed", "%.0f vs %.0f Mbit/s: **%s**" % (t, br, fr(t / br))))
            if mode != "bridge" and l99 and q99:
                summary.append(("barrier round p50 / p99 under TCP, %s ports" % mode, "the same, quiet",
                                "%.0f / %.0f us vs %.0f / %.0f us" % (l50, l99, q50, q99)))
        w("")

    # Issue 25: the switch on AF_XDP ports against net_af_packet ports (step 3f).
    pk = {k: load(d, os.path.join("ports-" + k, "result.json")) for k in ("af_packet", "af_xdp")}
    if pk["af_packet"] and pk["af_xdp"]:
        w("## barrier-switch on AF_XDP ports against net_af_packet ports (issue 25)")
        w("")
        w("`perf/gen_two_process.sh --switch-ports KIND`: barrier-gen (net_af_packet, closed loop, "
          "%d groups) against a barrier-switch process on the same veth bed, quiet and beside a "
          "busy loop per CPU." % pk["af_xdp"]["groups"])
        w("")
        w("| phase | af_packet barriers/s | af_xdp barriers/s | af_xdp / af_packet | leaf p50 af_packet / af_xdp | leaf p99 af_packet / af_xdp |")
        w("| --- | --- | --- | --- | --- | --- |")
        for ph in ("quiet", "loaded"):
            a, x = pk["af_packet"]["phases"][ph], pk["af_xdp"]["phases"][ph]
            w("| %s | %.0f | %.0f | %s | %s / %s | %s / %s |" % (
                ph, a["barriers_per_s"], x["barriers_per_s"],
                fr(x["barriers_per_s"] / a["barriers_per_s"]) if a["barriers_per_s"] else "n/a",
                usu(a["leaf_p50_ns"]), usu(x["leaf_p50_ns"]), usu(a["leaf_p99_ns"]), usu(x["leaf_p99_ns"])))
        w("")
        a, x = pk["af_packet"]["phases"]["quiet"], pk["af_xdp"]["phases"]["quiet"]
        if a["barriers_per_s"]:
            summary.append(("barrier-switch barriers/s on AF_XDP ports (veth, barrier-gen)",
                            "the same on net_af_packet ports",
                            "%.0f vs %.0f/s: **%s**; leaf p99 %s vs %s" % (
                                x["barriers_per_s"], a["barriers_per_s"],
                                fr(x["barriers_per_s"] / a["barriers_per_s"]),
                                usu(x["leaf_p99_ns"]), usu(a["leaf_p99_ns"]))))

    # Targets.
    w("## Targets")
    w("")
    for name, ok, val in targets:
        w("- %s: **%s** (%s)" % (name, verdict(ok, val), val))
    w("")
    prof = os.path.join(d, "profile.txt")
    if os.path.exists(prof) and os.path.getsize(prof) > 0:
        w("## Where the time goes (switch alone, `perf record`, self time per symbol)")
        w("")
        w("```text")
        w(open(prof).read().rstrip())
        w("```")
        w("")
    w("Files: `*.json` raw results, `*.hlog` hdrhistogram logs (HistogramLogProcessor reads "
      "them), `*.svg` plots, `*.log` each step's output.")

    with open(os.path.join(d, "report.md"), "w") as f:
        f.write("\n".join(L) + "\n")

    # The summary table for docs/performance.md.
    S = [BEGIN,
         "",
         "Last `perf/run.sh%s` (%s UTC, commit %s; load average %s at start, %s at end; the "
         "full report: `perf/results/<timestamp>/report.md`):" % (
             " --quick" if meta.get("quick") else "", meta.get("date", "?"), meta.get("commit", "?"),
             " ".join(la("loadavg-start.txt")), " ".join(la("loadavg-end.txt"))),
         "",
         "| measurement | baseline (same run) | result |",
         "| --- | --- | --- |"]
    for a, b, c in summary:
        S.append("| %s | %s | %s |" % (a, b, c))
    S.append("")
    S.append("Targets (issue 23; the state and MPI targets of issue 13):")
    S.append("")
    for name, ok, val in targets:
        S.append("- %s: **%s** (%s)" % (name, verdict(ok, val), val))
    S.append("")
    S.append(END)
    block = "\n".join(S)
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write(block + "\n")
    if docs:
        txt = open(docs).read()
        if BEGIN in txt and END in txt:
            a = txt.index(BEGIN)
            b = txt.index(END) + len(END)
            txt = txt[:a] + block + txt[b:]
        else:
            sys.stderr.write("report.py: no summary markers in %s: the table is appended\n" % docs)
            txt = txt.rstrip("\n") + "\n\n## Summary of the last suite run\n\n" + block + "\n"
        with open(docs, "w") as f:
            f.write(txt)
    print("\n".join("%s: %s (%s)" % (n, verdict(ok, v).upper(), v) for n, ok, v in targets))


if __name__ == "__main__":
    main()
