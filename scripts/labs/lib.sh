# Helpers of the labs (scripts/labs/moosefs, scripts/labs/slurm), sourced by each lab's lib.sh
# after it sets LAB_NAME (the prefix of its log lines).

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }
log() { echo "$LAB_NAME: $*" >&2; }

# alive PID: true if PID runs and is not a zombie (PID 1 on some sandboxes reaps orphans
# late, so kill -0 alone would see a dead daemon as alive).
alive() {
	local s
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
	s=$(awk '{sub(/^.*\) /, ""); print $1}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}

# stop_pid PID NAME [timeout_s]: TERM, wait, then KILL. By PID only.
stop_pid() {
	local p=$1 name=$2 t=${3:-15} i=0
	alive "$p" || return 0
	kill -TERM "$p" 2>/dev/null || true
	while alive "$p"; do
		i=$((i + 1))
		if [ $i -ge $((t * 10)) ]; then
			log "$name (pid $p) ignored TERM for ${t}s: KILL"
			kill -KILL "$p" 2>/dev/null || true
			sleep 0.2
			break
		fi
		sleep 0.1
	done
}

pidfile_pid() { [ -s "$1" ] && tr -dc 0-9 < "$1" || true; }

# mounted PATH: true if PATH is a mount point in this mount namespace (also when its FUSE
# daemon died and the mount answers ENOTCONN, which `mountpoint` cannot stat).
mounted() {
	awk -v m="$1" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# protected_pids prints " 1 PID... ": PID 1, this shell and its ancestors, blank-separated
# with blanks around. A stop never signals them.
protected_pids() {
	local p=" 1 " a=$$
	while [ -n "$a" ] && [ "$a" != 0 ]; do
		p="$p$a "
		a=$(awk '/^PPid:/{print $2}' "/proc/$a/status" 2>/dev/null)
	done
	echo "$p"
}

# host_namespaces PIDS KIND...: the namespaces of each KIND (net, mnt, uts) that PID 1 and
# the processes PIDS (protected_pids) are in, blank-separated with blanks around. A stop
# never sweeps them: a lab's namespace that is among them is shared with the host.
host_namespaces() {
	local pids=$1 ns=" " a k
	shift
	for a in 1 $pids; do
		for k in "$@"; do ns="$ns$(readlink "/proc/$a/ns/$k" 2>/dev/null) "; done
	done
	echo "$ns"
}
