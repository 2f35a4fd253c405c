#!/usr/bin/env bash
# A real one-node SLURM cluster on this machine, for development and tests (Debian 12, run as root; works in
# containers without systemd or cgroups).
#
#   bash deploy/slurm/dev-cluster.sh [start]   install (if needed), configure and start munged, slurmctld, slurmd;
#                                              returns once the node is idle and takes jobs
#   bash deploy/slurm/dev-cluster.sh stop      cancel all jobs, stop the daemons this script started, wait for them
#   bash deploy/slurm/dev-cluster.sh status    sinfo and which daemons run; exit 0 if the cluster answers, else 1
#
# start installs slurmctld, slurmd, slurm-client and munge with apt-get when a binary is missing, writes
# /etc/slurm/slurm.conf (so plain sbatch/srun/sinfo find it; it refuses to touch a slurm.conf it did not write),
# creates a munge key if there is none, and starts the daemons (each only if not running yet), so it can be run
# again at any time. Cluster "dev", one node (this host: `hostname -s`, CPUs from nproc, its memory less 10%),
# one partition "debug" (default, no time limit), cores and memory as consumable resources, no accounting,
# no cgroups (proctrack/linuxproc: a job's processes are found through their parent pids, so a process that
# detaches itself with setsid/double fork escapes scancel; memory limits are not enforced).
# Daemons run as root; ports 6817 (slurmctld) and 6818 (slurmd).
# Files: state /var/spool/slurm-dev, logs /var/log/slurm-dev, pid files /run/slurm-dev.
# Environment: DEV_CLUSTER_WAIT (seconds start waits for the node, default 60).
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARKER="# managed by motifgrid deploy/slurm/dev-cluster.sh (delete this line to keep the script off this file)"
SPOOL=/var/spool/slurm-dev
LOGDIR=/var/log/slurm-dev
RUNDIR=/run/slurm-dev
MUNGE_KEY=/etc/munge/munge.key
MUNGE_LOG=/var/log/munge/munged.log
MUNGE_PID=/run/munge/munged.pid
MUNGE_OURS=$RUNDIR/munged.started   # pid of the munged this script started
WAIT=${DEV_CLUSTER_WAIT:-60}
export SLURM_CONF=$CONF             # our commands talk to this cluster, whatever the caller's environment says

say() { echo "dev-cluster: $*"; }
die() { echo "dev-cluster: $*" >&2; exit 1; }

node_name() { hostname -s 2>/dev/null || uname -n | cut -d. -f1; }

# true if process $1 exists, is named $2 and is not a zombie (daemons are orphans of PID 1, which in a
# container may reap them late: an exited daemon can linger as a zombie under its name)
alive() {
    local comm stat
    { read -r comm <"/proc/$1/comm" && read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    stat=${stat##*) }
    [ "$comm" = "$2" ] && [ "${stat%% *}" != Z ] && [ "${stat%% *}" != X ]
}

# pids of live processes whose command name is exactly $1 (no procps needed)
pids_of() {
    local d
    for d in /proc/[0-9]*; do
        alive "${d#/proc/}" "$1" && echo "${d#/proc/}"
    done
    return 0
}

# the pid in pid file $2 if that process runs and is named $1
pid_from_file() {
    local pid
    [ -r "$2" ] || return 1
    pid=$(tr -dc '0-9' <"$2")
    [ -n "$pid" ] && alive "$pid" "$1" && echo "$pid"
}

running() { [ -n "$(pids_of "$1")" ]; }

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

cluster_answers() { timeout 10 sinfo -h -o %P >/dev/null 2>&1; }

# "idle", "down", "drained", ... of our node, with "*" appended while slurmctld gets no answer from slurmd
# (the power and reboot flags sinfo may append, ~ # ! % $ @ ^ -, stripped)
node_state() {
    local s
    s=$(timeout 10 sinfo -h -N -n "$(node_name)" -o %T 2>/dev/null | head -n 1) || return 1
    s=${s//[~#!%\$@^-]/}
    echo "$s"
}

# the last error line of log $1, for a one-line failure message (without the harmless ones every start logs:
# the pmix MPI plugin without its library, the state files of a first start)
last_error() {
    local line
    line=$(grep -aiE 'error|fatal' "$1" 2>/dev/null \
        | grep -avE 'pmix|MPI: Cannot create context|state file|Trying backup state|Unauthorized credential' \
        | tail -n 1 | cut -c1-200) || true
    [ -n "$line" ] && echo "; last error: $line"
    return 0
}

install_packages() {
    local b missing=()
    for b in slurmctld slurmd sinfo sbatch srun scontrol scancel munged munge unmunge; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || missing+=("$b")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "missing ${missing[*]} and no apt-get to install them"
    say "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
}

render_conf() {
    local host cpus mem_mib real_mib addr=""
    host=$(node_name)
    cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)   # nproc would obey these
    mem_mib=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
    real_mib=$(( mem_mib - (mem_mib / 10 > 512 ? mem_mib / 10 : 512) ))
    # a host name that does not resolve (some containers): everything on the loopback address
    getent hosts "$host" >/dev/null 2>&1 || addr=127.0.0.1
    cat <<EOF
$MARKER
# One-node development cluster; rewritten by every \`dev-cluster.sh start\`.
ClusterName=dev
SlurmctldHost=$host${addr:+($addr)}
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$SPOOL/ctld
SlurmdSpoolDir=$SPOOL/d
SlurmctldPidFile=$RUNDIR/slurmctld.pid
SlurmdPidFile=$RUNDIR/slurmd.pid
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# no cgroups: processes tracked through their parent pids, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# no accounting
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# a dev box: come back by itself, react quickly
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
# jobs that do not ask for memory get their CPUs' share, not the whole node
DefMemPerCPU=$(( real_mib / cpus ))
NodeName=$host${addr:+ NodeAddr=$addr} CPUs=$cpus RealMemory=$real_mib State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

# writes slurm.conf; returns 0 if it changed, 1 if it was already up to date
write_conf() {
    local new
    if [ -e "$CONF" ] && ! grep -qxF "$MARKER" "$CONF"; then
        die "$CONF exists and was not written by this script; not touching it (move it away to use dev-cluster.sh)"
    fi
    new=$(render_conf)
    if [ -e "$CONF" ] && [ "$(cat "$CONF")" = "$new" ]; then
        return 1
    fi
    mkdir -p "$(dirname "$CONF")"
    printf '%s\n' "$new" >"$CONF.tmp.$$"
    chmod 0644 "$CONF.tmp.$$"
    mv -f "$CONF.tmp.$$" "$CONF"
    say "wrote $CONF"
    return 0
}

start_munge() {
    if munge_ok; then
        return 0
    fi
    id munge >/dev/null 2>&1 || die "munged: no user 'munge' (is the munge package installed?)"
    [ -d /etc/munge ] || install -d -o munge -g munge -m 0700 /etc/munge
    [ -d /var/lib/munge ] || install -d -o munge -g munge -m 0711 /var/lib/munge
    [ -d /var/log/munge ] || install -d -o munge -g munge -m 0700 /var/log/munge
    install -d -o munge -g munge -m 0755 /run/munge
    if [ ! -e "$MUNGE_KEY" ]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile="$MUNGE_KEY"
        else
            dd if=/dev/urandom of="$MUNGE_KEY" bs=1024 count=1 status=none
        fi
        chown munge:munge "$MUNGE_KEY"
        chmod 0400 "$MUNGE_KEY"
        say "created $MUNGE_KEY"
    fi
    # a munged that runs but does not answer (stale, wrong key) is replaced
    local pid
    for pid in $(pids_of munged); do kill "$pid" 2>/dev/null || true; done
    wait_gone munged 10 || true
    runuser -u munge -- /usr/sbin/munged
    for _ in $(seq 1 50); do
        munge_ok && break
        sleep 0.2
    done
    munge_ok || die "munged did not start; see $MUNGE_LOG$(last_error "$MUNGE_LOG")"
    pid_from_file munged "$MUNGE_PID" >"$MUNGE_OURS" || pids_of munged | head -n 1 >"$MUNGE_OURS"
    say "munged started (pid $(cat "$MUNGE_OURS"))"
}

# start daemon $1 (slurmctld or slurmd) unless one runs; fails with one line naming its log
start_daemon() {
    local name=$1 log=$LOGDIR/$1.log pid
    if running "$name"; then
        return 0
    fi
    "/usr/sbin/$name" || die "$name failed to start; see $log$(last_error "$log")"
    for _ in $(seq 1 50); do
        pid=$(pid_from_file "$name" "$RUNDIR/$name.pid") && break
        running "$name" || break
        sleep 0.2
    done
    # it forks and may then exit during its own start-up
    sleep 0.5
    running "$name" || die "$name exited during start-up; see $log$(last_error "$log")"
    say "$name started (pid ${pid:-$(pids_of "$name" | head -n 1)})"
}

# waits up to $2 seconds until no process is named $1
wait_gone() {
    for _ in $(seq 1 $(( $2 * 5 ))); do
        running "$1" || return 0
        sleep 0.2
    done
    ! running "$1"
}

# stops daemon $1 through its pid file $2 (what this script started); SIGKILL after 20 s
stop_pidfile() {
    local name=$1 pid
    if ! pid=$(pid_from_file "$name" "$2"); then
        if running "$name"; then
            say "$name: left running (pid $(pids_of "$name" | tr '\n' ' ')- not started by this script)"
        fi
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
        alive "$pid" "$name" || break
        sleep 0.2
    done
    if alive "$pid" "$name"; then
        say "$name (pid $pid) did not stop in 20 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    say "$name stopped"
}

stop_slurm() {
    stop_pidfile slurmd "$RUNDIR/slurmd.pid"
    stop_pidfile slurmctld "$RUNDIR/slurmctld.pid"
}

cmd_start() {
    local t0=$SECONDS conf_changed=0 state=""
    [ "$(id -u)" -eq 0 ] || die "must run as root"
    install_packages
    write_conf && conf_changed=1
    mkdir -p "$SPOOL/ctld" "$SPOOL/d" "$LOGDIR" "$RUNDIR"
    if [ $conf_changed -eq 1 ] && { running slurmctld || running slurmd; }; then
        say "configuration changed: restarting slurmctld and slurmd"
        stop_slurm
    fi
    start_munge
    start_daemon slurmctld
    start_daemon slurmd
    for _ in $(seq 1 $(( WAIT * 2 ))); do
        state=$(node_state) || state=""
        case $state in
            idle|mixed|allocated|completing) break ;;
            down*|drain*|fail*)
                timeout 10 scontrol update nodename="$(node_name)" state=resume >/dev/null 2>&1 || true ;;
        esac
        running slurmctld || die "slurmctld stopped; see $LOGDIR/slurmctld.log$(last_error "$LOGDIR/slurmctld.log")"
        running slurmd || die "slurmd stopped; see $LOGDIR/slurmd.log$(last_error "$LOGDIR/slurmd.log")"
        sleep 0.5
    done
    case $state in
        idle|mixed|allocated|completing) ;;
        "") die "slurmctld does not answer after ${WAIT} s; see $LOGDIR/slurmctld.log$(last_error "$LOGDIR/slurmctld.log")" ;;
        *) die "node $(node_name) is '$state' after ${WAIT} s (slurmd not registered or not answering); see $LOGDIR/slurmd.log$(last_error "$LOGDIR/slurmd.log")" ;;
    esac
    say "cluster dev up: node $(node_name) $state, partition debug ($(( SECONDS - t0 )) s)"
}

cmd_stop() {
    local jobs pid
    [ "$(id -u)" -eq 0 ] || die "must run as root"
    if running slurmctld && cluster_answers; then
        jobs=$(timeout 10 squeue -h -o %i 2>/dev/null | wc -l)
        if [ "$jobs" -gt 0 ]; then
            say "cancelling $jobs job(s)"
            timeout 10 squeue -h -o %i 2>/dev/null | xargs -r timeout 10 scancel --quiet 2>/dev/null || true
            for _ in $(seq 1 60); do
                [ -z "$(timeout 10 squeue -h -o %i 2>/dev/null)" ] && [ -z "$(pids_of slurmstepd)" ] && break
                sleep 0.5
            done
        fi
    fi
    stop_slurm
    if pid=$(pid_from_file munged "$MUNGE_OURS"); then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do alive "$pid" munged || break; sleep 0.2; done
        alive "$pid" munged && kill -KILL "$pid" 2>/dev/null
        rm -f "$MUNGE_OURS"
        say "munged stopped"
    elif running munged; then
        say "munged: left running (not started by this script)"
    fi
    if [ -n "$(pids_of slurmstepd)" ]; then
        say "slurmstepd still running (pid $(pids_of slurmstepd | tr '\n' ' '))"
    fi
}

cmd_status() {
    local d ok=0
    # without a local slurmctld, sinfo would retry for ~10 s before giving up
    if running slurmctld && cluster_answers; then
        timeout 10 sinfo || true
    else
        say "the cluster does not answer (sinfo)"
        ok=1
    fi
    for d in munged slurmctld slurmd; do
        if running "$d"; then
            echo "$d: running (pid $(pids_of "$d" | tr '\n' ' ' | sed 's/ $//'))"
        else
            echo "$d: not running"
        fi
    done
    return $ok
}

case ${1:-start} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    -h|--help|help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
