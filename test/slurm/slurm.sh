# A real Slurm cluster on one machine, for tests: slurmctld, N slurmd and
# munged (slurm-wlm 22.05, Debian), each host a network namespace with its
# own address on a bridge, plus a UTS namespace (its own hostname) and a mount
# namespace (a private /etc/hosts, so node names resolve inside jobs). A bash
# library: source it, then slurm_skip_unless_able; slurm_up 4. Usage and the
# recipe's reasons: test/slurm/README.md.
#
# Names: namespaces "<tag>-<creator pid>-ctl|n1..", files under
# /tmp/<tag>-<creator pid> (short: munge's socket path must fit a sun_path).
# Teardown (the EXIT trap) SIGKILLs every process inside our namespaces (the
# daemons, munged, slurmstepd, job tasks) and deletes them; a later
# slurm_up sweeps what a SIGKILLed test left (creator pid gone).

SLURMT_TAG=${SLURMT_TAG:-slurmt}
SLURMT_PREFIX="${SLURMT_TAG}-$$-"
SLURMT_BASE="/tmp/${SLURMT_TAG}-$$"
SLURMT_NET="10.252.$(($$ % 250 + 1))" # exists only inside our namespaces
SLURMT_NODES=0
SLURMT_SLURMD_TIMEOUT=${SLURMT_SLURMD_TIMEOUT:-5}
SLURMT_MSG_TIMEOUT=${SLURMT_MSG_TIMEOUT:-2}
SLURMT_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ELASTICRUN="${ELASTIC_BIN_DIR:-$SLURMT_SRC/bin}/elasticrun"
export SLURM_CONF="$SLURMT_BASE/etc/slurm.conf"

slurm_log() { printf '[slurm %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
slurm_now_ms() { echo $(($(date +%s%N) / 1000000)); }

# slurm_skip_unless_able: exits 77 (the runner's "skipped") with the reason
# when this machine cannot run the cluster.
slurm_skip_unless_able() {
    if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root (network namespaces, slurmd)" >&2; exit 77; fi
    local tool
    for tool in slurmctld slurmd munged srun sbatch scontrol squeue sinfo ip nsenter unshare; do
        command -v "$tool" >/dev/null 2>&1 ||
            { echo "SKIP: $tool is not installed (apt-get install slurm-wlm munge)" >&2; exit 77; }
    done
    [ -d /sys/fs/cgroup ] || { echo "SKIP: no /sys/fs/cgroup (slurmd 22.05 needs one mounted)" >&2; exit 77; }
    local probe="${SLURMT_PREFIX}probe"
    ip netns add "$probe" 2>/dev/null ||
        { echo "SKIP: ip netns add fails here (no CAP_SYS_ADMIN or no netns)" >&2; exit 77; }
    ip netns del "$probe"
    [ -x "$ELASTICRUN" ] || { echo "FAIL: no $ELASTICRUN (run make)" >&2; exit 1; }
}

slurm_ns() { case $1 in ctl) echo "${SLURMT_PREFIX}ctl" ;; *) echo "${SLURMT_PREFIX}$1" ;; esac; }
slurm_host() { case $1 in ctl) echo slurmctl ;; *) echo "$1" ;; esac; }
slurm_addr() { case $1 in ctl) echo "$SLURMT_NET.2" ;; node*) echo "$SLURMT_NET.$((10 + ${1#node}))" ;; esac; }
slurm_nodes() { local i; for ((i = 1; i <= SLURMT_NODES; i++)); do echo "node$i"; done; }

_slurm_kill_inside() {
    local p
    for p in $(ip netns pids "$1" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
}

# Namespaces and files of our tag whose creator is gone (a test killed by the runner).
slurm_sweep_stale() {
    local name pid
    for name in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case "$name" in "${SLURMT_TAG}"-[0-9]*-*) ;; *) continue ;; esac
        pid=${name#"${SLURMT_TAG}"-}; pid=${pid%%-*}
        [ -d "/proc/$pid" ] && continue
        slurm_log "sweeping stale namespace $name (creator $pid is gone)"
        _slurm_kill_inside "$name"
        ip netns del "$name" 2>/dev/null || true
    done
    for name in /tmp/"${SLURMT_TAG}"-[0-9]*; do
        [ -d "$name" ] || continue
        pid=${name##*-}
        case "$pid" in *[!0-9]*) continue ;; esac
        [ -d "/proc/$pid" ] || rm -rf "$name"
    done
}

_slurm_write_conf() {
    local etc=$SLURMT_BASE/etc n
    mkdir -p "$etc" "$SLURMT_BASE/munge" "$SLURMT_BASE/log" "$SLURMT_BASE/state/ctl"
    chmod 755 "$SLURMT_BASE" "$etc" "$SLURMT_BASE/munge"
    # munged refuses a key others may read (0400, root) and a group-writable directory.
    dd if=/dev/urandom of="$etc/munge.key" bs=1 count=1024 status=none
    chmod 400 "$etc/munge.key"
    { echo "127.0.0.1 localhost"; echo "$(slurm_addr ctl) slurmctl"
      for n in $(slurm_nodes); do echo "$(slurm_addr "$n") $n"; done; } >"$etc/hosts"
    echo "nameserver 127.0.0.1" >"$etc/resolv.conf" # no DNS route: lookups fail at once
    cat >"$SLURM_CONF" <<EOF
ClusterName=slurmt
SlurmctldHost=slurmctl($(slurm_addr ctl))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURMT_BASE/munge/munge.socket
StateSaveLocation=$SLURMT_BASE/state/ctl
SlurmdSpoolDir=$SLURMT_BASE/state/%n
SlurmctldPidFile=$SLURMT_BASE/slurmctld.pid
SlurmdPidFile=$SLURMT_BASE/slurmd.%n.pid
SlurmctldLogFile=$SLURMT_BASE/log/slurmctld.log
SlurmdLogFile=$SLURMT_BASE/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
SlurmdTimeout=$SLURMT_SLURMD_TIMEOUT
SlurmctldTimeout=10
MessageTimeout=$SLURMT_MSG_TIMEOUT
TCPTimeout=2
InactiveLimit=0
KillWait=5
MinJobAge=600
MailProg=/bin/true
EOF
    for n in $(slurm_nodes); do
        echo "NodeName=$n NodeAddr=$(slurm_addr "$n") CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN"
    done >>"$SLURM_CONF"
    echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$SLURM_CONF"
}

_slurm_net_up() {
    local sw h ns
    sw=$(slurm_ns sw)
    ip netns add "$sw" || return 1
    ip -n "$sw" link set lo up
    ip -n "$sw" link add br0 type bridge
    ip -n "$sw" link set br0 up
    for h in ctl $(slurm_nodes); do
        ns=$(slurm_ns "$h")
        ip netns add "$ns" || return 1
        # Both ends created inside our namespaces: the root namespace never sees them.
        ip link add name eth0 netns "$ns" type veth peer name "p-$h" netns "$sw" || return 1
        ip -n "$sw" link set "p-$h" master br0 up
        ip -n "$ns" addr add "$(slurm_addr "$h")/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
    done
}

# slurm_on HOST CMD...: runs CMD as host HOST (ctl, node1..): its network,
# its hostname, its /etc/hosts. nsenter --net and not "ip netns exec", which
# remounts /sys and hides /sys/fs/cgroup (slurmd 22.05 then refuses to start).
slurm_on() {
    local h=$1; shift
    nsenter --net=/run/netns/"$(slurm_ns "$h")" unshare --uts --mount --propagation private sh -c '
        mount --bind "$0/hosts" /etc/hosts && mount --bind "$0/resolv.conf" /etc/resolv.conf &&
        hostname "$1" && shift && exec "$@"' "$SLURMT_BASE/etc" "$(slurm_host "$h")" "$@"
}
slurm_ctl() { slurm_on ctl "$@"; }

# slurm_wait TIMEOUT_S CMD...: polls CMD every 0.2 s until it succeeds.
slurm_wait() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do [ "$SECONDS" -lt "$deadline" ] || return 1; sleep 0.2; done
}
_slurm_all_idle() { [ "$(slurm_ctl sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l)" -ge "$SLURMT_NODES" ]; }

_slurm_start_slurmd() {
    mkdir -p "$SLURMT_BASE/state/$1"
    setsid bash -c "$(declare -f slurm_on slurm_ns slurm_host); SLURMT_PREFIX='$SLURMT_PREFIX' SLURMT_BASE='$SLURMT_BASE';
        slurm_on $1 slurmd -D -N $1 -f '$SLURM_CONF'" </dev/null >>"$SLURMT_BASE/log/slurmd.$1.out" 2>&1 &
    disown
}

# slurm_up N: munged, slurmctld and N slurmd (node1..nodeN), all idle; installs the teardown trap.
slurm_up() {
    local t0; t0=$(slurm_now_ms)
    SLURMT_NODES=$1
    slurm_sweep_stale
    trap slurm_down EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    rm -rf "$SLURMT_BASE"
    _slurm_write_conf && _slurm_net_up || { slurm_log "cluster network failed"; return 1; }
    # munged lives in the controller's namespace (its socket is a file, seen
    # from every namespace), so teardown finds it with the rest.
    setsid nsenter --net=/run/netns/"$(slurm_ns ctl)" munged --force -F \
        --socket="$SLURMT_BASE/munge/munge.socket" --key-file="$SLURMT_BASE/etc/munge.key" \
        --pid-file="$SLURMT_BASE/munge/munged.pid" --seed-file="$SLURMT_BASE/munge/seed" \
        --log-file="$SLURMT_BASE/log/munged.log" </dev/null >>"$SLURMT_BASE/log/munged.out" 2>&1 &
    disown # teardown kills it by namespace: no "Killed" job notice
    slurm_wait 10 test -S "$SLURMT_BASE/munge/munge.socket" || { slurm_log "munged did not start"; return 1; }
    setsid bash -c "$(declare -f slurm_on slurm_ns slurm_host); SLURMT_PREFIX='$SLURMT_PREFIX' SLURMT_BASE='$SLURMT_BASE';
        slurm_on ctl slurmctld -D -c -i -f '$SLURM_CONF'" </dev/null >>"$SLURMT_BASE/log/slurmctld.out" 2>&1 &
    disown
    slurm_wait 30 slurm_ctl scontrol ping || { slurm_log "slurmctld not answering"; slurm_dump; return 1; }
    local n
    for n in $(slurm_nodes); do _slurm_start_slurmd "$n"; done
    slurm_wait 60 _slurm_all_idle || { slurm_log "nodes not idle"; slurm_dump; return 1; }
    slurm_log "cluster up: slurmctld + $SLURMT_NODES slurmd in $(($(slurm_now_ms) - t0)) ms"
}

# slurm_down: kills everything inside our namespaces, deletes them and our files.
slurm_down() {
    local h left deadline
    trap - EXIT
    for h in ctl $(slurm_nodes); do _slurm_kill_inside "$(slurm_ns "$h")"; done
    deadline=$((SECONDS + 10))
    while :; do
        left=""
        for h in ctl $(slurm_nodes); do left="$left$(ip netns pids "$(slurm_ns "$h")" 2>/dev/null)"; done
        [ -z "$left" ] && break
        [ "$SECONDS" -lt "$deadline" ] || { slurm_log "WARNING: still alive in our namespaces: $left"; break; }
        sleep 0.1
    done
    for h in ctl $(slurm_nodes) sw; do ip netns del "$(slurm_ns "$h")" 2>/dev/null || true; done
    [ -n "${SLURMT_KEEP:-}" ] || rm -rf "$SLURMT_BASE"
    SLURMT_NODES=0
}

# slurm_crash NODE: SIGKILL every process of NODE (slurmd, slurmstepd, tasks), as a lost host.
slurm_crash() {
    local p
    for p in $(ip netns pids "$(slurm_ns "$1")" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    slurm_log "crashed $1"
}

# slurm_job_field JOBID FIELD: one field of `scontrol show job` (JobState, NodeList, Restarts...).
slurm_job_field() {
    slurm_ctl scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}
slurm_node_state() { slurm_ctl sinfo -h -N -n "$1" -o %T 2>/dev/null | head -n 1; }
slurm_node_reason() { slurm_ctl scontrol -o show node "$1" 2>/dev/null | sed -n 's/.* Reason=\(.*\) Comment.*/\1/p; s/.* Reason=\(.*\)$/\1/p' | head -n 1; }

# slurm_sbatch ARGS...: submits; prints the job id.
slurm_sbatch() { slurm_ctl sbatch --parsable "$@" | cut -d';' -f1; }

# slurm_wait_job_state JOBID REGEX TIMEOUT_S
slurm_wait_job_state() {
    local deadline=$((SECONDS + $3))
    until [[ "$(slurm_job_field "$1" JobState)" =~ ^($2)$ ]]; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# slurm_wait_node_state NODE REGEX TIMEOUT_S (sinfo's %T: idle, down*, drained...)
slurm_wait_node_state() {
    local deadline=$((SECONDS + $3))
    until [[ "$(slurm_node_state "$1")" =~ ^($2)$ ]]; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# slurm_wait_file FILE REGEX TIMEOUT_S: grep -E with a deadline.
slurm_wait_file() {
    local deadline=$((SECONDS + $3))
    until grep -Eq -- "$2" "$1" 2>/dev/null; do [ "$SECONDS" -lt "$deadline" ] || return 1; sleep 0.1; done
}

slurm_dump() {
    echo "--- sinfo:" >&2; slurm_ctl sinfo -N -o '%N %T %E' >&2 2>/dev/null
    echo "--- jobs:" >&2; slurm_ctl squeue -o '%i %T %R %N' >&2 2>/dev/null
    local f
    for f in "$SLURMT_BASE"/log/slurmctld.log "$SLURMT_BASE"/log/*.out; do
        [ -s "$f" ] && { echo "--- $f:" >&2; tail -n 15 "$f" >&2; }
    done
}

slurm_fail() {
    echo "FAIL: $*" >&2
    slurm_dump
    local f
    for f in "${SLURMT_JOB_DIR:-/nonexistent}"/*; do
        [ -f "$f" ] && { echo "--- $f:" >&2; tail -n 30 "$f" >&2; }
    done
    exit 1
}
