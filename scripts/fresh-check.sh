#!/usr/bin/env bash
# Rehearses the README's two commands (its "Try it, test it" block) as a
# new machine would run them: on a fresh clone of this commit in a
# temporary directory, with the caches falcon keeps and every path outside
# the testbed its daemons may write to moved aside, so that nothing built or
# left by an earlier run can help or hide anything. Prints each command's
# time and result. Everything moved aside is moved back afterwards, also on
# failure, Ctrl-C or kill (SIGINT, SIGTERM, SIGHUP); after a SIGKILL,
# --restore moves it back. What a command leaves in their place is removed
# first, and a path outside the testbed left makes the rehearsal fail.
# It installs packages as setup.sh does and removes none. Root only; it
# takes the whole machine (docs/testing.md#a-fresh-machine).
#
# usage: scripts/fresh-check.sh [--keep-caches] [--tests-only] [--dry-run]
#                               [--command CMD]... | --restore
#   --keep-caches  move only the testbed's paths aside, keep the caches
#   --tests-only   only the test command
#   --dry-run      print what would be moved and run; change nothing
#   --command CMD  run CMD (in the clone) instead of the README's commands
#   --restore      move back what a killed rehearsal left aside
set -uo pipefail
# One group, read whole before it runs: an edit of this file during an
# hour's rehearsal would otherwise derail the rest of it.
{

root=$(cd "$(dirname "$0")/.." && pwd)
suffix=.falcon-fresh-aside
manifest=${FRESH_CHECK_MANIFEST:-/var/tmp/falcon-fresh-check.moved}
keep_caches=0 tests_only=0 dry=0 restore_only=0
cmds=()
while [ $# -gt 0 ]; do
	case $1 in
	--keep-caches) keep_caches=1 ;;
	--tests-only) tests_only=1 ;;
	--dry-run) dry=1 ;;
	--restore) restore_only=1 ;;
	--command)
		[ $# -ge 2 ] || { echo "fresh-check: --command needs a command" >&2; exit 2; }
		cmds+=("$2")
		shift
		;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "fresh-check: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-check: run as root, as the README's commands" >&2; exit 1; }

log() { echo "fresh-check: $*"; }

# restore moves back every path of the manifest, last moved first, after
# removing what the rehearsal made in its place; a path outside the testbed
# made by it is reported (leftovers=1).
leftovers=0
restore() {
	[ -f "$manifest" ] || return 0
	local kind p
	while read -r kind p; do
		if [ -e "$p" ] || [ -L "$p" ]; then
			if [ "$kind" = testbed ]; then
				log "LEFT outside the testbed: $p (removed)"
				leftovers=1
			fi
			rm -rf --one-file-system "$p"
		fi
		if [ -e "$p$suffix" ] || [ -L "$p$suffix" ]; then
			mv -T "$p$suffix" "$p" && log "moved back $p"
		fi
	done < <(tac "$manifest")
	rm -f "$manifest"
}

if [ $restore_only -eq 1 ]; then
	[ -f "$manifest" ] || { log "nothing to restore ($manifest: none)"; exit 0; }
	restore
	exit 0
fi
if [ -f "$manifest" ] && [ $dry -eq 0 ]; then
	echo "fresh-check: $manifest exists: a rehearsal was killed; run $0 --restore first" >&2
	exit 1
fi

# The README's commands: the shell block of its "Try it, test it" section.
if [ ${#cmds[@]} -eq 0 ]; then
	mapfile -t cmds < <(awk '/^## Try it, test it/ { s = 1 } s && /^```sh/ { b = 1; next } b && /^```/ { exit } b && NF' "$root/README.md")
	[ ${#cmds[@]} -gt 0 ] || { echo "fresh-check: no commands found in README.md's \"Try it, test it\" block" >&2; exit 1; }
	if [ $tests_only -eq 1 ]; then
		mapfile -t cmds < <(printf '%s\n' "${cmds[@]}" | grep 'make test')
	fi
fi

# What moves aside: the testbed's paths (the tests' list), then the caches.
paths=() kinds=()
while read -r p; do
	case $p in '' | '#'*) continue ;; '~/'*) p=$HOME/${p#'~/'} ;; esac
	paths+=("$p") kinds+=(testbed)
done <"$root/lab/testbed/testdata/host-paths"
if [ $keep_caches -eq 0 ]; then
	# Where the commands will look (FALCON_CACHE, FALCON_VENV: setup.sh's).
	caches=("${FALCON_CACHE:-/var/cache/falcon}" "${FALCON_VENV:-/opt/falcon-venv}" "$root/.cache")
	if command -v go >/dev/null 2>&1; then
		caches+=("$(go env GOCACHE)" "$(go env GOMODCACHE)")
	fi
	for p in "${caches[@]}"; do
		case $p in /?*) paths+=("$p") kinds+=(cache) ;; esac # not GOCACHE=off
	done
fi

# held PATH: a process that holds a file under PATH, or a mount under it;
# moving PATH would pull it from under them.
held() {
	local real
	real=$(realpath -m "$1")
	awk -v p="$real" '$5 == p || index($5, p "/") == 1 { print "a mount at " $5; exit }' /proc/self/mountinfo
	find /proc/[0-9]*/fd /proc/[0-9]*/cwd /proc/[0-9]*/exe -maxdepth 1 \( -lname "$real" -o -lname "$real/*" \) \
		-printf 'process %p\n' -quit 2>/dev/null
}

commit=$(git -C "$root" rev-parse HEAD) || exit 1
[ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ] ||
	log "note: uncommitted changes are not rehearsed (the clone is of $commit)"
busy=0
for i in "${!paths[@]}"; do
	p=${paths[$i]}
	[ -e "$p" ] || [ -L "$p" ] || { [ $dry -eq 1 ] && log "${kinds[$i]} $p: absent"; continue; }
	if [ -e "$p$suffix" ]; then
		echo "fresh-check: $p$suffix exists already: move it back or remove it first" >&2
		exit 1
	fi
	h=$(held "$p")
	if [ -n "$h" ]; then
		echo "fresh-check: $p is in use ($h): stop what uses it first" >&2
		busy=1
	fi
	[ $dry -eq 0 ] || log "${kinds[$i]} $p: would move aside to $p$suffix"
done
if [ $dry -eq 1 ]; then
	log "would clone $commit and run, in the clone:"
	printf '  %s\n' "${cmds[@]}"
	exit $busy
fi
[ $busy -eq 0 ] || exit 1

# Beside the checkout, not under /var/tmp or /tmp: the kernel guest
# (make test-guest) sees the host's files but mounts its own tmpfs there.
tmp=$(mktemp -d "${FRESH_CHECK_DIR:-$(dirname "$root")}/falcon-fresh.XXXXXX")
child=0
finish() {
	trap '' INT TERM HUP
	if [ "$child" -gt 0 ] && kill -0 "$child" 2>/dev/null; then
		log "stopping the running command"
		kill -TERM -- "-$child" 2>/dev/null
		for _ in $(seq 30); do kill -0 "$child" 2>/dev/null || break; sleep 1; done
		kill -KILL -- "-$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	down_testbeds
	restore
}
trap finish EXIT
interrupted() {
	log "interrupted ($1); the clone stays in $tmp"
	exit "$2"
}
trap 'interrupted SIGINT 130' INT
trap 'interrupted SIGTERM 143' TERM
trap 'interrupted SIGHUP 129' HUP

# Testbeds of a stopped command: their daemons run in sessions of their
# own, out of its reach. Those there before the rehearsal stay.
before_testbeds=$(ls /run/falcon/testbeds 2>/dev/null)
down_testbeds() {
	local bin=$tmp/falcon/bin/falcon-lab name
	[ -x "$bin" ] || return 0
	for name in $("$bin" testbed list 2>/dev/null | awk 'NR > 1 { print $1 }'); do
		grep -qxE "$name\.(json|d)" <<<"$before_testbeds" && continue
		log "removing testbed $name, left by the stopped command"
		"$bin" testbed down --name "$name"
	done
}

for i in "${!paths[@]}"; do
	p=${paths[$i]}
	# Recorded once moved (restore removes what is in a recorded path's
	# place); an absent one too, so that what the rehearsal makes there goes.
	if [ -e "$p" ] || [ -L "$p" ]; then
		mv -T "$p" "$p$suffix" || exit 1
		log "moved aside $p"
	fi
	echo "${kinds[$i]} $p" >>"$manifest"
done

# Who makes a path outside the testbed: every 2 s, a testbed path that
# has appeared is logged once with the time and the test binaries and
# daemons running then (a leftover names its path only at the end).
watch_paths() {
	local i p seen=" "
	while sleep 2; do
		for i in "${!paths[@]}"; do
			p=${paths[$i]}
			[ "${kinds[$i]}" = testbed ] || continue
			[[ $seen == *" $p "* ]] && continue
			[ -e "$p" ] || [ -L "$p" ] || continue
			seen+="$p "
			log "appeared $(date +%T): $p, while running: $(ps -eo comm= | grep -E '\.test$|^(dockerd|containerd|kubelet|kube-|etcd|flanneld|apt|dpkg)' | sort -u | tr '\n' ' ')"
		done
	done
}
watch_paths >>"$tmp/appeared.log" 2>&1 &
watcher=$!
# /tmp is shared with everything on the machine, so what the commands
# leave there is reported (and fails the rehearsal), not removed.
tmp_before=$(ls -A /tmp)

log "cloning $commit into $tmp/falcon"
git clone --quiet --no-checkout "$root" "$tmp/falcon" && git -C "$tmp/falcon" checkout --quiet --detach "$commit" || exit 1
cd "$tmp/falcon" || exit 1
results=() failed=0
for c in "${cmds[@]}"; do
	log "running: $c"
	start=$(date +%s)
	setsid -w bash -c "$c" &
	child=$!
	wait "$child"
	rc=$?
	child=0
	secs=$(($(date +%s) - start))
	results+=("$(printf '%-45s %s in %dm%02ds' "$c" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")" $((secs / 60)) $((secs % 60)))")
	[ $rc -eq 0 ] || failed=1
done
trap - EXIT
kill "$watcher" 2>/dev/null
finish
cat "$tmp/appeared.log"
log "results (commit ${commit:0:12}):"
printf '  %s\n' "${results[@]}"
if [ $leftovers -eq 1 ]; then
	log "FAILED: paths outside the testbed were left (above)"
	failed=1
fi
tmp_left=$(comm -13 <(sort <<<"$tmp_before") <(ls -A /tmp | sort))
if [ -n "$tmp_left" ]; then
	log "FAILED: the commands left in /tmp (not removed):"
	sed 's|^|  /tmp/|' <<<"$tmp_left"
	failed=1
fi
if [ $failed -eq 0 ]; then
	rm -rf "$tmp"
else
	log "the clone stays in $tmp (logs, results)"
fi
exit $failed
}
