#!/usr/bin/env bash
# A real SLURM cluster on this one machine, for tests and CI: munge, slurmctld and N slurmd
# nodes (n1..nN) on loopback. Everything it creates lives under $FAULTLOOP_SLURM_DIR, and
# `stop` ends only the daemons whose pid files it wrote there.
#
#   scripts/slurm-cluster.sh install   apt-get the Debian packages (root)
#   scripts/slurm-cluster.sh start     start (idempotent); prints the config path
#   scripts/slurm-cluster.sh status    0 when the controller answers and every node is idle/alloc
#   scripts/slurm-cluster.sh stop      stop what start started, undo its /etc changes
#
# Environment: FAULTLOOP_SLURM_DIR (/tmp/faultloop-slurm), FAULTLOOP_SLURM_NODES (4),
# FAULTLOOP_SLURM_CPUS (8 per node, declared, not real), FAULTLOOP_SLURM_PORT (6817; slurmd
# ports are 17001 upward). Needs root: daemons run as root (SlurmUser=root) and /etc/hosts and
# /etc/slurm/slurm.conf are edited.
#
# Why /etc/slurm/slurm.conf (a symlink to our config) rather than SLURM_CONF: the SLURM
# executor plugin's job step strips every SLURM_* variable before running the rule's shell, so
# the `srun` inside a run_job would not find a config given only by SLURM_CONF.
set -euo pipefail

DIR=${FAULTLOOP_SLURM_DIR:-/tmp/faultloop-slurm}
NODES=${FAULTLOOP_SLURM_NODES:-4}
CPUS=${FAULTLOOP_SLURM_CPUS:-8}
CTLD_PORT=${FAULTLOOP_SLURM_PORT:-6817}
NODE_PORT0=17001
MARK="# faultloop-slurm"
SYS_CONF=/etc/slurm/slurm.conf
CONF=$DIR/slurm.conf
MUNGE_SOCKET=$DIR/munge/munge.socket.2

log() { echo "slurm-cluster: $*" >&2; }
die() { log "$*"; exit 1; }

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

node_names() { local i; for ((i = 1; i <= NODES; i++)); do echo "n$i"; done; }

# Rewrite /etc/hosts in place (it is often a bind mount, so no rename): drop our old lines,
# then add loopback entries for the node names (jobs rendezvous on the first node's name, as on
# a real cluster) and for this host's name if it does not resolve yet.
hosts_add() {
    local keep names
    keep=$(grep -v -- "$MARK" /etc/hosts || true)
    names=$(node_names | tr '\n' ' ')
    if ! getent hosts "$(hostname)" >/dev/null; then
        names="$names$(hostname)"
    fi
    printf '%s\n127.0.0.1 %s %s\n' "$keep" "$names" "$MARK" >/etc/hosts
}

hosts_remove() {
    if grep -q -- "$MARK" /etc/hosts; then
        local keep
        keep=$(grep -v -- "$MARK" /etc/hosts || true)
        printf '%s\n' "$keep" >/etc/hosts
    fi
}

write_conf() {
    local host
    host=$(hostname)
    cat >"$CONF" <<EOF
# Written by scripts/slurm-cluster.sh; a test cluster on loopback, no accounting.
ClusterName=faultloop
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.%n.log
# Several slurmd on one host: no cgroups, and declared CPUs may exceed the real cores.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# squeue-based status polling needs finished jobs to stay visible: MinJobAge >= 3 x the
# plugin's --slurm-init-seconds-before-status-checks.
MinJobAge=300
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# One line per finished job (start, end, nodes): tests check concurrency from it.
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=n[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$NODE_PORT0-$((NODE_PORT0 + NODES - 1))] CPUs=$CPUS RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

link_conf() {
    mkdir -p /etc/slurm
    if [[ -L $SYS_CONF && $(readlink "$SYS_CONF") == "$CONF" ]]; then
        return
    fi
    if [[ -e $SYS_CONF || -L $SYS_CONF ]]; then
        die "$SYS_CONF exists and is not ours; refusing to replace a site's SLURM config"
    fi
    ln -s "$CONF" "$SYS_CONF"
    touch "$DIR/linked-conf"
}

start_munge() {
    alive "$DIR/run/munged.pid" && return
    mkdir -p "$DIR/munge"
    if [[ ! -f $DIR/munge/munge.key ]]; then
        if [[ -f /etc/munge/munge.key ]]; then
            cp /etc/munge/munge.key "$DIR/munge/munge.key"
        else
            dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
        fi
    fi
    chown -R munge:munge "$DIR/munge"
    chmod 700 "$DIR/munge"
    chmod 600 "$DIR/munge/munge.key"
    # --force: munged dislikes the world-writable /tmp above its directory.
    runuser -u munge -- /usr/sbin/munged --force \
        --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
        --seed-file="$DIR/munge/munged.seed"
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -S $MUNGE_SOCKET && -f $DIR/munge/munged.pid ]] && break
        sleep 0.1
    done
    cp "$DIR/munge/munged.pid" "$DIR/run/munged.pid"
    munge -S "$MUNGE_SOCKET" -n | unmunge -S "$MUNGE_SOCKET" >/dev/null ||
        die "munge does not work; see $DIR/munge/munged.log"
}

start_slurmctld() {
    alive "$DIR/run/slurmctld.pid" && return
    # -c: clear saved state, so a node drained in an earlier run does not stay drained.
    /usr/sbin/slurmctld -c -f "$CONF"
}

start_slurmd() {
    local n
    for n in $(node_names); do
        alive "$DIR/run/slurmd.$n.pid" && continue
        mkdir -p "$DIR/spool/$n"
        /usr/sbin/slurmd -f "$CONF" -N "$n"
    done
}

# 0 when the controller answers and all NODES nodes are usable.
ready() {
    local up
    scontrol ping 2>/dev/null | grep -q UP || return 1
    up=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(idle|alloc|mix)/' | wc -l)
    [[ $up -ge $NODES ]]
}

cmd_install() {
    if [[ -x /usr/sbin/slurmctld && -x /usr/sbin/slurmd && -x /usr/sbin/munged && -x /usr/bin/sbatch ]]; then
        log "already installed: $(slurmctld -V)"
        return
    fi
    [[ $(id -u) == 0 ]] || die "install needs root"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        slurmctld slurmd slurm-client munge
}

cmd_start() {
    [[ $(id -u) == 0 ]] || die "start needs root (daemons run as root, /etc/hosts is edited)"
    local b
    for b in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sbatch; do
        [[ -x $b ]] || die "$b missing; run: $0 install"
    done
    mkdir -p "$DIR"/{run,log,ctld,spool}
    if alive "$DIR/run/slurmctld.pid" && ready; then
        log "already running ($CONF)"
        echo "$CONF"
        return
    fi
    hosts_add
    [[ -f $CONF ]] && alive "$DIR/run/slurmctld.pid" || write_conf
    link_conf
    start_munge
    start_slurmctld
    start_slurmd
    local i
    for ((i = 0; i < 60; i++)); do
        if ready; then
            log "up: $(sinfo -h -o '%P %D %t %N' | tr '\n' ' ')"
            echo "$CONF"
            return
        fi
        sleep 0.5
    done
    sinfo -N -l >&2 || true
    tail -n 20 "$DIR"/log/slurmctld.log >&2 || true
    die "cluster not ready after 30 s; logs in $DIR/log"
}

stop_pid() {
    local f=$1 pid i
    alive "$f" || { rm -f "$f"; return; }
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
}

cmd_stop() {
    [[ -d $DIR ]] || { log "nothing to stop ($DIR absent)"; return; }
    # Cancel leftover jobs first so slurmd does not leave job steps behind.
    if alive "$DIR/run/slurmctld.pid"; then
        scancel --full --quiet --user=root 2>/dev/null || true
    fi
    local f
    for f in "$DIR"/run/slurmd.*.pid; do
        [[ -e $f ]] && stop_pid "$f"
    done
    stop_pid "$DIR/run/slurmctld.pid"
    stop_pid "$DIR/run/munged.pid"
    if [[ -f $DIR/linked-conf && -L $SYS_CONF && $(readlink "$SYS_CONF") == "$CONF" ]]; then
        rm -f "$SYS_CONF" "$DIR/linked-conf"
    fi
    hosts_remove
    log "stopped (state and logs kept in $DIR)"
}

cmd_status() {
    local f any=0
    for f in "$DIR"/run/*.pid; do
        [[ -e $f ]] || continue
        if alive "$f"; then echo "running  $(basename "$f" .pid) pid $(cat "$f")"; any=1
        else echo "dead     $(basename "$f" .pid)"; fi
    done
    [[ $any == 1 ]] && sinfo -N -o '%N %t %c %m' 2>/dev/null || true
    ready
}

case ${1:-} in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
