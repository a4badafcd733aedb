#!/usr/bin/env python3
"""examples/python/ddp_elastic.py with the Job's memory_every and disk_every
taken from JOB_MEMORY_EVERY / JOB_DISK_EVERY (test_torch_job.py): a restored
step older than the one in flight makes the Job replay batches, within the
pass or across an epoch's end. Arguments are the example's."""

import os
import runpy
import sys

import elastic._torch_job as job_module

_init = job_module.Job.__init__


def _init_with_env(self, *args, **kwargs):
    kwargs["memory_every"] = int(os.environ["JOB_MEMORY_EVERY"])
    kwargs["disk_every"] = int(os.environ.get("JOB_DISK_EVERY", "0"))
    _init(self, *args, **kwargs)


job_module.Job.__init__ = _init_with_env
example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python",
                       "ddp_elastic.py")
sys.argv[0] = example
runpy.run_path(example, run_name="__main__")
