#!/bin/bash
# Stop what start.sh started (same MFSLAB_DIR), by PID only, in this order:
#  1. unmount the file system (lazily if it is busy: processes still inside it get ENOTCONN
#     once the client is gone), then end the client mfsmount;
#  2. end the chunk server, then the master (it writes its metadata back first);
#  3. end any other process left in the lab's network namespace, then its holder (the
#     namespace goes with its last process);
#  4. remove $MFSLAB_DIR (unless MFSLAB_KEEP=1) and the mount point if start.sh made it.
# Safe to run any number of times, and after a failed or interrupted start. Touches nothing
# else: no /etc files, no named namespaces, no other daemons.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"
T0=$(now)
D=$(realpath -m "$MFSLAB_DIR")

if [ ! -e "$D/.mfslab" ]; then
	log "$D is not an mfslab dir (nothing started there): nothing to stop"
	exit 0
fi
M=$(cat "$D/run/mnt" 2>/dev/null || true)
fail=0

# 1. the mount, then the client
client=$(pidfile_pid "$D/run/mfsmount.pid")
busy=0
if [ -n "$M" ] && mounted "$M"; then
	if ! umount "$M" 2>/dev/null; then
		busy=1
		users=$(fuser -m "$M" 2>/dev/null | tr -s ' ' || true)
		log "$M is busy (pids:${users:- unknown}): detaching it lazily"
		umount -l "$M" || { log "could not unmount $M"; fail=1; }
	fi
fi
# An unmounted client exits by itself once it has written back its cache; give it a moment
# before TERM. A lazily detached one still serves the processes inside: end it now.
if [ $busy = 0 ]; then
	for _ in $(seq 1 50); do alive "$client" || break; sleep 0.1; done
fi
stop_pid "$client" mfsmount 10
T_CLIENT=$(elapsed "$T0")

# 2. chunk server, master
stop_pid "$(pidfile_pid "$D/run/mfschunkserver.pid")" mfschunkserver 30
T_CS=$(elapsed "$T0")
stop_pid "$(pidfile_pid "$D/run/mfsmaster.pid")" mfsmaster 60
T_MASTER=$(elapsed "$T0")

# 3. whatever is left in the lab's network namespace (the master's metadata writer, a tool
# run in it), then the holder. Never a namespace PID 1, this script or one of its ancestors
# is in; never PID 1, our ancestors or kernel threads.
holder=$(pidfile_pid "$D/run/holder.pid")
left=0
ns=$(cat "$D/run/netns" 2>/dev/null || true)
if [ -n "$ns" ]; then
	protect=$(protected_pids)
	host_ns=$(host_namespaces "$protect" net)
	case "$ns" in net:\[*\]) ;; *) log "bad namespace record '$ns': not sweeping it"; ns="" ;; esac
	case "$host_ns" in *" $ns "*) log "namespace $ns is shared with the host: not sweeping it"; ns="" ;; esac
fi
if [ -n "$ns" ]; then
	for pd in /proc/[0-9]*; do
		p=${pd#/proc/}
		[ "$p" = "$holder" ] && continue
		case "$protect" in *" $p "*) continue ;; esac
		[ "$(readlink "$pd/ns/net" 2>/dev/null)" = "$ns" ] || continue
		[ -n "$(head -c 1 "$pd/cmdline" 2>/dev/null | tr -d '\0')" ] || continue # kernel thread, zombie
		alive "$p" || continue
		log "stopping leftover pid $p ($(tr '\0' ' ' < "$pd/cmdline" 2>/dev/null | cut -c1-80))"
		stop_pid "$p" "leftover $p" 10
		left=$((left + 1))
	done
fi
stop_pid "$holder" "namespace holder" 5

# 4. state dir, mount point
if [ -n "$M" ] && mounted "$M"; then
	log "$M is still mounted: keeping $D"
	exit 1
fi
if [ "$MFSLAB_KEEP" = 1 ]; then
	log "kept $D (logs in $D/log)"
else
	if [ -s "$D/run/mnt.created" ] && [ -d "$M" ]; then rmdir "$M" 2>/dev/null || log "mount point $M is not empty: kept"; fi
	rm -rf --one-file-system "${D:?}" || fail=1
fi
log "stopped in $(elapsed "$T0")s (client ${T_CLIENT}s, chunk server ${T_CS}s, master ${T_MASTER}s; leftover processes ended: $left)"
exit $fail
