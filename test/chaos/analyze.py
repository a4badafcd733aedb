#!/usr/bin/env python3
"""The invariants of a chaos run (chaos.sh) and its table.

analyze.py RUN_DIR SEED HANG_TIMEOUT_S: reads the run directory chaos.sh
wrote (per job: every agent incarnation's event log and console, the rank
logs, the faults, the process-table samples, the exit codes) and checks:

  result     the final weights equal the fault-free run's, bit for bit
  commits    every step committed (rank 0's checkpoint line) holds one content,
             the fault-free run's at that step
  fencing    never two generations' workers alive at once (process table)
             beyond the fencing bound (plus the freeze that kept them stopped)
  orphans    no process, namespace or shm file of ours left; no agent's fds grow;
             no temporary file in a job's checkpoint directory, which ends no
             larger than CKPT_GROWTH times the fault-free run's
  recovery   after each fault, new progress within its type's bound (a fault
             that overlaps extends it by its own)
  silence    never longer than SILENCE_MS without an event while the job runs
  exits      each agent's exit code and root-cause line agree with the job
  divergence a job with silent data corruption (fault `corrupt`) never restores the
             diverged step nor one trained after it: the first generation after a
             replica_divergence resumes below its step; the divergence names the
             corrupted rank
Exit 1, with the seed, when one fails. ETTR twice: `elasticctl goodput`'s
per job (its accounting of productive time, where the tool is built), and a
time-based one (the time the job's steps take at its own fault-free pace over
its wall time) as a cross-check.
"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys

SCALE = int(os.environ.get("ELASTIC_TEST_TIMEOUT_SCALE", "1"))
FENCE_MS = 4000 * SCALE    # keep-alive timeout (2 s) + detection and SIGKILL slack
SILENCE_MS = 20000 * SCALE
GRACE_S = 5  # elasticrun's default --grace-period: SIGTERM to SIGKILL
FD_GROWTH = 32  # an agent's open fds may grow this much over its life, not more
CKPT_GROWTH = 4  # a job's checkpoint directory may end this many times the fault-free one's size
REFORM_WINDOW_MS = 10000 * SCALE  # a generation formed this soon after a fault is its recovery
BASE_MS = {  # recovery bound per fault type, beyond the fault's own duration
    "worker_kill": 8000, "worker_hang": 10000, "agent_kill": 10000, "freeze": 10000,
    "partition": 10000, "loss": 12000, "etcd_kill": 12000, "ckpt_full": 8000,
    "store_kill": 60000, "corrupt": 0,  # corrupt: a job-wide setting, no moment to recover from
}


def events_of(path):
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut by SIGKILL
    return out


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


CKPT_LINE = re.compile(r"^step (\d+) loss \S+ \(checkpoint\) weights=([0-9a-f]+)")


def commits(log_glob):
    """step -> set of digests from rank 0's checkpoint lines."""
    seen = {}
    for path in glob.glob(log_glob, recursive=True):
        for line in read_lines(path):
            m = CKPT_LINE.match(line)
            if m:
                seen.setdefault(int(m.group(1)), set()).add(m.group(2))
    return seen


def goodput_ettr(paths):
    """elasticctl goodput's ETTR of one job's event logs; None without the tool."""
    ctl = os.path.join(os.environ.get("ELASTIC_BIN_DIR", ""), "elasticctl")
    if not paths or not os.access(ctl, os.X_OK):
        return None
    try:
        out = subprocess.run([ctl, "goodput", *paths, "--json"], capture_output=True, text=True,
                             timeout=60)
        return json.loads(out.stdout)["ettr"] if out.returncode == 0 else None
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        return None


def recovery_bound(fault, faults):
    """The fault's bound, extended by every fault active or begun before it is met."""
    t = fault["start"]
    bound = fault["end"] - t + BASE_MS[fault["type"]] * SCALE
    changed = True
    while changed:
        changed = False
        for g in faults:
            if g is fault or g["start"] > t + bound or g["end"] + BASE_MS[g["type"]] < t:
                continue
            b = g["end"] - t + BASE_MS[g["type"]] * SCALE
            if b > bound:
                bound, changed = b, True
    return bound


def main():
    run, seed, hang_s = sys.argv[1], sys.argv[2], int(sys.argv[3])
    problems = []
    clean = read_lines(os.path.join(run, "clean", "result.txt"))
    clean_kib = int((read_lines(os.path.join(run, "clean", "ckpt_kib.txt")) or ["0"])[0] or 0)
    clean_commits = {s: d.pop() for s, d in commits(os.path.join(run, "clean", "logs", "**", "stdout.log")).items()}
    faults = []
    for line in read_lines(os.path.join(run, "faults.tsv")):
        start, end, job, kind, host, detail = (line.split("\t") + [""] * 6)[:6]
        f = {"start": int(start), "end": int(end), "job": int(job), "type": kind, "host": host,
             "detail": detail}
        if kind == "worker_hang":  # stopped until the hang is seen and the grace period ends
            f["end"] = f["start"] + (hang_s + GRACE_S) * 1000
        faults.append(f)
    procs = [l.split() for l in read_lines(os.path.join(run, "procs.tsv"))]
    rows = {}  # backend -> totals
    recoveries = {}  # type -> [ms]
    for jobdir in sorted(glob.glob(os.path.join(run, "job*")), key=lambda p: int(p.rsplit("job", 1)[1])):
        job = int(jobdir.rsplit("job", 1)[1])
        backend = read_lines(os.path.join(jobdir, "backend"))[0]
        row = rows.setdefault(backend, {"jobs": 0, "faults": {}, "restarts": 0, "operator": 0,
                                        "redone": 0, "wall_ms": 0, "clean_ms": 0, "goodput": []})
        row["jobs"] += 1
        name = f"job {job} ({backend})"
        # result
        result = read_lines(os.path.join(jobdir, "result.txt"))
        if result != clean:
            problems.append(f"{name}: result {result} differs from the fault-free {clean}")
        # commits
        for step, digests in commits(os.path.join(jobdir, "logs", "**", "stdout.log")).items():
            if len(digests) > 1:
                problems.append(f"{name}: step {step} committed with {len(digests)} contents {sorted(digests)}")
            elif clean_commits.get(step) not in digests:
                problems.append(f"{name}: step {step} committed as {digests.pop()}, the fault-free run has {clean_commits.get(step)}")
        # events of every incarnation
        evs, by_tag = [], {}
        for path in glob.glob(os.path.join(jobdir, "events.h*.jsonl")):
            tag = os.path.basename(path)[len("events."):-len(".jsonl")]
            e = events_of(path)
            by_tag[tag] = e
            evs += e
        evs.sort(key=lambda e: e["ts_ms"])
        ettr = goodput_ettr(sorted(glob.glob(os.path.join(jobdir, "events.h*.jsonl"))))
        if ettr is not None:
            row["goodput"].append(ettr)
        if not evs:
            problems.append(f"{name}: no events")
            continue
        begin = min(e["ts_ms"] for e in evs if e["event"] == "worker_started")
        end_ts = max((e["ts_ms"] for e in evs if e["event"] == "job_end"), default=evs[-1]["ts_ms"])
        row["wall_ms"] += end_ts - begin
        # silence
        last = begin
        for e in evs:
            if begin <= e["ts_ms"] <= end_ts:
                if e["ts_ms"] - last > SILENCE_MS:
                    problems.append(f"{name}: {e['ts_ms'] - last} ms without an event before {e['event']} at {e['ts_ms']}")
                last = e["ts_ms"]
        # restarts: generations formed after the first, counted once
        gens = {e["generation"] for e in evs if e["event"] == "generation_formed"}
        row["restarts"] += max(0, len(gens) - 1)
        notes = read_lines(os.path.join(jobdir, "notes.txt"))
        row["operator"] += sum(1 for n in notes if n.endswith("operator_restart"))
        for n in notes:
            if "job_timeout" in n or "still_running" in n:
                problems.append(f"{name}: {n}")
        # steps redone: rank 0's logs in the order their generations formed (an
        # operator restart starts at generation 1 again); each resume point
        # against the newest step printed before it (>=: steps between
        # checkpoints are not printed)
        formed_at = {(tag, e["generation"]): e["ts_ms"] for tag, es in by_tag.items()
                     for e in es if e["event"] == "generation_formed"}
        logs0 = []
        for path in glob.glob(os.path.join(jobdir, "logs", "*", "*", "gen_*", "rank_0", "stdout.log")):
            tag = os.path.relpath(path, os.path.join(jobdir, "logs")).split(os.sep)[0]
            gen = int(re.search(r"gen_(\d+)", path).group(1))
            logs0.append((formed_at.get((tag, gen), 0), path))
        reached = None
        for _, path in sorted(logs0):
            top = None
            for line in read_lines(path):
                m = re.match(r"^resumed at step (\d+)", line)
                if m and reached is not None:
                    row["redone"] += max(0, reached - int(m.group(1)))
                m = re.match(r"^step (\d+) ", line)
                if m:
                    top = int(m.group(1))
            if top is not None:
                reached = max(reached or 0, top)
        # recoveries: new progress (a checkpoint past the newest before the fault)
        ckpts = sorted((e["ts_ms"], e["step"], e.get("generation", 0)) for e in evs if e["event"] == "checkpoint")
        # ETTR, time-based: the job's own fault-free pace (the median rate between
        # consecutive new checkpoints: most intervals hold no fault) over its wall time.
        rates, top, top_ts = [], -1, None
        for t, s, _ in ckpts:
            if s > top:
                if top_ts is not None and t > top_ts and top >= 0:
                    rates.append((s - top) / (t - top_ts))
                top, top_ts = s, t
        if rates and top > 0:
            row["clean_ms"] += top / statistics.median(rates)
        job_faults = [f for f in faults if f["job"] == job]
        # divergence: never restored, and the corrupted rank is the one named.
        # Each agent that journaled it restores, when it next restores, either
        # below the diverged step or a step the job committed anew after it (a
        # minority node steps aside into quarantine and rejoins later, when the
        # others have trained past the diverged step from a majority copy).
        for d in (e for e in evs if e["event"] == "replica_divergence" and e.get("committed") == 0):
            committed_after = {e["step"] for e in evs if e["event"] == "checkpoint"
                               and e["ts_ms"] > d["ts_ms"] and e.get("generation", 0) > d["generation"]}
            for tag, es in sorted(by_tag.items()):
                if not any(e["event"] == "replica_divergence" and e["step"] == d["step"] for e in es):
                    continue  # another incarnation (an operator restart counts generations anew)
                first = next((e for e in es if e["event"] == "checkpoint_restored"
                              and e["ts_ms"] > d["ts_ms"]), None)
                if first is not None and first["step"] >= d["step"] and first["step"] not in committed_after:
                    problems.append(f"{name}: {tag} restored step {first['step']} after the divergence "
                                    f"at step {d['step']} (generation {d['generation']})")
            for f in job_faults:
                m = re.match(r"rank (\d+) after step (\d+)", f["detail"]) if f["type"] == "corrupt" else None
                if m and d["step"] == int(m.group(2)) and m.group(1) not in d.get("minority_ranks", "").split(","):
                    problems.append(f"{name}: the divergence at step {d['step']} names ranks "
                                    f"{d.get('minority_ranks')}, not the corrupted rank {m.group(1)}")
            break  # every node journals the same divergence: one is enough
        for f in job_faults:
            if f["type"] == "corrupt":  # a job-wide setting, checked above (no moment to recover from)
                row["faults"]["corrupt"] = row["faults"].get("corrupt", 0) + 1
                continue
            row["faults"][f["type"]] = row["faults"].get(f["type"], 0) + 1
            # A fault that ends the generation is recovered when the next
            # generation commits new steps; one that does not, at new progress.
            done = max([s for t, s, g in ckpts if t <= f["start"]], default=-1)
            formed = [e["generation"] for e in evs if e["event"] == "generation_formed"
                      and f["start"] < e["ts_ms"] <= f["end"] + REFORM_WINDOW_MS]
            gen = min(formed, default=0)
            after = [t for t, s, g in ckpts if t > f["start"] and s > done and g >= gen]
            if f["type"] == "store_kill":  # the job is back when the operator's restart commits anew
                restarted = [int(n.split()[0]) for n in notes if n.endswith("operator_restart")
                             and int(n.split()[0]) >= f["start"]]
                after = [t for t, s, g in ckpts if restarted and t > restarted[0] and s > done]
            if not after:
                if f["start"] < end_ts - 2000:
                    problems.append(f"{name}: no progress after {f['type']} on h{f['host']} at {f['start']}")
                continue
            ms = after[0] - f["start"]
            recoveries.setdefault(f["type"], []).append(ms)
            bound = recovery_bound(f, job_faults)
            if ms > bound:
                problems.append(f"{name}: {f['type']} on h{f['host']} at {f['start']}: progress after {ms} ms, bound {bound} ms")
        # two generations alive at once (process table). A pass stamps every
        # process with its start time, so the first pass that saw both may
        # have seen them up to its own duration later than it says.
        pass_ms = {}
        for line in read_lines(os.path.join(run, "passes.tsv")):
            start, end = (int(x) for x in line.split())
            pass_ms[start] = end - start
        samples = {}
        for ts, j, host, pid, gen in procs:
            if int(j) == job and gen != "?":
                samples.setdefault(int(ts), set()).add(int(gen))
        since = None
        for ts in sorted(samples):
            if len(samples[ts]) > 1:
                since = ts if since is None else since
                allowed = FENCE_MS + sum(f["end"] - f["start"] for f in job_faults
                                         if f["type"] in ("freeze", "partition", "worker_hang")
                                         and f["start"] <= ts + FENCE_MS and f["end"] >= since - FENCE_MS)
                allowed += pass_ms.get(since, 0)
                if ts - since > allowed:
                    problems.append(f"{name}: generations {sorted(samples[ts])} alive together for {ts - since} ms (bound {allowed} ms)")
                    since = ts  # one report per episode
            else:
                since = None
        # exits and root-cause lines
        for line in read_lines(os.path.join(jobdir, "exits.txt")):
            parts = line.split()
            tag, rc = parts[0], int(parts[1])
            console = "\n".join(read_lines(os.path.join(jobdir, f"agent.{tag}.log")))
            ends = [e for e in by_tag.get(tag, []) if e["event"] == "job_end"]
            if len(parts) > 2 and parts[2] == "store_kill":
                # the root-cause line; or, for an agent (re)started as the host
                # died, that it never reached the store
                if rc != 1 or ("lost the job's store" not in console and
                               not re.search(r"connect to store \S+: Connection refused", console)):
                    problems.append(f"{name}: {tag} exited {rc} after the store's host died; its console: {console[-300:]!r}")
                continue
            status = ends[-1]["status"] if ends else None
            if result != clean:  # the job failed: every node says so, with one root cause
                if rc == 0 or console.count("the job failed") != 1:
                    problems.append(f"{name}: {tag} exited {rc} of a failed job without one root-cause line")
                continue
            if rc != 0 or status not in ("succeeded", "left_out") or "the job failed" in console:
                problems.append(f"{name}: {tag} exited {rc} (job_end {status}) though the job succeeded: {console[-300:]!r}")
            if status == "left_out" and "left out as a spare" not in console:
                problems.append(f"{name}: {tag} is left out but does not say so")
        # the checkpoint directory: no temporary file left, no more than a
        # few times what the fault-free run keeps (stale shards fill disks)
        left = read_lines(os.path.join(jobdir, "ckpt_left.txt"))
        if left and len(left[0].split()) == 2:
            tmp, kib = (int(x) for x in left[0].split())
            if tmp > 0:
                problems.append(f"{name}: {tmp} temporary file(s) left in its checkpoint directory")
            if clean_kib and kib > CKPT_GROWTH * clean_kib:
                problems.append(f"{name}: its checkpoint directory holds {kib} KiB, the fault-free run's {clean_kib} KiB")
        orphans = read_lines(os.path.join(jobdir, "orphans.txt"))
        if orphans:
            problems.append(f"{name}: processes left behind: {orphans}")
    # /dev/shm is the machine's: only names that carry one of our processes' pids are ours
    ours = {p[3] for p in procs}
    for jobdir in glob.glob(os.path.join(run, "job*")):
        ours |= {l.split()[2] for l in read_lines(os.path.join(jobdir, "agents.txt")) if len(l.split()) > 2}
    shm = [n for n in read_lines(os.path.join(run, "leaked_shm.txt"))
           if ours & set(re.findall(r"\d+", n))]
    if shm:
        problems.append(f"shm files left by our processes: {shm}")
    netns = read_lines(os.path.join(run, "leaked_netns.txt"))
    if netns:
        problems.append(f"namespaces left: {netns}")
    # fds: every agent's open descriptors, sampled through its life
    fd_seen = {}
    for line in read_lines(os.path.join(run, "fds.tsv")):
        ts, job, pid, count = line.split()
        fd_seen.setdefault((job, pid), []).append(int(count))
    # Against its settled count, the median of its first quarter of samples:
    # a first sample taken while the agent still starts (12 fds, where a
    # running agent holds 26-64) is no baseline. A leak grows to the end.
    # An agent may later take a role another agent of its job held from the
    # start (the store's or the generation store's host holds a connection
    # per worker and agent: 27 fds waiting to join, 56-60 hosting, in a soak
    # of seed 2026), so growth counts from the job's highest settled count.
    settled = {}
    for (job, pid), counts in fd_seen.items():
        first = sorted(counts[:max(1, len(counts) // 4)])
        settled[(job, pid)] = first[len(first) // 2]
    for (job, pid), counts in fd_seen.items():
        base = max(n for (j, _), n in settled.items() if j == job)
        late = counts[len(counts) * 3 // 4:]
        if max(late) - base > FD_GROWTH:
            problems.append(f"job {job}: agent {pid}'s fds grew from {settled[(job, pid)]} to "
                            f"{max(late)} (the job's agents settled at up to {base})")

    # ---- the table ----
    types = sorted({t for r in rows.values() for t in r["faults"]})
    print(f"\nchaos seed {seed}: {sum(r['jobs'] for r in rows.values())} jobs")
    print(f"{'':22}" + "".join(f"{b:>12}" for b in rows))
    for t in types:
        print(f"{'faults: ' + t:22}" + "".join(f"{r['faults'].get(t, 0):>12}" for r in rows.values()))
    for label, key in (("jobs", "jobs"), ("restarts (generations)", "restarts"),
                       ("operator restarts", "operator"), ("steps redone (>=)", "redone")):
        print(f"{label:22}" + "".join(f"{r[key]:>12}" for r in rows.values()))
    print(f"{'ETTR (goodput, mean)':22}" + "".join(
        f"{statistics.mean(r['goodput']):>12.3f}" if r["goodput"] else f"{'-':>12}" for r in rows.values()))
    print(f"{'ETTR (time-based)':22}" + "".join(
        f"{(r['clean_ms'] / r['wall_ms'] if r['wall_ms'] else 0):>12.3f}" for r in rows.values()))
    print("\nrecovery (fault -> new progress), ms:")
    print(f"{'type':14}{'count':>7}{'median':>9}{'worst':>9}")
    for t in sorted(recoveries):
        v = recoveries[t]
        print(f"{t:14}{len(v):>7}{int(statistics.median(v)):>9}{max(v):>9}")
    if problems:
        repro = os.environ.get("CHAOS_REPRO", f"make chaos CHAOS_SEED={seed}")
        print(f"\nchaos: {len(problems)} invariant(s) broken (reproduce with: {repro}):")
        for p in problems:
            print("  " + p)
        return 1
    print("\nchaos: every invariant held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
