"""The worker API alone (a group of one) and the example trainer, alone and
under elasticrun with two workers: heartbeats, checkpoints and resume."""

import os
import subprocess
import sys

import pytest

from elastic import ElasticError, Worker, errors

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TRAINER = os.path.join(ROOT, "examples", "python", "trainer.py")
AGENT_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RESTART_COUNT",
              "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in AGENT_VARS}
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env.update(extra)
    return env


def test_alone_the_worker_is_a_group_of_one_with_a_private_store():
    if any(v in os.environ for v in AGENT_VARS):
        pytest.skip("the test process itself runs under an agent")
    with Worker() as worker:
        info = worker.info()
        assert (info.rank, info.world_size, info.local_rank, info.attached) == (0, 1, 0, False)
        for step in range(1, 4):
            worker.heartbeat(step)
            assert worker.poll() is False
        worker.barrier(timeout_ms=5000)
        store = worker.store()
        assert store is not None
        store.set("k", b"v")
        assert store.get("k") == b"v"
    with pytest.raises(ElasticError) as info:
        worker.heartbeat(4)
    assert info.value.code == errors.ECLOSED


def test_a_malformed_rank_fails_init_naming_the_variable():
    code = ("import elastic\n"
            "try:\n    elastic.Worker()\n"
            "except elastic.ElasticError as e:\n    print(e.name, e.detail)\n")
    out = subprocess.run([sys.executable, "-c", code], env=clean_env(RANK="x", WORLD_SIZE="2"),
                         capture_output=True, text=True, timeout=60)
    assert "ELASTIC_EINVAL" in out.stdout and "RANK" in out.stdout, out.stdout + out.stderr


def run_trainer(ckpt_dir, steps, *prefix):
    cmd = list(prefix) + [TRAINER, "--steps", str(steps), "--every", "3", "--dir", str(ckpt_dir)]
    return subprocess.run(cmd, env=clean_env(PYTHON_EXEC=sys.executable), capture_output=True, text=True,
                          timeout=240)


def test_trainer_alone_checkpoints_and_resumes(tmp_path):
    first = run_trainer(tmp_path, 7, sys.executable)
    assert first.returncode == 0, first.stderr
    assert "rank 0/1 start at step 0" in first.stdout
    assert "rank 0/1 done at step 7 (latest checkpoint 6)" in first.stdout
    second = run_trainer(tmp_path, 10, sys.executable)
    assert second.returncode == 0, second.stderr
    assert "rank 0/1 start at step 6" in second.stdout
    assert "rank 0/1 done at step 10 (latest checkpoint 9)" in second.stdout


def test_trainer_under_elasticrun_runs_attached_ranks_and_resumes_at_another_world_size(tmp_path, bin_dir):
    elasticrun = os.path.join(bin_dir, "elasticrun")
    result = run_trainer(tmp_path, 7, elasticrun, "--standalone", "--nproc-per-node=2")
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in (0, 1):
        assert "rank %d/2 start at step 0 attached" % rank in result.stdout, result.stdout
        assert "rank %d/2 done at step 7 (latest checkpoint 6)" % rank in result.stdout, result.stdout
    again = run_trainer(tmp_path, 9, elasticrun, "--standalone", "--nproc-per-node=3", "--no-python")
    assert again.returncode == 0, again.stdout + again.stderr
    for rank in (0, 1, 2):
        assert "rank %d/3 start at step 6 attached" % rank in again.stdout, again.stdout
        assert "rank %d/3 done at step 9 (latest checkpoint 9)" % rank in again.stdout, again.stdout
