/*
 * The shipped profiles: what `elasticctl simulate` uses without --profile.
 * This is what bench/run_goodput.sh wrote on the development machine (2
 * loaded cores, a local disk); `make bench` writes this machine's own to
 * build/bench/goodput.profile and simulates with them. Every value carries
 * its source: measured here, a named assumption (what one machine cannot
 * measure: CUDA/NCCL at scale, a real node's imports, the model), a setting,
 * or a target (the memory tier and warm spares, not measured end to end yet).
 */
#include "elasticctl/simulate.h"

/* Lines more than one profile shares, written once: what elasticrun's
 * detection measured, a node replaced by the scheduler, elasticrun's full
 * restart, a cold interpreter and CUDA/NCCL start, the disk's restore rate,
 * and the memory tier's targets. */
#define ELASTICRUN_DETECTION                                                                     \
    "detect_software_s 0.0040 measured: elasticrun + demo trainer, SIGKILL and SIGSTOP "         \
    "(bench/run_goodput.sh, elasticctl goodput)\n"                                               \
    "detect_gpu_s 0.0040 measured: elasticrun + demo trainer, SIGKILL and SIGSTOP "              \
    "(bench/run_goodput.sh, elasticctl goodput) (a GPU fault ends its worker: as software)\n"    \
    "detect_host_s 2.004 measured: a frozen node evicted, next generation (rdzv_bench --freeze " \
    "16; "                                                                                       \
    "lease 2 s)\n"                                                                               \
    "detect_hang_s 60 setting: --hang-timeout 60 (10 steps without a heartbeat)\n"               \
    "stop_s 0.2075 measured: elasticrun + demo trainer, SIGKILL and SIGSTOP "                    \
    "(bench/run_goodput.sh, "                                                                    \
    "elasticctl goodput)\n"                                                                      \
    "rdzv_base_s 0.0000 measured: rdzv_bench forming at 16 nodes\n"                              \
    "rdzv_per_node_ms 0.542 measured: rdzv_bench, 16 -> 256 nodes\n"
#define NO_SPARE \
    "replace_s 300 assumption: no spare; the scheduler provides a replacement node in 5 minutes\n"
#define ELASTICRUN_FULL_RESTART                                                                   \
    "restart_s 3.603 measured: elasticrun full restart of a DDP job, kill -> every rank trained " \
    "again (bench/torch_recovery.py)\n"
#define INTERPRETER_AND_INIT_COLD                                                             \
    "interpreter_s 10 assumption: a real node's Python + torch import beyond this machine's " \
    "(shared filesystem)\n"                                                                   \
    "init_s 60 assumption: CUDA context + NCCL communicators of 16k ranks after a full restart\n"
#define DISK_RESTORE                                                                              \
    "restore_gbps 0.1075 measured: checkpoint load from this machine's disk (ckpt_bench, cold), " \
    "a "                                                                                          \
    "node's rate / 8 GPUs\n"
#define MEMORY_TIER_IO                                                                            \
    "restore_gbps 25 target: the memory tier restores from a peer's host memory over a 200 Gb/s " \
    "NIC per GPU (not measured end to end yet)\n"                                                 \
    "save_gbps 250 target: each step's snapshot to pinned host memory overlaps the next step; "   \
    "10% "                                                                                        \
    "of a 25 GB/s copy on the path\n"

/* torchrun's recovery, shared by its two rows: a 30-minute interval (as
 * the README's anchor says people run it) and its own best interval (a
 * fair peer: the same checkpoint tuning the elasticrun rows get). */
#define TORCHRUN_RECOVERY                                                                          \
    "detect_software_s 0 measured: within restart_s\n"                                             \
    "detect_gpu_s 0 measured: within restart_s\n"                                                  \
    "detect_host_s 600 assumption: a dead node is noticed when the survivors' NCCL watchdog "      \
    "times "                                                                                       \
    "out (10 minutes)\n"                                                                           \
    "detect_hang_s 600 assumption: a hang is caught only by the 10-minute NCCL timeout\n"          \
    "stop_s 0 measured: within restart_s\n"                                                        \
    "rdzv_base_s 1.267 measured: torch c10d rendezvous forming at 4 and 16 nodes "                 \
    "(bench/rdzv_torch.py)\n"                                                                      \
    "rdzv_per_node_ms 0.000 measured: torch c10d rendezvous forming at 4 and 16 nodes "            \
    "(bench/rdzv_torch.py)\n" NO_SPARE                                                             \
    "restart_s 5.346 measured: torchrun full restart (monitor 5 s), kill -> every rank trained "   \
    "again (bench/torch_recovery.py)\n" INTERPRETER_AND_INIT_COLD DISK_RESTORE                     \
    "save_gbps 0.07443 measured: a synchronous save to this disk (ckpt_bench; torch.save + fsync " \
    "is no faster, bench/run_ckpt.sh) / 8 GPUs\n"

static const char default_profiles[] =
    "# bench/run_goodput.sh on the development machine (2 loaded cores, local disk), 2026-12-01\n"
    "model\n"
    "step_s 6 assumption: Llama 3 405B on 16,384 H100s, 16M tokens a step at ~400 TFLOPS/GPU, kept "
    "at every scale\n"
    "state_gb 6480 assumption: 405B parameters x 16 bytes (bf16 weights and gradients, fp32 "
    "master, Adam m and v)\n"
    "gpus_per_node 8 assumption: 8-GPU HGX nodes\n"
    "rate_per_gpu_hour 1.9733e-05 Llama 3: 419 unexpected interruptions in 54 days on 16,384 GPUs\n"
    "\n"
    "profile elasticrun-disk\n" ELASTICRUN_DETECTION NO_SPARE ELASTICRUN_FULL_RESTART
        INTERPRETER_AND_INIT_COLD DISK_RESTORE
    "save_gbps 0.5825 measured: elastic_ckpt_save_async stall (ckpt_bench), a node's rate / 8 "
    "GPUs\n"
    "interval_s 0 chosen: the best interval the simulation finds\n"
    "every_steps 0 disk only\n"
    "\n"
    "profile elasticrun-memory\n" ELASTICRUN_DETECTION NO_SPARE ELASTICRUN_FULL_RESTART
        INTERPRETER_AND_INIT_COLD MEMORY_TIER_IO "interval_s 0 follows every_steps\n"
    "every_steps 1 target: the memory tier keeps every step, at most one step redone\n"
    "\n"
    "profile elasticrun-spares\n" ELASTICRUN_DETECTION
    "replace_s 0 target: a warm spare waits in the rendezvous and takes the lost node's place\n"
    "restart_s 1.329 measured: in-process recovery, kill -> every rank trained again "
    "(bench/torch_recovery.py)\n"
    "interpreter_s 0 target: survivors recover in process, the spare started ahead: no interpreter "
    "starts\n"
    "init_s 10 assumption: NCCL communicators rebuilt at 16k ranks, CUDA contexts "
    "kept\n" MEMORY_TIER_IO "interval_s 0 follows every_steps\n"
    "every_steps 1 target: as elasticrun-memory\n"
    "\n"
    "profile torchrun\n" TORCHRUN_RECOVERY
    "interval_s 1800 setting: a 30-minute checkpoint interval\n"
    "every_steps 0 disk only\n"
    "\n"
    "profile torchrun-best-interval\n" TORCHRUN_RECOVERY
    "interval_s 0 chosen: the best interval the simulation finds for torchrun (a fair peer)\n"
    "every_steps 0 disk only\n";

const char *sim__default_profiles(void)
{
    return default_profiles;
}
