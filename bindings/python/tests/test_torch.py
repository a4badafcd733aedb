"""elastic.torch with Debian's torch: the job's store as a torch Store, state
checkpoints that round-trip bit for bit, and the DDP example recovering in
place under elasticrun (survivors keep their pids, the final weights equal an
uninterrupted run's). Skipped when torch is not importable."""

import collections
import datetime
import json
import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import elastic  # noqa: E402
import elastic.torch as et  # noqa: E402
from elastic import Checkpoint, Store, StoreServer  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
DDP_EXAMPLE = os.path.join(ROOT, "examples", "python", "ddp_inprocess.py")
AGENT_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT",
              "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in AGENT_VARS and not k.startswith("ELASTIC_STORE")}
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env["PYTHON_EXEC"] = sys.executable
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env.update(extra)
    return env


def test_the_job_store_answers_as_a_torch_store():
    with StoreServer() as server, Store.connect(server.endpoint) as store:
        ts = et.ElasticStore(store.clone("t/"), datetime.timedelta(seconds=5))
        assert isinstance(ts, dist.Store)
        ts.set("a", b"1")
        assert ts.get("a") == b"1"
        assert ts.add("n", 2) == 2 and ts.add("n", 3) == 5
        assert ts.compare_set("c", "", "first") == b"first"
        assert ts.compare_set("c", "wrong", "second") == b"first"
        assert ts.compare_set("c", "first", "third") == b"third"
        assert ts.compare_set("absent", "x", "y") == b"x"
        ts.wait(["a", "n"])
        assert ts.check(["a"]) and not ts.check(["a", "nope"])
        assert ts.num_keys() == 3
        assert ts.delete_key("a") and not ts.delete_key("a")
        ts.set_timeout(datetime.timedelta(milliseconds=100))
        with pytest.raises(Exception):
            ts.get("never")
        # torch's own wrappers accept it: PrefixStore and a one-rank gloo group through it
        prefixed = dist.PrefixStore("p", ts)
        prefixed.set("k", "v")
        assert store.get("t/p/k") == b"v"
        ts.close()


def test_state_round_trips_bit_for_bit_and_refuses_foreign_objects(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Linear(7, 3)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.1)
    net(torch.randn(4, 7)).sum().backward()
    optimizer.step()
    state = {"model": net.state_dict(), "optimizer": optimizer.state_dict(),
             "extra": {"half": torch.arange(5, dtype=torch.bfloat16), "empty": torch.empty(0, 3),
                       "view": torch.arange(12.0).reshape(3, 4).t(), "pos": (3, [1.5, "x"]), "none": None}}
    with Checkpoint(tmp_path, fsync=1) as ckpt:
        assert et.load_state(ckpt) is None
        et.save_state(ckpt, 9, state)
        step, back = et.load_state(ckpt)
    assert step == 9
    assert isinstance(back["model"], collections.OrderedDict)
    for name, tensor in net.state_dict().items():
        assert torch.equal(back["model"][name], tensor)
    moments = optimizer.state_dict()["state"][0]
    assert torch.equal(back["optimizer"]["state"][0]["exp_avg"], moments["exp_avg"])
    assert back["optimizer"]["param_groups"] == optimizer.state_dict()["param_groups"]
    assert back["extra"]["half"].dtype == torch.bfloat16 and torch.equal(back["extra"]["half"], state["extra"]["half"])
    assert back["extra"]["empty"].shape == (0, 3)
    assert torch.equal(back["extra"]["view"], state["extra"]["view"])
    assert back["extra"]["pos"] == (3, [1.5, "x"]) and back["extra"]["none"] is None
    optimizer.load_state_dict(back["optimizer"])  # what a trainer does with it
    with Checkpoint(tmp_path / "other", fsync=1) as ckpt:
        with pytest.raises(Exception) as info:
            et.save_state(ckpt, 1, {"bad": datetime.date(2020, 1, 1)})
        assert "not allowed" in str(info.value)
        assert ckpt.latest() is None


def run_ddp(ckpt_dir, out, *extra, launcher=()):
    elasticrun = os.path.join(os.environ.get("ELASTIC_BIN_DIR", os.path.join(ROOT, "bin")), "elasticrun")
    cmd = [elasticrun, "--standalone", "--nproc-per-node=3", "--max-restarts=2", "--in-process-recovery",
           *launcher, DDP_EXAMPLE, "--dir", str(ckpt_dir), "--steps", "24", "--every", "5", "--out", str(out), "--no-fsync"]
    result = subprocess.run(cmd + list(extra), env=clean_env(), capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def pids(stdout, generation):
    """rank -> pid of the lines a generation's workers printed."""
    found = {}
    for rank, pid in re.findall(r"rank (\d+)/\d+ pid (\d+) gen %d:" % generation, stdout):
        found.setdefault(int(rank), set()).add(int(pid))
    return found


def test_ddp_job_recovers_in_place_with_the_weights_of_an_uninterrupted_run(tmp_path):
    reference = run_ddp(tmp_path / "ref", tmp_path / "ref.pt")
    assert reference.count("done at step 24") == 3, reference
    failed = run_ddp(tmp_path / "kill", tmp_path / "kill.pt", "--kill-rank", "1", "--kill-at-step", "13")
    first, second = pids(failed, 1), pids(failed, 2)
    assert sorted(first) == [0, 1, 2] and sorted(second) == [0, 1, 2], failed
    for rank in (0, 2):  # the survivors kept their processes
        assert first[rank] == second[rank] and len(first[rank]) == 1, failed
        assert re.search(r"rank %d/3 pid \d+ gen 1: collective failed at step 13" % rank, failed), failed
    assert first[1] != second[1], failed  # only the killed rank was started again
    assert failed.count("gen 2: resume at step 10") == 3, failed
    assert failed.count("gen 2: done at step 24") == 3, failed
    want, got = torch.load(tmp_path / "ref.pt"), torch.load(tmp_path / "kill.pt")
    assert list(want) == list(got)
    for name in want:
        assert torch.equal(want[name], got[name]), name


def events_of(path, name):
    with open(path) as f:
        return [e for e in map(json.loads, f) if e["event"] == name]


def test_a_warm_spare_takes_the_killed_ranks_place_with_the_weights_of_an_uninterrupted_run(tmp_path):
    reference = run_ddp(tmp_path / "ref", tmp_path / "ref.pt")
    events = tmp_path / "events.jsonl"
    failed = run_ddp(tmp_path / "kill", tmp_path / "kill.pt", "--kill-rank", "1", "--kill-at-step", "13",
                     "--kill-waits-for-spare", launcher=("--warm-spares=1", "--event-log", str(events)))
    first, second = pids(failed, 1), pids(failed, 2)
    for rank in (0, 2):  # the survivors kept their processes
        assert first[rank] == second[rank] and len(first[rank]) == 1, failed
    parked = events_of(events, "spare_parked")
    promoted = events_of(events, "spare_promoted")
    assert len(promoted) == 1 and promoted[0]["rank"] == 1 and promoted[0]["generation"] == 2, promoted
    # the process that took rank 1 is the one parked before the kill, not a new one
    assert promoted[0]["pid"] == parked[0]["pid"] and second[1] == {parked[0]["pid"]}, (parked, failed)
    assert not [e for e in events_of(events, "worker_started") if e["generation"] == 2]
    phases = events_of(events, "recovery_phases")
    assert len(phases) == 1 and phases[0]["complete"] == 1 and phases[0]["promoted"] == 1, phases
    for key in ("stop_ms", "promote_ms", "regroup_ms", "restore_ms", "total_ms"):
        assert key in phases[0], phases
    assert failed.count("gen 2: done at step 24") == 3, failed
    want, got = torch.load(tmp_path / "ref.pt"), torch.load(tmp_path / "kill.pt")
    assert list(want) == list(got)
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert reference.count("done at step 24") == 3, reference


def test_a_warm_spare_with_memory_saves_every_step_restores_the_agreed_step_from_memory(tmp_path):
    # Rank 1 dies after training step 13, before saving it: the survivors'
    # memory saves of step 13 wait for its shard until the generation's end
    # cuts them short ("step 13 abandoned"); then all three ranks, the
    # promoted spare too, restore step 12 (the last every rank committed) from
    # this node's memory and end with the weights of an uninterrupted run.
    reference = run_ddp(tmp_path / "ref", tmp_path / "ref.pt")
    events = tmp_path / "events.jsonl"
    failed = run_ddp(tmp_path / "kill", tmp_path / "kill.pt", "--kill-rank", "1", "--kill-at-step", "13",
                     "--kill-before-save", "--memory-every", "1", "--step-seconds", "0.1", "--kill-waits-for-spare",
                     launcher=("--warm-spares=1", "--memory-ckpt", "--event-log", str(events)))
    first, second = pids(failed, 1), pids(failed, 2)
    for rank in (0, 2):  # the survivors kept their processes and abandoned the step
        assert first[rank] == second[rank] and len(first[rank]) == 1, failed
        assert re.search(r"rank %d/3 pid \d+ gen 1: step 13 abandoned: generation 1 ended" % rank, failed), failed
    parked, promoted = events_of(events, "spare_parked"), events_of(events, "spare_promoted")
    assert len(promoted) == 1 and promoted[0]["pid"] == parked[0]["pid"] == list(second[1])[0], (parked, failed)
    restored = [e for e in events_of(events, "checkpoint_restored") if e["generation"] == 2]
    assert sorted(e["rank"] for e in restored) == [0, 1, 2], restored
    assert {(e["step"], e["source"]) for e in restored} == {(12, "local")}, restored
    assert failed.count("gen 2: resume at step 12 from local") == 3, failed
    assert failed.count("gen 2: done at step 24") == 3, failed
    want, got = torch.load(tmp_path / "ref.pt"), torch.load(tmp_path / "kill.pt")
    assert list(want) == list(got)
    for name in want:
        assert torch.equal(want[name], got[name]), name
    assert reference.count("done at step 24") == 3, reference


def test_alone_a_group_of_one_and_no_recovery_to_wait_for(tmp_path):
    code = ("import elastic.torch as et, torch.distributed as dist\n"
            "info = et.init_process_group('gloo')\n"
            "print('world', dist.get_world_size(), 'rank', dist.get_rank(), 'attached', info.attached)\n"
            "assert et.reconfigured() is False\n"
            "try:\n    et.reconfigured(block=True)\nexcept RuntimeError as e:\n    print('raised', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "world 1 rank 0 attached False" in out.stdout
    assert "raised reconfigured(block=True): no agent" in out.stdout


def torchrun(*args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "--redirects", "2", "--tee", "2"] + list(args)  # Debian torch 1.13 needs both set
    return subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=400)


def test_under_plain_torchrun_the_examples_run_with_one_line_notices(tmp_path):
    trainer = os.path.join(ROOT, "examples", "python", "trainer.py")
    result = torchrun(trainer, "--steps", "7", "--every", "3", "--dir", str(tmp_path / "t"))
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):  # without a barrier a rank may finish before the other committed step 6
        assert "rank %d/2 start at step 0" % rank in result.stdout, result.stdout
        assert "rank %d/2 done at step 7 (latest checkpoint " % rank in result.stdout, result.stdout
    with Checkpoint(tmp_path / "t") as ckpt:
        assert ckpt.latest() == 6
    notices = [line for line in result.stderr.splitlines() if "elastic: barrier skipped" in line]
    assert len(notices) == 2, result.stderr  # once per process
    ddp = torchrun(DDP_EXAMPLE, "--dir", str(tmp_path / "d"), "--steps", "6", "--every", "3", "--no-fsync")
    assert ddp.returncode == 0, ddp.stdout + ddp.stderr
    assert ddp.stdout.count("done at step 6") == 2, ddp.stdout


def test_an_abort_about_a_generation_already_left_is_not_taken_for_a_new_one():
    # The abort hook runs just after the worker marked the change, so a poll()
    # can consume the change before the hook fires: that late event must not
    # tear down the next generation's group.
    class Hooks:
        def on_abort(self, fn):
            self.fire = fn

    hooks = Hooks()
    session = et._Session(hooks, owned=False)
    session.generation = 4
    assert session.abort_pending() is False
    hooks.fire(3, "late news about generation 3")
    assert session.abort_pending() is False
    assert not session.aborted.is_set()
    hooks.fire(4, "rank 1 died")
    assert session.abort_pending() is True
    assert session.abort_pending() is True  # stays pending until reconfigured() handles it


def test_load_state_skips_a_corrupt_newest_step_for_the_one_before(tmp_path, capfd):
    weights = {"w": torch.arange(1 << 18, dtype=torch.float32)}  # 1 MiB: the middle of a shard is tensor data
    with Checkpoint(tmp_path, fsync=1, compression=0, verify=1) as ckpt:
        et.save_state(ckpt, 1, {"model": weights, "data": {"step": 1}})
        et.save_state(ckpt, 2, {"model": {"w": weights["w"] + 1}, "data": {"step": 2}})
    shards = [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size > (1 << 19) and "2" in p.parent.name]
    assert len(shards) == 1, sorted(str(p) for p in tmp_path.rglob("*"))
    with open(shards[0], "r+b") as f:
        f.seek(shards[0].stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    with Checkpoint(tmp_path, verify=1) as ckpt:
        assert ckpt.latest() == 2  # manifests alone do not see it
        step, state = et.load_state(ckpt)
        assert step == 1 and torch.equal(state["model"]["w"], weights["w"])
        with pytest.raises(elastic.ElasticError) as info:
            et.load_state(ckpt, 2)
        assert info.value.code == elastic.errors.ECORRUPT
    assert "checkpoint step 2 is corrupt" in capfd.readouterr().err


BLOCKED_TRAINER = r'''
import datetime, os, signal, sys, time
import torch, torch.distributed as dist
import elastic.torch as et

def say(info, text):
    print("rank %d/%d pid %d gen %d: %s" % (info.rank, info.world_size, os.getpid(), info.generation, text),
          flush=True)

info = et.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
worker = et.worker()
say(info, "up")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))  # holds the group, as in training
if info.generation == 1:
    dist.barrier()
    if info.rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    if info.rank == 1:
        started = time.monotonic()
        try:
            dist.recv(torch.zeros(1), src=0)  # rank 0 is alive and never sends: only the abort can end this
            say(info, "recv returned")
        except RuntimeError:
            say(info, "recv failed after %.1f s" % (time.monotonic() - started))
        et.reconfigured(block=True)
    else:  # rank 0 learns of the failure from the agent while it keeps its DDP model
        deadline = time.monotonic() + 60
        while not et.reconfigured():
            if time.monotonic() > deadline:
                sys.exit("rank 0: the generation never ended")
            time.sleep(0.01)
    info = worker.info()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))  # as the new rank 2 does
dist.barrier()
say(info, "done")
del model
et.destroy_process_group()
'''


def test_the_agents_abort_wakes_a_rank_blocked_on_a_live_peer(tmp_path):
    # A gloo op blocked on a survivor never sees the dead rank; torch 1.13 has
    # no gloo abort and destroy leaves the sockets open while DDP holds the
    # group. The abort hook must break it (else: the group's 10 min timeout).
    trainer = tmp_path / "blocked.py"
    trainer.write_text(BLOCKED_TRAINER)
    elasticrun = os.path.join(os.environ.get("ELASTIC_BIN_DIR", os.path.join(ROOT, "bin")), "elasticrun")
    cmd = [elasticrun, "--standalone", "--nproc-per-node=3", "--max-restarts=1", "--in-process-recovery", str(trainer)]
    result = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    blocked = re.search(r"rank 1/3 pid (\d+) gen 1: recv failed after ([0-9.]+) s", out)
    assert blocked, out
    assert float(blocked.group(2)) < 60, out
    first, second = pids(out, 1), pids(out, 2)
    assert sorted(first) == [0, 1, 2] and sorted(second) == [0, 1, 2], out
    for rank in (0, 1):  # the survivors kept their processes
        assert first[rank] == second[rank], out
    assert first[2] != second[2], out
    assert out.count("gen 2: done") == 3, out
