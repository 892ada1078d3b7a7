#!/usr/bin/env bash
# A real single-node SLURM for the cluster tests (tests/test_slurm.py, marker `slurm`).
#
#   .ci/slurm.sh start   install Debian's slurmctld/slurmd/munge/slurm-client when absent, write a
#                        slurm.conf for this machine, start munged, slurmctld and slurmd as processes
#                        of our own and wait until `sinfo` shows the node idle
#   .ci/slurm.sh stop    stop exactly the daemons `start` started (by the pids it recorded)
#   .ci/slurm.sh env     print the environment lines the tests need (SLURM_CONF=...)
#
# Why by hand rather than systemd: CI containers have no init system, and stopping by recorded pid
# never touches a SLURM the machine may already run. No accounting database: the executor plugin
# is told to poll squeue instead (see workflow/profiles/slurm/config.yaml).
set -euo pipefail

state="${CHAKRA_PIPE_SLURM_DIR:-/tmp/chakra-pipe-slurm}"
conf="$state/slurm.conf"

die() { echo ".ci/slurm.sh: $*" >&2; exit 1; }

install_packages() {
    local missing=()
    for cmd in slurmctld slurmd munged sinfo; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]} and not root: cannot apt-get install them"
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get on this machine"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd munge slurm-client >/dev/null
}

write_conf() {
    local host cpus mem_mb
    host="$(hostname -s)"
    cpus="$(nproc --all)"
    # RealMemory a little under MemTotal: slurmd refuses a node that reports less than configured.
    mem_mb="$(awk '/^MemTotal:/ {printf "%d", $2 / 1024 * 0.95}' /proc/meminfo)"
    mkdir -p "$state/spool/ctld" "$state/spool/d" "$state/log" "$state/run"
    cat >"$conf" <<EOF
# Written by .ci/slurm.sh for one machine: $host, $cpus CPU(s), ${mem_mb} MB.
ClusterName=chakra-ci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldPort=${CHAKRA_PIPE_SLURMCTLD_PORT:-6817}
SlurmdPort=${CHAKRA_PIPE_SLURMD_PORT:-6818}
StateSaveLocation=$state/spool/ctld
SlurmdSpoolDir=$state/spool/d
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
# More tasks than cores: the node's CPUs are shared (the tests run 4 ranks on small machines).
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        mkdir -p /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p "$state/munge"
    chown -R root:root /etc/munge "$state/munge"
    munged --force --key-file=/etc/munge/munge.key --socket="$state/munge/munge.socket" \
        --pid-file="$state/munge/munged.pid" --log-file="$state/log/munged.log" \
        --seed-file="$state/munge/munged.seed"
}

# Clients read /etc/slurm/slurm.conf unless SLURM_CONF says otherwise, and Snakemake's SLURM plugin
# deletes every SLURM_* variable before it submits: link the default path to our file when it is free.
link_default_conf() {
    local etc=/etc/slurm/slurm.conf
    if [ -L "$etc" ] && [ "$(readlink "$etc")" = "$conf" ]; then
        return 0
    fi
    if [ -e "$etc" ] || [ -L "$etc" ]; then
        echo ".ci/slurm.sh: $etc is not ours; clients need SLURM_CONF=$conf" >&2
        return 0
    fi
    mkdir -p /etc/slurm
    ln -s "$conf" "$etc"
    echo "$etc" >"$state/linked"
}

start() {
    if [ -f "$state/pids" ]; then
        stop
    fi
    install_packages
    write_conf
    start_munge
    # The daemons find munge's socket through their auth option; clients through the same option.
    sed -i "1a AuthInfo=socket=$state/munge/munge.socket" "$conf"
    link_default_conf
    export SLURM_CONF="$conf"
    slurmctld -f "$conf"
    slurmd -f "$conf"
    local pids=()
    for pidfile in "$state/munge/munged.pid" "$state/run/slurmctld.pid" "$state/run/slurmd.pid"; do
        for _ in $(seq 50); do [ -s "$pidfile" ] && break; sleep 0.1; done
        [ -s "$pidfile" ] || { stop; die "no pid file $pidfile (see $state/log)"; }
        pids+=("$(cat "$pidfile")")
    done
    echo "${pids[*]}" >"$state/pids"
    local host
    host="$(hostname -s)"
    for _ in $(seq 60); do
        if [ "$(sinfo -h -n "$host" -o %T 2>/dev/null)" = "idle" ]; then
            echo ".ci/slurm.sh: node $host idle (SLURM_CONF=$conf)"
            return 0
        fi
        scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
        sleep 1
    done
    sinfo -N -l >&2 || true
    tail -5 "$state/log/slurmctld.log" "$state/log/slurmd.log" >&2 || true
    stop
    die "node $host never became idle"
}

stop() {
    [ -f "$state/pids" ] || return 0
    local pids
    read -r -a pids <"$state/pids"
    # slurmd first, so it does not report the controller's absence; munged last.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill "${pids[$i]}" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -f "$state/pids"
    if [ -f "$state/linked" ]; then
        local etc
        etc="$(cat "$state/linked")"
        [ -L "$etc" ] && [ "$(readlink "$etc")" = "$conf" ] && rm -f "$etc"
        rm -f "$state/linked"
    fi
    echo ".ci/slurm.sh: stopped ${pids[*]}"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    env) echo "SLURM_CONF=$conf" ;;
    *) die "usage: .ci/slurm.sh start|stop|env" ;;
esac
