/*
 * elasticrun's --help text. Kept beside the parser's flag table (args.c);
 * docs/OPERATIONS.md has the long form.
 */
#include "agent/agent.h"

static const char usage_text[] =
    "usage: elasticrun [flags] program [args...]\n"
    "\n"
    "A drop-in torchrun: every flag may be written with dashes or underscores,\n"
    "as --flag value or --flag=value, and read from PET_<FLAG> when absent.\n"
    "\n"
    "membership:\n"
    "  --nnodes N|MIN:MAX          nodes in the job (default 1)\n"
    "  --nproc-per-node N|auto|cpu|gpu  workers on this node (default 1)\n"
    "  --rdzv-backend c10d|static  c10d: elastic membership on the embedded store (default static)\n"
    "  --rdzv-endpoint HOST[:PORT] the job's store; the agent at that address hosts it\n"
    "  --rdzv-id ID                the job's run id (default none)\n"
    "  --rdzv-conf K=V,...         join_timeout, last_call_timeout, close_timeout, read_timeout,\n"
    "                              keep_alive_interval, keep_alive_max_attempt, is_host\n"
    "  --standalone                one node, its own store on a free port, a random run id\n"
    "  --max-restarts N            job-wide budget of failures (default 0)\n"
    "  --monitor-interval SECONDS  accepted; exits are events, it only paces polling probes\n"
    "  --role NAME                 ROLE_NAME of the workers (default default)\n"
    "  --local-addr ADDR           this node's address for the other nodes\n"
    "  --node-rank N, --master-addr ADDR, --master-port PORT   static backend\n"
    "\n"
    "program:\n"
    "  --no-python                 run the program itself instead of python3 program\n"
    "  -m, --module                python3 -m program\n"
    "  --run-path                  accepted (same as the default)\n"
    "  --start-method M            accepted (workers are always exec'd)\n"
    "\n"
    "output:\n"
    "  --log-dir DIR               logs per generation and rank\n"
    "  -r, --redirects STD         0-3 or rank:std,... : send stdout(1)/stderr(2) to log files only\n"
    "  -t, --tee STD               same, and to the console with a [rank]: prefix\n"
    "\n"
    "elasticrun's own:\n"
    "  --grace-period SECONDS      SIGTERM to SIGKILL when stopping workers (default 5)\n"
    "  --hang-timeout SECONDS      a worker silent this long is hung (0: off)\n"
    "  --event-log PATH            JSONL events: generations, workers, failures, restarts\n"
    "  --error-file PATH           root-cause JSON (default $TORCHELASTIC_ERROR_FILE)\n"
    "  -h, --help                  this text\n"
    "  --version                   the library version\n";

ELASTIC_EXTERN const char *elastic_agent_usage(void) { return usage_text; }
