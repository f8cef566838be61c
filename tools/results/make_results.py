#!/usr/bin/env python3
"""Runs the report's simulator scenarios and writes docs/results.md (+ PNG plots in docs/results/).

Scenario N of the report is every scenarios/scenN_*.toml (N = 1..6), run with `mrc sim`. Scenario 6's
full-size files (scen6_scale.toml, scen6_collective.toml: 131,072 hosts, GBs of memory, minutes) run
only with --full-scale; otherwise the report keeps each one's table measured last time
(docs/results/<name>.json) and says so.
A scenario with no file, or whose inputs are missing (the htsim .cm matrices: tools/cm/gen_permutation.py writes them), is
skipped with a loud note in the report and on stderr. Usage: see tools/results/make_results.sh.
"""
import argparse
import glob
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time

TITLES = {
    1: "Scenario 1: permutation (MRC spraying vs single-path ECMP vs RoCEv2)",
    2: "Scenario 2: failed links",
    3: "Scenario 3: ring all-reduce",
    4: "Scenario 4: incast with a victim flow",
    5: "Scenario 5: failover mid-collective",
    6: "Scenario 6: scale (131,072 hosts, 8 planes, radix-512 two-tier Clos)",
}
FULL_SCALE = ("scen6_scale.toml", "scen6_collective.toml")


def shown_mrc(mrc):
    """The mrc binary as a report shows it: its path in the repository, else just `mrc` (a path
    outside the repository names a machine, which the docs must not)."""
    rel = os.path.relpath(mrc)
    return rel if not rel.startswith("..") else "mrc"


def loud(msg):
    print(f"make_results: *** {msg}", file=sys.stderr)


def prepare(toml_path, work, out_json):
    """A copy of the scenario whose relative .cm paths point at the original directory and whose
    [output] writes per-flow JSON into the work dir. Returns (path, missing input or None)."""
    base = os.path.dirname(os.path.abspath(toml_path))
    text = open(toml_path, encoding="utf-8").read()
    missing = None

    def absolutise(m):
        nonlocal missing
        p = m.group(2)
        full = p if os.path.isabs(p) else os.path.join(base, p)
        if not os.path.exists(full):
            missing = os.path.relpath(full)
        return f'{m.group(1)}"{full}"'

    text = re.sub(r'^(\s*cm\s*=\s*)"([^"]*)"', absolutise, text, flags=re.M)
    # Drop an existing [output] table (up to the next table header), then add ours.
    text = re.sub(r"^\[output\][^\[]*", "", text, flags=re.M)
    text += f'\n[output]\njson = "{out_json}"\n'
    path = os.path.join(work, os.path.basename(toml_path))
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path, missing


def run_scenario(mrc, toml_path, work):
    """Runs one scenario; returns a dict with the merged JSON, or with 'error'."""
    name = os.path.splitext(os.path.basename(toml_path))[0]
    out_json = os.path.join(work, name + ".flows.json")
    path, missing = prepare(toml_path, work, out_json)
    cmd = f"{shown_mrc(mrc)} sim {os.path.relpath(toml_path)}"
    if missing:
        return {"name": name, "cmd": cmd, "error": f"input {missing} is missing (tools/cm/gen_permutation.py writes the .cm matrices)"}
    t0 = time.time()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([mrc, "sim", "--no-progress", "--json", path], cwd=work, capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.time() - t0
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    if p.returncode not in (0, 3):
        return {"name": name, "cmd": cmd, "error": f"mrc sim exit {p.returncode}: {p.stderr.strip()[-500:]}"}
    summary = json.loads(p.stdout)
    flows = json.load(open(out_json, encoding="utf-8")) if os.path.exists(out_json) else {"variants": []}
    for v, fv in zip(summary["variants"], flows["variants"]):
        v["flow_results"] = fv.get("flow_results", [])
    summary.update(name=name, cmd=cmd, wall_total_s=wall, cpu_s=cpu, all_finished=p.returncode == 0)
    return summary


def fmt(x, nd=1):
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.{nd}f}"
    return str(x)


def table(res):
    """Markdown table: one row per variant; extra columns when the scenario has them."""
    vs = res["variants"]
    cols = [("variant", lambda v: v["variant"]),
            ("done", lambda v: f'{v["finished"]}/{v["flows"]}'),
            ("FCT min / p50 / p99 / max (µs)",
             lambda v: " / ".join(fmt(v["fct_us"][k]) for k in ("min", "p50", "p99", "max"))),
            ("rtx", lambda v: v["packets"]["rtx"]),
            ("timeouts", lambda v: v["timeouts"]),
            ("trims", lambda v: v["fabric"]["trims"]),
            ("drops", lambda v: v["fabric"]["drops"])]
    if any(v["fabric"].get("pfc_pauses", 0) for v in vs):
        cols.append(("PFC pauses", lambda v: v["fabric"]["pfc_pauses"]))
    if any(v.get("bytes_failed") for v in vs):
        cols.append(("bytes lost", lambda v: v.get("bytes_failed", 0)))
    if any("ring" in v for v in vs):
        cols += [("ring done (µs)", lambda v: fmt(v["ring"]["completion_us"])),
                 ("bus BW (Gb/s)", lambda v: fmt(v["ring"]["busbw_gbps"]))]
    if any("incast" in v for v in vs):
        cols += [("victim (Gb/s)", lambda v: fmt(v["incast"]["victim_gbps"])),
                 ("incast (Gb/s)", lambda v: fmt(v["incast"]["incast_gbps"]))]
    if any("failover" in v for v in vs):
        def rec(v):
            f = v["failover"]
            if f["recovery_us"] < 0:
                return "never"
            return f'{fmt(f["recovery_us"])} µs = {fmt(f["recovery_base_rtts"])} RTT'
        cols += [("goodput pre / dip / post (Gb/s)",
                  lambda v: " / ".join(fmt(v["failover"][k]) for k in ("pre_gbps", "dip_gbps", "post_gbps"))),
                 ("full goodput after", rec)]
    cols += [("events", lambda v: v["run"]["events"]),
             ("M events/s", lambda v: fmt(v["run"]["events_per_s"] / 1e6, 2)),
             ("sim time (µs)", lambda v: fmt(v["run"]["sim_time_us"])),
             ("wall (s)", lambda v: fmt(v["run"]["wall_s"], 2)),
             ("peak RSS (MB)", lambda v: fmt(v["run"]["peak_rss_mb"], 0))]
    lines = ["| " + " | ".join(c for c, _ in cols) + " |", "|" + "---|" * len(cols)]
    for v in vs:
        lines.append("| " + " | ".join(str(f(v)) for _, f in cols) + " |")
    return "\n".join(lines)


def plot_cdf(res, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for v in res["variants"]:
        f = sorted(x["fct_us"] for x in v["flow_results"] if x["finished"])
        if not f:
            continue
        n = len(v["flow_results"])
        ax.step(f, [(i + 1) / n for i in range(len(f))], where="post", label=v["variant"])
    ax.set_xlabel("flow completion time (µs)")
    ax.set_ylabel("fraction of flows")
    ax.set_title(f'{res["name"]}: FCT CDF ({res["hosts"]} hosts)')
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def plot_goodput(res, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for v in res["variants"]:
        f = v.get("failover", {})
        g = f.get("goodput_gbps") or []
        w = f.get("bin_us", 0)
        if not g or not w:
            continue
        ax.plot([(i + 1) * w for i in range(len(g))], g, label=v["variant"], linewidth=1)
    ax.set_xlabel("simulated time (µs)")
    ax.set_ylabel("goodput at the receivers (Gb/s)")
    ax.set_title(f'{res["name"]}: goodput over time')
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mrc", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--full-scale", action="store_true")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    mrc = os.path.abspath(a.mrc)
    os.chdir(root)
    outdir = os.path.join("docs", "results")
    os.makedirs(outdir, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    md = ["# Simulator results", "",
          "Generated by `tools/results/make_results.sh` (do not edit by hand) from the scenario files in",
          "`scenarios/` with `mrc sim`" + (f" at commit {commit} (plus uncommitted changes, if any)" if commit else "")
          + f" on {time.strftime('%Y-%m-%d')}.",
          "Regenerate with `tools/results/make_results.sh` (`--full-scale` also runs `scen6_scale` and `scen6_collective`); htsim's",
          "figures for the same inputs are in [htsim.md](htsim.md) §4.",
          "Each table row is one `[[variants]]` entry of the scenario, run on the same topology, workload and",
          "faults. FCT is sender-side (WRITE completion − start). Wall time and memory are from the 2-core",
          "development VM, which other jobs share: treat wall times as upper bounds (CPU time is steadier).",
          "Peak RSS is the process's, so for a multi-variant scenario it covers the variants run so far.", ""]
    notes = []
    with tempfile.TemporaryDirectory(prefix="mrc_results.") as work:
        for n in range(1, 7):
            md += [f"## {TITLES[n]}", ""]
            files = sorted(glob.glob(f"scenarios/scen{n}_*.toml"))
            full = []
            if n == 6:
                full = [f for f in files if os.path.basename(f) in FULL_SCALE]
                files = [f for f in files if f not in full]
                if a.full_scale:
                    files += full
            if not files and not full:
                msg = f"SCENARIO {n} MISSING: no scenarios/scen{n}_*.toml; not in this report"
                loud(msg)
                notes.append(msg)
                md += [f"**{msg}.**", ""]
                continue
            for f in files:
                print(f"make_results: running {f}", file=sys.stderr)
                res = run_scenario(mrc, f, work)
                md += [f"### `{res['name']}`", "", "```", res["cmd"], "```", ""]
                if "error" in res:
                    msg = f"{res['name']} NOT RUN: {res['error']}"
                    loud(msg)
                    notes.append(msg)
                    md += [f"**{msg}**", ""]
                    continue
                md += [f"Topology `{res['topology']}`, {res['hosts']} hosts.", "", table(res), "",
                       f"All variants: {res['cpu_s']:.1f} s CPU (user + sys), {res['wall_total_s']:.1f} s wall.", ""]
                if not res["all_finished"]:
                    md += ["Not every flow finished within the scenario's `limit_us` (see the done column).", ""]
                if n == 1 or any(len(v["flow_results"]) >= 64 for v in res["variants"]) and n != 6:
                    png = os.path.join(outdir, res["name"] + "_fct_cdf.png")
                    plot_cdf(res, png)
                    md += [f"![FCT CDF]({os.path.relpath(png, 'docs')})", ""]
                if any(v.get("failover", {}).get("goodput_gbps") for v in res["variants"]):
                    png = os.path.join(outdir, res["name"] + "_goodput.png")
                    plot_goodput(res, png)
                    md += [f"![goodput over time]({os.path.relpath(png, 'docs')})", ""]
                if os.path.basename(f) in FULL_SCALE:
                    keep = {k: v for k, v in res.items() if k != "variants"}
                    keep["variants"] = [{k: x for k, x in v.items() if k != "flow_results"} for v in res["variants"]]
                    stem = os.path.splitext(os.path.basename(f))[0]
                    with open(os.path.join(outdir, stem + ".json"), "w", encoding="utf-8") as o:
                        json.dump(keep, o, indent=1)
            for f in full if not a.full_scale else []:
                stem = os.path.splitext(os.path.basename(f))[0]
                saved = os.path.join(outdir, stem + ".json")
                md += [f"### `{stem}` (full size)", "", "```", f"{shown_mrc(mrc)} sim {f}", "```", ""]
                if os.path.exists(saved):
                    res = json.load(open(saved, encoding="utf-8"))
                    md += ["Not re-run by this invocation (it needs GBs of memory and minutes; `make_results.sh",
                           "--full-scale` runs it): the table is the last full run, saved in",
                           f"`docs/results/{stem}.json`.", "", table(res), ""]
                    if "cpu_s" in res:
                        md += [f"That run: {res['cpu_s']:.1f} s CPU (user + sys), {res['wall_total_s']:.1f} s wall.", ""]
                else:
                    msg = f"{stem} (full size) not run: pass --full-scale"
                    loud(msg)
                    notes.append(msg)
                    md += [f"**{msg}.**", ""]
    if notes:
        md += ["## Missing from this report", ""] + [f"- {x}" for x in notes] + [""]
    with open(os.path.join("docs", "results.md"), "w", encoding="utf-8") as o:
        o.write("\n".join(md))
    print(f"make_results: wrote docs/results.md ({len(notes)} missing item(s))", file=sys.stderr)


if __name__ == "__main__":
    main()
