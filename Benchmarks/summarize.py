#!/usr/bin/env python3
"""Turns the benchmark's raw runs (one JSON object per line: case, group, server, round, result) into the
table of medians and ratios that Benchmarks/run prints (Markdown), and the same as one JSON document.

For each echo case the reference is the faster of the C server's two modes there (by the median of the
case's main figure); every ratio is netlifed / reference, taken per round (the two runs of a round ran one
right after the other) and then the median over the rounds. Latencies of the control-plane cases are pooled
over all rounds. netlifed's targets are shown next to the figures they concern. The http case compares
netlifed with nginx serving the same file (target: at least 0.9x nginx's MB/s); the https-download
cases compare netlifed as a client with the curl command line fetching the same file over TLS (the
targets: at least 0.95x curl's MB/s, and `status` p99 under 5 ms while the download runs). The wake soak's
cases (one run each) count the connections lost (none may be) and report the first byte's latency after a
wake-up against the same app's awake (target: p99 under 5 ms) and the memory held while the app sleeps.
"""

import argparse
import json
import statistics
import sys

REFERENCE_MODES = ("event", "bufferevent")

# case group -> (main figure, label, unit, higher is better, target on the ratio or None)
ECHO_GROUPS = {
    "pingpong": ("messages_per_s", "msg/s", ">= 0.95"),
    "pipelined": ("messages_per_s", "msg/s", ">= 0.95"),
    "streaming": ("mb_per_s", "MB/s", ">= 1.1"),
}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(q * len(ordered) + 0.999999)))
    return ordered[rank - 1]


def pooled(records, key):
    values = [v for record in records for v in record[key]["values"]]
    if not values:
        return None
    return {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99), "max": max(values), "samples": len(values)}


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def fmt(value, digits=None):
    if value is None:
        return "-"
    if digits is None:
        digits = 0 if abs(value) >= 100 else (1 if abs(value) >= 10 else 2)
    return f"{value:,.{digits}f}"


def meets(value, target):
    if value is None or target is None:
        return ""
    op, bound = target.split()
    bound = float(bound)
    ok = value >= bound if op == ">=" else value <= bound
    return "yes" if ok else "**no**"


def by_server_and_round(records):
    table = {}
    for record in records:
        table.setdefault(record["server"], {})[record["round"]] = record["result"]
    return table


def echo_case(name, group, records):
    figure = ECHO_GROUPS[group][0] if group in ECHO_GROUPS else "bytes_per_connection"
    per_cpu = "mb_per_server_cpu_s" if figure == "mb_per_s" else "messages_per_server_cpu_s"
    runs = by_server_and_round(records)
    netlifed = runs.get("netlifed", {})
    lower_is_better = figure == "bytes_per_connection"
    candidates = [mode for mode in REFERENCE_MODES if runs.get(mode)]
    pick = min if lower_is_better else max
    mode = pick(candidates, key=lambda m: median(r[figure] for r in runs[m].values()))
    reference = runs[mode]
    rounds = sorted(set(netlifed) & set(reference))

    def medians(results, keys):
        return {key: median(results[r].get(key) for r in rounds) for key in keys}

    keys = [figure] if lower_is_better else [figure, "p50_us", "p99_us", "p999_us", per_cpu, "server_cpu_s", "client_cpu_s"]
    ratios = {key: median(ratio(netlifed[r].get(key), reference[r].get(key)) for r in rounds) for key in keys}
    errors = sum(result.get("errors", 0) for server in runs.values() for result in server.values())

    def generator_bound(results):
        # A round in which loadgen used 95% of a CPU or more: its pace, not the server's, may have set the figure.
        return sum(1 for r in rounds if results[r].get("client_cpu_s", 0) >= 0.95 * results[r].get("duration_s", float("inf")))

    # The rounds in which the hypervisor took less than a quarter of a CPU from either run: on a shared machine
    # it sometimes takes most of one for tens of seconds, and a pair of runs split by that is no comparison.
    steady = [] if lower_is_better else [
        r for r in rounds
        if all(side[r].get("steal_s", 0) < 0.25 * side[r].get("duration_s", 0) for side in (netlifed, reference))]

    case = {
        "name": name,
        "group": group,
        "figure": figure,
        "per_cpu_figure": None if lower_is_better else per_cpu,
        "reference_mode": mode,
        "rounds": len(rounds),
        "netlifed": medians(netlifed, keys),
        "reference": medians(reference, keys),
        "other_mode": {m: medians(runs[m], keys) for m in candidates if m != mode},
        "ratio": ratios,
        "errors": errors,
        "generator_bound_rounds": None if lower_is_better else {"netlifed": generator_bound(netlifed), "reference": generator_bound(reference)},
        "steady_rounds": len(steady),
        "steady_ratio": None if lower_is_better else median(ratio(netlifed[r].get(figure), reference[r].get(figure)) for r in steady),
    }
    if lower_is_better:
        for side in ("netlifed", "reference"):
            case[side]["rss_after_kib"] = median(runs["netlifed" if side == "netlifed" else mode][r]["rss_after_kib"] for r in rounds)
    return case


def http_case(name, records):
    """netlifed against nginx (the reference here): medians per server, ratios per round."""
    runs = by_server_and_round(records)
    netlifed, nginx = runs.get("netlifed", {}), runs.get("nginx", {})
    rounds = sorted(set(netlifed) & set(nginx))
    keys = ["mb_per_s", "best_mb_per_s", "server_cpu_s_per_gib", "client_cpu_s_per_gib", "softirq_s_per_gib",
            "steal_s_per_gib"]

    def medians(results):
        return {key: median(results[r].get(key) for r in rounds) for key in keys}

    return {
        "name": name,
        "reference": medians(nginx),
        "reference_server": "nginx",
        "netlifed": medians(netlifed),
        "ratio": {key: median(ratio(netlifed[r].get(key), nginx[r].get(key)) for r in rounds) for key in keys},
        "rounds": len(rounds),
        "downloads_per_round": netlifed[rounds[0]]["downloads"] if rounds else None,
        "bytes_per_download": netlifed[rounds[0]]["bytes"] // netlifed[rounds[0]]["downloads"] if rounds else None,
    }


def download_case(name, records):
    """netlifed against curl as clients of the same https URL: medians per client, ratios per round, the
    `status` round trips pooled over the rounds (sampled in downloads of their own, netlifed-status; results
    of earlier runs sampled them in the timed downloads)."""
    runs = by_server_and_round(records)
    netlifed, curl, synced = runs.get("netlifed", {}), runs.get("curl", {}), runs.get("curl-fsync", {})
    sampled = runs.get("netlifed-status", {})
    rounds = sorted(set(netlifed) & set(curl))
    synced_rounds = sorted(set(netlifed) & set(synced))
    keys = ["mb_per_s", "best_mb_per_s", "client_cpu_s_per_gib", "server_cpu_s_per_gib"]

    def medians(results):
        return {key: median(results[r].get(key) for r in sorted(results)) for key in keys}

    statuses = [side[r] for side in (netlifed, sampled) for r in sorted(side) if "status_us" in side[r]]
    return {
        "name": name,
        "netlifed": medians(netlifed),
        "curl": medians(curl),
        "ratio": {key: median(ratio(netlifed[r].get(key), curl[r].get(key)) for r in rounds) for key in keys},
        # A download that ends on the disk, as netlifed's does: curl, then an fsync of its file (disk cases).
        "curl_fsync": medians(synced) if synced else None,
        "ratio_fsync": median(ratio(netlifed[r].get("mb_per_s"), synced[r].get("mb_per_s")) for r in synced_rounds) if synced_rounds else None,
        "rounds": len(rounds),
        "curl_rounds": len(curl),
        "protocols": sorted({p for side in (netlifed, curl) for result in side.values() for p in result.get("protocols", [])}),
        "status_us": pooled(statuses, "status_us") if statuses else None,
        # netlifed's rate in the downloads where `status` was sampled.
        "netlifed_sampled": medians(sampled) if sampled else None,
        "netlifectl_cpu_s_per_gib": median(netlifed[r].get("netlifectl_cpu_s_per_gib") for r in sorted(netlifed)),
    }


def echo_table(cases):
    lines = [
        "| scenario | reference mode | netlifed | reference | ratio | p99 µs netlifed / ref | p99 ratio "
        "| per server CPU-s netlifed / ref | ratio | ratio, rounds with steal under 1/4 CPU | target | meets |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case in cases:
        unit = ECHO_GROUPS[case["group"]][1]
        target = ECHO_GROUPS[case["group"]][2]
        n, r, q = case["netlifed"], case["reference"], case["ratio"]
        f, c = case["figure"], case["per_cpu_figure"]
        main_ratio = q[f]
        lines.append(
            f"| {case['name']} | {case['reference_mode']} | {fmt(n[f])} {unit} | {fmt(r[f])} {unit} | {fmt(main_ratio, 3)} "
            f"| {fmt(n['p99_us'])} / {fmt(r['p99_us'])} | {fmt(q['p99_us'], 2)} "
            f"| {fmt(n[c])} / {fmt(r[c])} | {fmt(q[c], 3)} | {fmt(case['steady_ratio'], 3)} ({case['steady_rounds']} of {case['rounds']}) "
            f"| {target or ''} | {meets(main_ratio, target)} |"
        )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", help="the raw runs, one JSON object per line")
    parser.add_argument("--meta", help="a JSON object describing the machine and the settings")
    parser.add_argument("--output", help="where to write the summary as JSON")
    parser.add_argument("--brief", metavar="JSON", help="print one run's main figures on one line, and exit "
                        "(- reads the run from standard input)")
    args = parser.parse_args()
    if args.brief:
        print(brief(json.loads(sys.stdin.read() if args.brief == "-" else args.brief)))
        return 0
    if not args.input or not args.output:
        parser.error("--input and --output are needed")

    records = [json.loads(line) for line in open(args.input) if line.strip()]
    meta = json.load(open(args.meta)) if args.meta else {}
    groups = {}
    for record in records:
        groups.setdefault(record["group"], {}).setdefault(record["case"], []).append(record)

    summary = dict(meta)
    out = []
    echo_cases = [echo_case(name, group, recs) for group in ("pingpong", "pipelined", "streaming")
                  for name, recs in groups.get(group, {}).items()]
    if echo_cases:
        summary["echo"] = echo_cases
        out += ["Echo (medians over rounds; ratio = netlifed / reference, per round, then the median):", ""]
        out += echo_table(echo_cases) + [""]
        notes = []
        for case in echo_cases:
            counts = case["generator_bound_rounds"]
            if case["group"] == "streaming" and any(counts.values()):
                notes.append(f"{case['name']}: loadgen used 95% of a CPU or more in {counts['netlifed']} of netlifed's "
                             f"{case['rounds']} rounds and {counts['reference']} of the reference's: there the generator, "
                             "not the server, set the MB/s, and the per server CPU-second figure is the server's own.")
            if case["steady_rounds"] < case["rounds"]:
                notes.append(f"{case['name']}: in {case['rounds'] - case['steady_rounds']} of {case['rounds']} rounds the "
                             "hypervisor took a quarter of a CPU or more (/proc/stat's steal) from netlifed's run or the "
                             "reference's: those pairs ran on different machines, in effect.")
        out += notes + ([""] if notes else [])

    if "idle" in groups:
        idle = [echo_case(name, "idle", recs) for name, recs in groups["idle"].items()]
        summary["idle"] = idle
        out += ["| idle connections | reference mode | netlifed bytes/conn | reference bytes/conn | ratio | target | meets |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for case in idle:
            value = case["ratio"]["bytes_per_connection"]
            out.append(f"| {case['name']} | {case['reference_mode']} | {fmt(case['netlifed']['bytes_per_connection'])} "
                       f"| {fmt(case['reference']['bytes_per_connection'])} | {fmt(value, 2)} | <= 1.25 | {meets(value, '<= 1.25')} |")
        out.append("")

    if "lifecycle" in groups:
        records = [r for recs in groups["lifecycle"].values() for r in recs]
        mine = {r["round"]: r["result"] for r in records if r["server"] == "netlifed"}
        floors = {r["round"]: r["result"] for r in records if r["server"] == "floor"}
        results = [mine[r] for r in sorted(mine)]
        first = results[0]
        lifecycle = {"listeners": first["listeners"], "connections": first["connections"],
                     "errors": sum(r["errors"] for r in results)}
        out += [f"Lifecycle: {first['listeners']:,} listeners, {first['connections']:,} connections "
                f"(ms, pooled over {len(results)} round(s); the client's own time included). The C floor is the "
                "same system calls made from C through libevent's listeners (listener-floor.c --libevent, as many "
                "connections on the ports) in the same rounds; the ratio is netlifed's p50 over the floor's, per "
                "round, then the median:", "",
                "| transition | p50 ms | p99 ms | max ms | samples | C floor p50 / p99 ms | p50 ratio to the floor "
                "| target | meets |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for key, label, target in (("background_ms", "background acknowledged", "<= 10"),
                                   ("foreground_ms", "foreground (from background) acknowledged", "<= 10"),
                                   ("suspend_ms", "suspend acknowledged", None),
                                   ("foreground_from_suspended_ms", "foreground from suspended acknowledged", None),
                                   ("refused_after_reply_ms", "background reply -> first ECONNREFUSED", None)):
            stats = pooled(results, key)
            floor_runs = [f for f in floors.values() if key in f]
            if floor_runs:
                stats["floor"] = pooled(floor_runs, key)
                stats["ratio_to_floor_p50"] = median(ratio(mine[r][key]["p50"], floors[r][key]["p50"])
                                                     for r in sorted(set(mine) & set(floors)))
            lifecycle[key] = stats
            floor = stats.get("floor")
            floor_text = f"{fmt(floor['p50'], 3)} / {fmt(floor['p99'], 3)}" if floor else ""
            out.append(f"| {label} | {fmt(stats['p50'], 3)} | {fmt(stats['p99'], 3)} | {fmt(stats['max'], 3)} "
                       f"| {stats['samples']} | {floor_text} | {fmt(stats.get('ratio_to_floor_p50'), 2) if floor else ''} "
                       f"| {target or ''} | {meets(stats['p99'], target)} |")
        lifecycle["background_stages_ms_p50"] = median(r["background_stages_ms_p50"] for r in results)
        out += ["", f"(The daemon's own did-enter-background + will-resign-active stages: "
                    f"{fmt(lifecycle['background_stages_ms_p50'], 3)} ms, median.)", ""]
        summary["lifecycle"] = lifecycle

    if "control" in groups:
        control = {}
        out += ["Control socket round trips (µs, pooled over rounds; Python client):", "",
                "| case | status p50 | status p99 | status max | samples | version p50 | reply bytes | target p99 | meets |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name, recs in groups["control"].items():
            results = [r["result"] for r in recs]
            status, version = pooled(results, "status_us"), pooled(results, "version_us")
            control[name] = {"status_us": status, "version_us": version, "apps": results[0]["apps"],
                             "reply_bytes": results[0]["reply_bytes"]}
            # The target: p99 under 1 ms with 10 apps, under 5 ms while 1,000 echo connections are busy.
            target = "<= 5000" if name.endswith("-busy") or name.endswith("-stream") else "<= 1000"
            out.append(f"| {name} | {fmt(status['p50'])} | {fmt(status['p99'])} | {fmt(status['max'])} | {status['samples']} "
                       f"| {fmt(version['p50'])} | {results[0]['reply_bytes']:,} | {target} | {meets(status['p99'], target)} |")
        out.append("")
        summary["control"] = control

    if "voip" in groups:
        results = [r["result"] for recs in groups["voip"].values() for r in recs]
        polled, watched = pooled(results, "wake_us"), pooled(results, "wake_event_us")
        summary["voip"] = {"wake_us": polled, "wake_event_us": watched,
                           "seen_in_background": sum(r["seen_in_background"] for r in results)}
        out += ["VoIP wake-up (µs, pooled over rounds; Python peer and client):", "",
                "| measured until | p50 | p99 | max | samples | target p99 | meets |", "| --- | --- | --- | --- | --- | --- | --- |",
                f"| `status` shows the app woken (polled) | {fmt(polled['p50'])} | {fmt(polled['p99'])} | {fmt(polled['max'])} "
                f"| {polled['samples']} | <= 1000 | {meets(polled['p99'], '<= 1000')} |",
                f"| the `woken` event arrives on a watch | {fmt(watched['p50'])} | {fmt(watched['p99'])} | {fmt(watched['max'])} "
                f"| {watched['samples']} | | |", ""]

    if "metrics" in groups:
        metrics = {}
        out += ["/metrics scrapes (ms, pooled over rounds; curl, one scrape after the other; work: the daemon's own "
                "account of each scrape, the time its slices took; loop turns: the daemon's "
                "netlife_loop_turn_duration_seconds over the scrapes):", "",
                "| case | scrape bytes | scrape p50 / p99 | work p50 / max | longest turn of a scrape (max) "
                "| turns per scrape | loop turns over 5 ms (of all) | status p99 µs meanwhile | target | meets |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name, recs in groups["metrics"].items():
            results = [r["result"] for r in recs]
            scrape, status = pooled(results, "scrape_ms"), pooled(results, "status_us")
            work = pooled([r for r in results if r.get("work_ms")], "work_ms")
            longest = pooled([r for r in results if r.get("longest_turn_ms")], "longest_turn_ms")
            over = sum(r["loop_turns_over_5ms"] for r in results)
            turns = sum(r["loop_turns"] for r in results)
            metrics[name] = {"scrape_ms": scrape, "work_ms": work, "longest_turn_ms": longest, "status_us": status,
                             "scrape_bytes": results[0]["scrape_bytes"], "apps": results[0]["apps"],
                             "turns_per_scrape": median(r["turns_per_scrape"] for r in results),
                             "loop_turns_over_5ms": over, "loop_turns": turns}
            # The target: no loop turn over 5 ms while 1,000 apps are scraped.
            out.append(f"| {name} | {results[0]['scrape_bytes']:,} | {fmt(scrape['p50'], 1)} / {fmt(scrape['p99'], 1)} "
                       f"| {fmt(work['p50'], 1) if work else '-'} / {fmt(work['max'], 1) if work else '-'} "
                       f"| {fmt(longest['max'], 2) if longest else '-'} | {fmt(metrics[name]['turns_per_scrape'])} "
                       f"| {over} ({turns:,}) | {fmt(status['p99'])} | no turn over 5 ms | {'yes' if over == 0 else '**no**'} |")
        out.append("")
        summary["metrics"] = metrics

    if "http" in groups:
        http = [http_case(name, recs) for name, recs in groups["http"].items()]
        summary["http"] = http
        out += ["HTTP: one 1 GiB file from the page cache over loopback, netlifed (sendfile) against nginx "
                "(`sendfile on`); https: the same over TLS 1.3 (OpenSSL's SSL_write in both, ECDSA P-256 certificates from one test CA, "
                "curl as the client); medians over rounds, ratio = netlifed / nginx per round, then the median:", "",
                "| scenario | netlifed MB/s | nginx MB/s | ratio | server CPU s/GiB netlifed / nginx | ratio "
                "| client CPU s/GiB netlifed / nginx | softirq s/GiB netlifed / nginx | rounds | target | meets |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for case in http:
            n, r, q = case["netlifed"], case["reference"], case["ratio"]
            out.append(f"| {case['name']} | {fmt(n['mb_per_s'])} | {fmt(r['mb_per_s'])} | {fmt(q['mb_per_s'], 3)} "
                       f"| {fmt(n['server_cpu_s_per_gib'], 3)} / {fmt(r['server_cpu_s_per_gib'], 3)} "
                       f"| {fmt(q['server_cpu_s_per_gib'], 3)} "
                       f"| {fmt(n['client_cpu_s_per_gib'], 3)} / {fmt(r['client_cpu_s_per_gib'], 3)} "
                       f"| {fmt(n['softirq_s_per_gib'], 3)} / {fmt(r['softirq_s_per_gib'], 3)} "
                       f"| {case['rounds']} | >= 0.9 | {meets(q['mb_per_s'], '>= 0.9')} |")
        out.append("")

    if "https-download" in groups:
        downloads = [download_case(name, recs) for name, recs in groups["https-download"].items()]
        summary["https_download"] = downloads
        out += ["HTTPS download: one 1 GiB file over TLS from nginx on loopback, netlifed (`netlifectl download "
                "--cacert`) against the curl command line as the client; medians over rounds, ratio = netlifed / curl "
                "per round, then the median; `status` round trips while netlifed downloads (in downloads of their own, "
                "one round trip every 10 ms), pooled:", "",
                "| scenario | protocol | netlifed MB/s | curl MB/s | ratio | client CPU s/GiB netlifed / curl | ratio "
                "| nginx CPU s/GiB netlifed / curl | status p99 µs (samples) | rounds | target | meets "
                "| curl + fsync MB/s | ratio to it | netlifed MB/s while `status` is sampled |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for case in downloads:
            n, c, q, status = case["netlifed"], case["curl"], case["ratio"], case["status_us"]
            status_text = f"{fmt(status['p99'])} ({status['samples']})" if status else "-"
            meets_all = ""
            if case["rounds"]:
                rate = meets(q["mb_per_s"], ">= 0.95")
                if case["ratio_fsync"] is not None:
                    # On disk netlifed's download ends with its bytes synced; curl's stays in the page cache.
                    rate += f" ({meets(case['ratio_fsync'], '>= 0.95')} against curl + fsync)"
                meets_all = rate + " / " + meets(status["p99"] if status else None, "<= 5000")
            out.append(f"| {case['name']} | {', '.join(case['protocols'])} | {fmt(n['mb_per_s'])} | {fmt(c['mb_per_s'])} "
                       f"| {fmt(q['mb_per_s'], 3)} | {fmt(n['client_cpu_s_per_gib'], 3)} / {fmt(c['client_cpu_s_per_gib'], 3)} "
                       f"| {fmt(q['client_cpu_s_per_gib'], 3)} "
                       f"| {fmt(n['server_cpu_s_per_gib'], 3)} / {fmt(c['server_cpu_s_per_gib'], 3)} | {status_text} "
                       f"| {case['rounds']} | >= 0.95 / p99 <= 5000 µs | {meets_all} "
                       f"| {fmt(case['curl_fsync']['mb_per_s']) if case['curl_fsync'] else '-'} "
                       f"| {fmt(case['ratio_fsync'], 3) if case['ratio_fsync'] is not None else '-'} "
                       f"| {fmt(case['netlifed_sampled']['mb_per_s']) if case['netlifed_sampled'] else '-'} |")
        out.append("")

    if "wake" in groups:
        wake = []
        out += ["Wake soak: each app put to sleep by idle detection and woken by connections, one cycle = the app "
                "suspended, a connection, a request, the whole answer, the close, the app suspended again; the first "
                "byte timed from connect(), against the same request to the app awake in the foreground (ms); "
                "resident memory while asleep (KiB, first / last sample of the run):", "",
                "| app | cycles | refused | reset | unanswered | not woken | first byte p50 / p99 / max | awake p50 / p99 "
                "| asleep again after the close, p50 | netlifed RSS asleep | app's processes' RSS asleep | target p99 | meets |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name, recs in groups["wake"].items():
            result = recs[0]["result"]
            first, awake, resleep = result["first_byte_ms"], result["awake_first_byte_ms"], result["resleep_ms"]
            memory = result["memory_asleep"]

            def kib(side):
                return f"{side['first']:,} / {side['last']:,}" if side else "(in netlifed)"

            # Without the figures of every cycle (the raw run keeps none either) nor the memory samples.
            entry = {"name": name}
            for key, value in result.items():
                entry[key] = {k: v for k, v in value.items() if not isinstance(v, list)} if isinstance(value, dict) else value
            wake.append(entry)
            out.append(f"| {name} | {result['cycles']:,} | {result['refused']} | {result['reset']} | {result['unanswered']} "
                       f"| {result['not_woken']} | {fmt(first and first['p50'], 3)} / {fmt(first and first['p99'], 3)} / "
                       f"{fmt(first and first['max'], 3)} | {fmt(awake and awake['p50'], 3)} / {fmt(awake and awake['p99'], 3)} "
                       f"| {fmt(resleep and resleep['p50'], 1)} | {kib(memory['netlifed_kib'])} | {kib(memory['app_kib'])} "
                       f"| <= 5 | {meets(first and first['p99'], '<= 5')} |")
        out += ["", "(A lost connection fails the run; the latency is reported, not judged, by the run.)", ""]
        summary["wake"] = wake

    for record in groups.get("failed", {}).values():
        out.append(f"{record[0]['case']}: {record[0]['server']} failed: {record[0]['result']['reason']}")
        summary.setdefault("failed", {})[record[0]["case"]] = record[0]["result"]["reason"]

    for record in groups.get("skipped", {}).values():
        out.append(f"{record[0]['case']}: skipped: {record[0]['result']['reason']}")
        summary.setdefault("skipped", {})[record[0]["case"]] = record[0]["result"]["reason"]

    errors = sum(r["result"].get("errors", 0) for r in records)
    summary["errors"] = errors
    if errors:
        out.append(f"WARNING: {errors} errors in the runs (see the raw results).")
    runs = [strip_values(r) for r in records]
    with open(args.output, "w") as file:
        # Indented, except the raw runs: one line each.
        text = json.dumps({**summary, "runs": []}, indent=1)
        lines = ",\n  ".join(json.dumps(run, separators=(",", ":")) for run in runs)
        file.write(text[: text.rindex("[]")] + "[\n  " + lines + "\n ]\n}\n")
    print("\n".join(out))


def brief(result):
    """The main figures of one run, for the progress lines."""
    keys = ("messages_per_s", "mb_per_s", "p99_us", "server_cpu_s", "server_cpu_s_per_gib", "client_cpu_s",
            "client_cpu_s_per_gib", "steal_s", "softirq_s_per_gib", "bytes_per_connection", "scrape_bytes",
            "loop_turns_over_5ms", "errors", "protocols")
    parts = [f"{key}={result[key]}" for key in keys if key in result]
    for key, value in result.items():
        if isinstance(value, dict) and "p50" in value:
            parts.append(f"{key} p50={value['p50']} p99={value['p99']}")
    return "  ".join(parts)


def strip_values(record):
    """A raw run without its sample lists (the pooled figures above hold them)."""
    result = {}
    for key, value in record["result"].items():
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k != "values"}
        result[key] = value
    return {**record, "result": result}


if __name__ == "__main__":
    sys.exit(main())
