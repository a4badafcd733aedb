#!/usr/bin/env bash
# straggler_spare.sh on etcd: job-wide scores go through each generation's
# job store (hosted by its group rank 0), the eviction through etcd.
SPARE_BACKEND=etcd exec bash "$(dirname "$0")/straggler_spare.sh"
