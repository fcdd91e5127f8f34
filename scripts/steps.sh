#!/usr/bin/env bash
# The steps of make test and make test-guest: each runs to its end whatever
# the others did, and the last of the goals prints what failed, so that
# `make test test-guest` reports every failure (every package's, the
# guest's too) rather than stopping at the first. STEPS_DIR keeps one
# make's record (the Makefile names it by make's pid).
#   steps.sh begin FIRST GOAL   a new record, if GOAL is the first goal
#   steps.sh run NAME CMD...    runs CMD, its output also to NAME.log; exits 0
#   steps.sh tests NAME CMD...  the same, for a step that runs go test
#                               (scripts/kernels/run.sh too): its package
#                               lines end the summary
#   steps.sh end LAST GOAL      if GOAL is the last goal: the summary, and
#                               exit 1 if a step failed
set -uo pipefail
dir=${STEPS_DIR:?STEPS_DIR names the record}
case ${1:-} in
begin)
	if [ "$2" = "$3" ]; then
		rm -rf "$dir"
	fi
	mkdir -p "$dir"
	;;
run | tests)
	[ "$1" = run ] || echo "$2" >>"$dir/tests"
	name=$2
	shift 2
	start=$(date +%s)
	"$@" 2>&1 | tee "$dir/$name.log"
	rc=${PIPESTATUS[0]}
	echo "$name $rc $(($(date +%s) - start))" >>"$dir/status"
	[ "$rc" -eq 0 ] || echo "steps: $name failed (exit $rc); the next steps run all the same"
	;;
end)
	[ "$2" = "$3" ] || exit 0
	failed=()
	echo
	echo "== summary"
	while read -r name rc secs; do
		res=ok
		[ "$rc" -eq 0 ] || { res="FAILED (exit $rc)"; failed+=("$name"); }
		printf '  %-8s %-18s %5d s\n' "$name" "$res" "$secs"
	done <"$dir/status"
	# The failed tests, by package: go test prints a package's "--- FAIL"
	# lines before its FAIL line; the guest's summary marks them **failed**.
	for log in "$dir"/*.log; do
		awk '/^--- FAIL: / { t = t " " $3 }
			/^FAIL\t/ { print "  FAIL " $2 (t == "" ? "" : ":" t); t = "" }
			/^- \*\*failed\*\* / { print "  FAIL (guest) " $3 ": " $4 }
			/^- \*\*did not finish\*\* / { sub(/^- \*\*/, ""); sub(/\*\* /, " "); print "  FAIL (guest) " $0 }' "$log"
	done
	if [ ${#failed[@]} -gt 0 ]; then
		echo "FAILED: ${failed[*]}"
	else
		echo "every step passed"
	fi
	# go test's package lines (the guest's from its table) end the output.
	echo "== packages"
	while read -r name; do
		awk '/^(ok|FAIL)[ \t]+[^ \t]+[ \t]/ { print; next }
			/^\| / && match($0, / \| (ok|FAIL|did not finish)( \(exit [0-9]+\))? \|/) {
				printf "%-5s %s (guest)\n", substr($0, RSTART + 3, 2) == "ok" ? "ok" : "FAIL", $2 }' "$dir/$name.log"
	done < <(cat "$dir/tests" 2>/dev/null)
	rm -rf "$dir"
	[ ${#failed[@]} -eq 0 ]
	;;
*)
	echo "usage: steps.sh begin FIRST GOAL | run|tests NAME CMD... | end LAST GOAL" >&2
	exit 2
	;;
esac
