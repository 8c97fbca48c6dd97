#!/bin/bash
# Start a MooseFS cluster on this one host and mount it: a metadata server (mfsmaster), one
# chunk server (mfschunkserver) and the FUSE client (mfsmount), all in a network namespace of
# their own whose loopback device carries the private address $MFSLAB_ADDR (the chunk server
# refuses loopback addresses). The namespace has no mount namespace of its own: the mount at
# $MFSLAB_MNT is visible to the whole host.
#
# Returns 0 only once the mount answers: a chunk server is registered and a file written
# through the mount with fsync reads back the same. Then $MFSLAB_DIR/ready holds the mount
# point. On failure it prints the daemons' log tails and stops what it started (stop.sh).
# Settings: see lib.sh. Needs root. Stop with stop.sh (same env).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
T0=$(now)

[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }

# --- packages ------------------------------------------------------------------------------
missing=""
for b in mfsmaster mfschunkserver mfsmount mfssetgoal mfssettrashtime unshare nsenter setsid ip runuser; do
	command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
done
if [ -n "$missing" ]; then
	if [ "$MFSLAB_INSTALL" = 1 ]; then
		log "installing $MFSLAB_PKGS (apt)"
		# shellcheck disable=SC2086 # one word per package
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $MFSLAB_PKGS >/dev/null ||
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $MFSLAB_PKGS >/dev/null; }
	else
		log "missing:$missing (apt-get install -y --no-install-recommends $MFSLAB_PKGS, or MFSLAB_INSTALL=1)"
		exit 1
	fi
fi
id mfs >/dev/null 2>&1 || { log "user mfs does not exist (the moosefs packages create it)"; exit 1; }

# --- settings --------------------------------------------------------------------------------
D=$MFSLAB_DIR M=$MFSLAB_MNT A=$MFSLAB_ADDR
for v in "$D" "$M"; do
	case "$v" in /*) ;; *) log "MFSLAB_DIR and MFSLAB_MNT must be absolute: $v"; exit 1 ;; esac
	case "$v" in *[[:space:]\\]*) log "MFSLAB_DIR and MFSLAB_MNT must not hold blanks or backslashes: $v"; exit 1 ;; esac
done
case "$A" in
127.*) log "MFSLAB_ADDR=$A is a loopback address: the chunk server refuses those"; exit 1 ;;
*.*.*.*) ;;
*) log "MFSLAB_ADDR=$A is not an IPv4 address"; exit 1 ;;
esac
case "$MFSLAB_PORT_BASE" in '' | *[!0-9]*) log "MFSLAB_PORT_BASE=$MFSLAB_PORT_BASE is not a number"; exit 1 ;; esac
[ "$MFSLAB_PORT_BASE" -ge 1 ] && [ "$MFSLAB_PORT_BASE" -le 65532 ] || { log "MFSLAB_PORT_BASE=$MFSLAB_PORT_BASE: want 1..65532"; exit 1; }
D=$(realpath -m "$D") M=$(realpath -m "$M")
P_ML=$MFSLAB_PORT_BASE P_CS=$((MFSLAB_PORT_BASE + 1)) P_CL=$((MFSLAB_PORT_BASE + 2)) P_CSSERV=$((MFSLAB_PORT_BASE + 3))

# --- state dir -------------------------------------------------------------------------------
if [ -e "$D" ]; then
	if [ ! -e "$D/.mfslab" ] && [ -n "$(ls -A "$D")" ]; then
		log "$D exists, is not empty and is not an mfslab dir: refusing"; exit 1
	fi
	if [ -e "$D/.mfslab" ]; then
		for f in "$D"/run/*.pid; do
			p=$(pidfile_pid "$f")
			if alive "$p"; then log "already running ($f: pid $p); run stop.sh first"; exit 1; fi
		done
		# Leftovers of a run that was not stopped (a stale mount, files): stop.sh clears them.
		MFSLAB_KEEP=0 "$HERE/stop.sh"
	fi
fi
if mounted "$M"; then log "$M is already a mount point: refusing"; exit 1; fi
if [ -d "$M" ] && [ -n "$(ls -A "$M")" ]; then log "mount point $M is not empty: refusing"; exit 1; fi
mkdir -p "$D"
chmod 755 "$D"
touch "$D/.mfslab"
mkdir -p "$D"/{etc,log,run,master,cs,hdd}
echo "$M" > "$D/run/mnt"
if [ ! -d "$M" ]; then mkdir -p "$M" && echo "$M" > "$D/run/mnt.created"; fi
chown mfs:mfs "$D"/{master,cs,hdd}
cp /var/lib/mfs/metadata.mfs.empty "$D/master/metadata.mfs"
chown mfs:mfs "$D/master/metadata.mfs"
runuser -u mfs -- test -w "$D/master" ||
	{ log "user mfs cannot write $D/master: a parent of MFSLAB_DIR=$D is not searchable by it"; exit 1; }

dump_logs() {
	log "start failed; log tails:"
	for f in "$D"/log/*.log; do
		[ -f "$f" ] || continue
		echo "----- $f" >&2
		tail -n 25 "$f" >&2
	done
	if [ "$MFSLAB_KEEP" = 1 ]; then
		log "stopping what was started; keeping $D (MFSLAB_KEEP=1)"
	else
		log "stopping what was started (MFSLAB_KEEP=1 keeps $D)"
	fi
	"$HERE/stop.sh" || true
}
trap 'rc=$?; [ $rc = 0 ] || dump_logs' EXIT

# --- configuration ---------------------------------------------------------------------------
cat > "$D/etc/mfsmaster.cfg" <<EOF
WORKING_USER = mfs
WORKING_GROUP = mfs
DATA_PATH = $D/master
EXPORTS_FILENAME = $D/etc/mfsexports.cfg
TOPOLOGY_FILENAME = $D/etc/mfstopology.cfg
MATOML_LISTEN_HOST = $A
MATOML_LISTEN_PORT = $P_ML
MATOCS_LISTEN_HOST = $A
MATOCS_LISTEN_PORT = $P_CS
MATOCL_LISTEN_HOST = $A
MATOCL_LISTEN_PORT = $P_CL
EOF
echo "$A / rw,alldirs,maproot=0" > "$D/etc/mfsexports.cfg"
: > "$D/etc/mfstopology.cfg"
cat > "$D/etc/mfschunkserver.cfg" <<EOF
WORKING_USER = mfs
WORKING_GROUP = mfs
DATA_PATH = $D/cs
HDD_CONF_FILENAME = $D/etc/mfshdd.cfg
BIND_HOST = $A
MASTER_HOST = $A
MASTER_PORT = $P_CS
MASTER_RECONNECTION_DELAY = 1
CSSERV_LISTEN_HOST = $A
CSSERV_LISTEN_PORT = $P_CSSERV
EOF
echo "$D/hdd $MFSLAB_HDD_LIMIT" > "$D/etc/mfshdd.cfg"
cat > "$D/env.sh" <<EOF
export MFSLAB_DIR=$D MFSLAB_MNT=$M
EOF

# waitfor SECONDS WHAT PID CMD...: run CMD every 50 ms until it succeeds; fail after SECONDS
# or as soon as the daemon PID has exited.
waitfor() {
	local t=$1 what=$2 pid=$3 i=0
	shift 3
	until "$@"; do
		if [ -n "$pid" ] && ! alive "$pid"; then log "$what: the daemon (pid $pid) exited"; return 1; fi
		i=$((i + 1))
		if [ $i -ge $((t * 20)) ]; then log "$what: not after ${t}s"; return 1; fi
		sleep 0.05
	done
}

# --- the network namespace: a holder process with the private address on its lo ---------------
# It says "up" on a FIFO once the address is set (or "failed"); fd 3 opened read-write so
# that opening it never blocks and read -t bounds the wait even if unshare fails.
mkfifo "$D/run/holder.fifo"
exec 3<> "$D/run/holder.fifo"
setsid unshare --net -- sh -c '
	if ip link set lo up && ip addr add "$1/32" dev lo; then echo up >&3; else echo failed >&3; exit 1; fi
	exec 3>&-
	exec sleep infinity' sh "$A" < /dev/null > "$D/log/netns.log" 2>&1 &
holder=$!
echo "$holder" > "$D/run/holder.pid"
state=""
read -r -t "$MFSLAB_TIMEOUT" -u 3 state || true
exec 3>&-
rm -f "$D/run/holder.fifo"
[ "$state" = up ] || { log "network namespace: '${state:-no answer}' (see $D/log/netns.log)"; exit 1; }
ns=$(readlink "/proc/$holder/ns/net")
if [ "$ns" = "$(readlink /proc/1/ns/net)" ] || [ "$ns" = "$(readlink /proc/$$/ns/net)" ]; then
	log "the holder (pid $holder) is not in a network namespace of its own"; exit 1
fi
echo "$ns" > "$D/run/netns"
inns() { nsenter --net="/proc/$holder/ns/net" -- "$@"; }

# listening PORT: true once something listens on $A:PORT in the lab's namespace.
listening() {
	local hex
	hex=$(printf '%02X%02X%02X%02X:%04X' $(echo "$A" | awk -F. '{print $4, $3, $2, $1}') "$1")
	awk -v a="$hex" '$2 == a && $4 == "0A" { found = 1 } END { exit !found }' "/proc/$holder/net/tcp"
}

# --- master ------------------------------------------------------------------------------------
# Foreground daemons (-f) started by us: their PIDs are $!, their logs go to our files.
nsenter --net="/proc/$holder/ns/net" -- setsid mfsmaster -f -c "$D/etc/mfsmaster.cfg" start < /dev/null > "$D/log/mfsmaster.log" 2>&1 &
master=$!
echo "$master" > "$D/run/mfsmaster.pid"
waitfor "$MFSLAB_TIMEOUT" "mfsmaster listening on $A:$P_CS and :$P_CL" "$master" eval "listening $P_CS && listening $P_CL"
T_MASTER=$(elapsed "$T0")

# --- chunk server ------------------------------------------------------------------------------
nsenter --net="/proc/$holder/ns/net" -- setsid mfschunkserver -f -c "$D/etc/mfschunkserver.cfg" start < /dev/null > "$D/log/mfschunkserver.log" 2>&1 &
cs=$!
echo "$cs" > "$D/run/mfschunkserver.pid"

# --- client ------------------------------------------------------------------------------------
opts=""
[ -n "$MFSLAB_MOUNT_OPTS" ] && opts="-o $MFSLAB_MOUNT_OPTS"
# shellcheck disable=SC2086 # opts is "" or two words
nsenter --net="/proc/$holder/ns/net" -- setsid mfsmount -f "$M" -H "$A" -P "$P_CL" $opts < /dev/null > "$D/log/mfsmount.log" 2>&1 &
client=$!
echo "$client" > "$D/run/mfsmount.pid"
waitfor "$MFSLAB_TIMEOUT" "mfsmount of $M" "$client" mounted "$M"
T_MOUNT=$(elapsed "$T0")

# A chunk server is registered and has scanned its disk once the mount reports free blocks.
has_space() { [ "$(stat -f -c %a "$M" 2>/dev/null || echo 0)" -gt 0 ]; }
waitfor "$MFSLAB_TIMEOUT" "a chunk server registered with free space (reported by $M)" "$cs" has_space
alive "$master" || { log "mfsmaster exited"; exit 1; }
T_CS=$(elapsed "$T0")

# Tools reach the master through the mount's proxy on 127.0.0.1 of the lab's namespace.
inns mfssetgoal -r "$MFSLAB_GOAL" "$M" > /dev/null
inns mfssettrashtime -r "$MFSLAB_TRASHTIME" "$M" > /dev/null

# --- ready: a file written with fsync through the mount reads back the same -------------------------
probe=$M/.mfslab-probe
head -c 1048576 /dev/urandom > "$D/run/probe"
dd if="$D/run/probe" of="$probe" bs=64k conv=fsync status=none
cmp -s "$D/run/probe" "$probe" || { log "the probe file read back through $M differs from what was written"; exit 1; }
rm -f "$probe" "$D/run/probe"

echo "$M" > "$D/ready"
log "up in $(elapsed "$T0")s (master ${T_MASTER}s, mount ${T_MOUNT}s, chunk server ${T_CS}s): $M"
log "master $A:$P_CL in network namespace $ns (holder pid $holder); stop: MFSLAB_DIR=$D $HERE/stop.sh"
