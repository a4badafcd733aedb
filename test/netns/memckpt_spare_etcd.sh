#!/usr/bin/env bash
# memckpt_spare.sh on etcd: the job's one restore plan goes through each
# generation's job store (hosted by its group rank 0, maybe the lost node).
MEMCKPT_BACKEND=etcd exec bash "$(dirname "$0")/memckpt_spare.sh"
