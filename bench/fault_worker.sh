#!/bin/sh
# The worker both launchers run in bench/run_faults.sh: it logs when it starts
# (with the world it was started into) and when it is told to stop, in wall
# milliseconds, to $FAULT_LOG, then sleeps until stopped.
echo "start $(date +%s%3N) host=$FAULT_HOST world=$WORLD_SIZE rank=$RANK" >> "$FAULT_LOG"
trap 'echo "stop $(date +%s%3N) host=$FAULT_HOST world=$WORLD_SIZE rank=$RANK" >> "$FAULT_LOG"; exit 143' TERM INT
sleep 600 &
wait
