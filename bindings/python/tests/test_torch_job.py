"""elastic.torch.Job and the adoption examples: examples/python/ddp_plain.py
(PyTorch's DDP tutorial shape) and ddp_elastic.py (the same with the Job)
differ by at most 20 diff lines, both run under torchrun, elasticrun and
alone, and the elastic one under --memory-ckpt --in-process-recovery
--warm-spares=1 survives a SIGKILLed rank with the survivors' processes kept,
at most one step redone and the weights of a fault-free run. The data
position's rule for a world-size change (elastic/_torch_data.py) is checked
on its own. Skipped when torch is not importable."""

import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

from elastic import _torch_data as data_rule  # noqa: E402
import elastic.torch as et  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAIN = os.path.join(ROOT, "examples", "python", "ddp_plain.py")
ELASTIC = os.path.join(ROOT, "examples", "python", "ddp_elastic.py")
STEP_LOG_DIR = os.path.join(ROOT, "test", "helpers", "step_log")
BIN_DIR = os.environ.get("ELASTIC_BIN_DIR", os.path.join(ROOT, "bin"))
AGENT_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT",
              "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")
STEPS_PER_RANK = 32  # 768 samples, 3 ranks, batches of 16: 16 a rank per epoch, 2 epochs


def clean_env(step_log=None):
    env = {k: v for k, v in os.environ.items() if k not in AGENT_VARS and not k.startswith("ELASTIC_STORE")}
    env["PYTHONPATH"] = STEP_LOG_DIR + os.pathsep + os.path.join(ROOT, "bindings", "python")
    env["PYTHON_EXEC"] = sys.executable
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env.pop("STEP_LOG", None)
    if step_log is not None:
        env["STEP_LOG"] = str(step_log)
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_cmd(nproc, *extra):
    # --standalone would take the fixed port 29400, which a concurrent torchrun
    # may hold: a free port instead. Debian's torch 1.13 needs --redirects and --tee both set.
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes=1", "--rdzv_backend=c10d",
            "--rdzv_endpoint=127.0.0.1:%d" % free_port(), "--rdzv_id=test", "--nproc_per_node=%d" % nproc,
            "--redirects", "2", "--tee", "2", *extra]


def elasticrun_cmd(nproc, *flags):
    return [os.path.join(BIN_DIR, "elasticrun"), "--standalone", "--nproc-per-node=%d" % nproc, *flags]


def run(cmd, tmp, name, step_log=None, timeout=300):
    result = subprocess.run(cmd, env=clean_env(step_log), capture_output=True, text=True, timeout=timeout)
    (tmp / (name + ".out")).write_text(result.stdout + "\n--- stderr\n" + result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def script_args(script, tmp, name, *extra):
    (tmp / name).mkdir(exist_ok=True)  # the tutorial's snapshot directory exists before it runs
    return [script, "--epochs", "2", "--dir", str(tmp / name), "--out", str(tmp / (name + ".digest")), *extra]


def digest(tmp, name):
    return (tmp / (name + ".digest")).read_text().strip()


def steps_by_rank(path):
    """rank -> [(time, pid)] of every optimizer step (test/helpers/step_log)."""
    found = {}
    with open(path) as f:
        for line in f:
            rank, pid, at = line.split()
            found.setdefault(int(rank), []).append((float(at), int(pid)))
    return found


@pytest.fixture(scope="module")
def fault_free_plain(tmp_path_factory):
    """The digest of ddp_plain.py's weights after 2 epochs on 3 ranks under torchrun."""
    tmp = tmp_path_factory.mktemp("fault_free_plain")
    run(torchrun_cmd(3, *script_args(PLAIN, tmp, "plain")), tmp, "plain")
    return digest(tmp, "plain")


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    """The digest of ddp_elastic.py's weights after 2 epochs on 3 ranks under
    torchrun, without a failure. (Not ddp_plain.py's: the Job keeps DDP's
    first gradient-bucket layout in every run, so that a resumed run is
    bit-equal; plain DDP switches to its rebuilt layout after one step, which
    rounds a few sums differently.)"""
    tmp = tmp_path_factory.mktemp("fault_free")
    run(torchrun_cmd(3, *script_args(ELASTIC, tmp, "elastic")), tmp, "elastic")
    return digest(tmp, "elastic")


def test_ddp_elastic_is_ddp_plain_with_at_most_twenty_diff_lines():
    result = subprocess.run(["diff", PLAIN, ELASTIC], capture_output=True, text=True)
    assert result.returncode == 1, result.stderr  # they differ...
    changed = [line for line in result.stdout.splitlines() if line[:1] in "<>"]
    assert 0 < len(changed) <= 20, result.stdout  # ...by ten lines changed at most
    assert "import elastic" not in open(PLAIN).read()


def test_both_examples_run_under_torchrun(fault_free_plain, fault_free):
    assert re.fullmatch(r"[0-9a-f]{64}", fault_free_plain) and re.fullmatch(r"[0-9a-f]{64}", fault_free)


def test_both_examples_run_under_elasticrun_with_its_defaults_to_torchruns_weights(tmp_path, fault_free_plain,
                                                                                    fault_free):
    for script, name, want in ((PLAIN, "plain", fault_free_plain), (ELASTIC, "elastic", fault_free)):
        run(elasticrun_cmd(3, *script_args(script, tmp_path, name)), tmp_path, name)
        assert digest(tmp_path, name) == want, name


def test_the_elastic_example_alone_resumes_from_its_disk_checkpoint(tmp_path):
    first = run([sys.executable, *script_args(ELASTIC, tmp_path, "alone")], tmp_path, "alone1")
    assert "resumes after" not in first.stderr
    whole = digest(tmp_path, "alone")
    # A second run with one more epoch picks up after the disk tier's last step (90 of 96), mid-epoch.
    second = run([sys.executable, ELASTIC, "--epochs", "3", "--dir", str(tmp_path / "alone"), "--out",
                  str(tmp_path / "more.digest")], tmp_path, "alone2")
    assert "rank 0/1 generation 0 resumes after step 90 (from disk)" in second.stderr, second.stderr
    fresh = run([sys.executable, ELASTIC, "--epochs", "3", "--dir", str(tmp_path / "fresh"), "--out",
                 str(tmp_path / "fresh.digest")], tmp_path, "fresh")
    assert fresh.returncode == 0
    assert digest(tmp_path, "more") == digest(tmp_path, "fresh") != whole


def kill_rank_during(cmd, tmp, name, rank=1, after_steps=10, timeout=300, extra_env=None, spare_events=None,
                     committed=None):
    """Runs cmd with a step log; SIGKILLs `rank`'s process once it trained
    `after_steps` steps (and, given `spare_events`, the event log, once the
    warm spare parked: one still importing torch would be cold-started
    instead; given `committed`, once the disk tier committed that step:
    an asynchronous save may still be in flight after the step trained);
    returns (completed process, kill time, step log)."""
    log = tmp / (name + ".steps")
    out, err = open(tmp / (name + ".out"), "w"), open(tmp / (name + ".err"), "w")
    env = clean_env(log)
    env.update(extra_env or {})
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
    deadline = time.monotonic() + timeout
    killed_at = None
    try:
        while killed_at is None:
            assert time.monotonic() < deadline, "rank %d never trained %d steps" % (rank, after_steps)
            assert proc.poll() is None, "the job ended before the kill"
            mine = steps_by_rank(log).get(rank, []) if log.exists() else []
            parked = spare_events is None or (spare_events.exists() and
                                              '"event":"spare_parked"' in spare_events.read_text())
            saved = committed is None or (tmp / name / ("step-%020d" % committed) / "COMMIT").exists()
            if len(mine) >= after_steps and parked and saved:
                killed_at = time.time()
                os.kill(mine[-1][1], 9)
            else:
                time.sleep(0.05)
        proc.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
        err.close()
    return proc.returncode, killed_at, steps_by_rank(log), (tmp / (name + ".err")).read_text()


def test_the_elastic_example_survives_a_sigkill_in_place_with_the_fault_free_weights(tmp_path, fault_free):
    events = tmp_path / "events.jsonl"
    cmd = elasticrun_cmd(3, "--memory-ckpt", "--in-process-recovery", "--warm-spares=1", "--max-restarts=3",
                         "--event-log", str(events),
                         *script_args(ELASTIC, tmp_path, "killed", "--step-sleep", "0.05"))
    rc, killed_at, steps, stderr = kill_rank_during(cmd, tmp_path, "killed", spare_events=events)
    assert rc == 0, stderr
    for rank in (0, 2):  # the survivors kept their processes
        assert len({pid for _, pid in steps[rank]}) == 1, steps[rank]
    assert len({pid for _, pid in steps[1]}) == 2  # the killed rank's place went to the spare
    redone = max(len(entries) for entries in steps.values()) - STEPS_PER_RANK
    assert 0 <= redone <= 1, redone
    assert digest(tmp_path, "killed") == fault_free
    with open(events) as f:
        promoted = [e for e in map(json.loads, f) if e["event"] == "spare_promoted"]
    assert len(promoted) == 1 and promoted[0]["rank"] == 1, promoted
    assert "Traceback" not in stderr, stderr  # the spare no longer needed exits quietly
    assert re.search(r"rank [012]/3 generation 2 resumes after step \d+ \(from local\)", stderr), stderr


@pytest.mark.parametrize("memory_every,kill_after", [(4, 10), (5, 18)])
def test_a_restored_step_older_than_the_one_in_flight_is_replayed_to_the_fault_free_weights(tmp_path, fault_free,
                                                                                            memory_every,
                                                                                            kill_after):
    # Memory saves every 4 steps, a kill after 10: the agreed step is 8 while
    # the survivors are at 10 or 11: the Job trains the batches after 8 from
    # the dataset, then the one in hand. Every 5, a kill after 18: the agreed
    # step 15 is in the first epoch, the loop in the second: the Job replays
    # to the end of the second epoch and the loop's own batches are skipped.
    helper = os.path.join(ROOT, "test", "helpers", "job_every.py")
    cmd = elasticrun_cmd(3, "--memory-ckpt", "--in-process-recovery", "--max-restarts=3",
                         *script_args(helper, tmp_path, "every", "--step-sleep", "0.05"))
    env_extra = {"JOB_MEMORY_EVERY": str(memory_every)}
    rc, _, steps, stderr = kill_rank_during(cmd, tmp_path, "every", after_steps=kill_after, extra_env=env_extra)
    assert rc == 0, stderr
    for rank in (0, 2):
        assert len({pid for _, pid in steps[rank]}) == 1, steps[rank]
    restored = {int(s) for s in re.findall(r"generation 2 resumes after step (\d+) \(from local\)", stderr)}
    assert len(restored) == 1 and list(restored)[0] % memory_every == 0, stderr
    redone = max(len(entries) for entries in steps.values()) - STEPS_PER_RANK
    assert 0 < redone <= memory_every, redone
    assert digest(tmp_path, "every") == fault_free


def test_under_torchrun_a_killed_rank_restarts_the_group_from_the_disk_tier(tmp_path, fault_free):
    # disk every 10 steps (the Job's default): the restarted group resumes
    # mid-epoch at the batch after the disk's newest step (10 or 20, as the
    # kill falls) and ends with the fault-free weights.
    cmd = torchrun_cmd(3, "--max_restarts", "1", "--monitor_interval", "0.1",
                       *script_args(ELASTIC, tmp_path, "tr", "--step-sleep", "0.02"))
    rc, _, steps, stderr = kill_rank_during(cmd, tmp_path, "tr", after_steps=20, committed=10)
    assert rc == 0, stderr
    resumed = set(re.findall(r"rank [012]/3 generation 0 resumes after step (\d+) \(from disk\)", stderr))
    assert resumed in ({"10"}, {"20"}), stderr
    assert digest(tmp_path, "tr") == fault_free


# ---- the data position ---------------------------------------------------------------


def sampler(length, world, rank, epoch=0, shuffle=True, drop_last=False):
    from torch.utils.data.distributed import DistributedSampler

    made = DistributedSampler(list(range(length)), num_replicas=world, rank=rank, shuffle=shuffle, seed=3,
                              drop_last=drop_last)
    made.set_epoch(epoch)
    return made


@pytest.mark.parametrize("length,world,drop_last", [(100, 3, False), (96, 4, False), (101, 4, True), (7, 3, False)])
def test_with_the_world_size_unchanged_a_resumed_sampler_yields_what_distributed_sampler_would(length, world,
                                                                                                drop_last):
    batch = 4
    for rank in range(world):
        whole = list(sampler(length, world, rank, epoch=5, drop_last=drop_last))
        for done in range(0, len(whole) // batch + 1):
            resumed = data_rule.make_resumable(sampler(length, world, rank, epoch=5, drop_last=drop_last))
            resumed._elastic_resume = {"epoch": 5, "world": world, "offset": done * batch * world}
            assert list(resumed) == whole[done * batch:], (rank, done)
            assert len(resumed) == len(whole[done * batch:])


@pytest.mark.parametrize("old,new", [(3, 2), (2, 3), (4, 1), (3, 5)])
def test_after_a_world_size_change_every_sample_not_yet_consumed_is_seen_once(old, new):
    length, batch, done = 103, 4, 5
    order = data_rule.epoch_order(length, 2, old, True, 3, False)
    consumed = done * batch * old
    seen_before = order[:consumed]
    after = []
    for rank in range(new):
        resumed = data_rule.make_resumable(sampler(length, new, rank, epoch=2))
        resumed._elastic_resume = {"epoch": 2, "world": old, "offset": consumed}
        after.append(list(resumed))
    assert len({len(a) for a in after}) == 1  # the same count on every rank (DDP runs in step)
    flat = [i for a in after for i in a]
    rest = order[consumed:]
    assert sorted(set(flat)) == sorted(set(rest))  # nothing left out
    assert len(flat) - len(rest) < new  # at most new - 1 padding repeats
    assert not set(flat) & (set(seen_before) - set(rest))  # nothing consumed is seen again
    for rank in range(new):  # the rule: rest padded by its head, rank r takes rest[r::new]
        padded = rest + rest[:(-len(rest)) % new]
        assert after[rank] == padded[rank::new]
    # an earlier epoch yields nothing, a later one is DistributedSampler's own
    early = data_rule.make_resumable(sampler(length, new, 0, epoch=1))
    early._elastic_resume = {"epoch": 2, "world": old, "offset": consumed}
    assert list(early) == [] and len(early) == 0
    late = data_rule.make_resumable(sampler(length, new, 0, epoch=3))
    late._elastic_resume = {"epoch": 2, "world": old, "offset": consumed}
    assert list(late) == list(sampler(length, new, 0, epoch=3))


def test_a_regroup_updates_the_rank_variables_of_os_environ(monkeypatch):
    info = et.WorkerInfo(rank=4, local_rank=1, world_size=6, local_world_size=2, group_rank=2, restart_count=3,
                         generation=5, master_port=1, attached=True, run_id="r", master_addr="h")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    et._export_ranks(info)
    assert (os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_RANK"], os.environ["GROUP_RANK"],
            os.environ["TORCHELASTIC_RESTART_COUNT"]) == ("4", "6", "1", "2", "3")
    alone = info._replace(attached=False, rank=0, world_size=1)
    monkeypatch.setenv("RANK", "7")
    et._export_ranks(alone)  # a launcher's own values stay
    assert os.environ["RANK"] == "7"
