#!/usr/bin/env bash
# Runs every native Go fuzz target (func FuzzXxx in a _test.go file) for
# FUZZTIME each, one after the other (go test -fuzz takes one target at a
# time), and prints a table of targets, execs and findings. A finding is
# an input written to testdata/fuzz/<target>/; it is left there to become
# the regression seed of the fix. Usage: scripts/fuzz.sh [FUZZTIME] [PATTERN]
set -u
cd "$(dirname "$0")/.."
fuzztime=${1:-30s}
pattern=${2:-.}
go=${GO:-go}

# Minimising a new corpus entry may take up to a minute by default, during
# which no input is tried: bounded, so a short run mostly fuzzes.
minimize=5s

found=0
rows=()
while IFS=: read -r file name; do
	[[ $name =~ $pattern ]] || continue
	pkg=./$(dirname "$file")
	dir=$(dirname "$file")/testdata/fuzz/$name
	before=$(ls "$dir" 2>/dev/null | sort)
	log=$(mktemp)
	echo "== $pkg $name ($fuzztime)"
	$go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" >"$log" 2>&1
	rc=$?
	execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
	new=$(comm -13 <(echo "$before") <(ls "$dir" 2>/dev/null | sort) | grep . | tr '\n' ' ')
	result=ok
	if [ "$rc" -ne 0 ]; then
		if [ -n "$new" ]; then
			result="FOUND: $dir/$new"
			found=1
		elif grep -q 'context deadline exceeded' "$log" && ! grep -q -- '--- FAIL: .*/' "$log"; then
			# Go 1.26's coordinator can report its own -fuzztime deadline
			# as a failure, with no input (go.dev/issue/75804).
			result="ok (fuzztime deadline race, go.dev/issue/75804: no input)"
			# Its FAIL lines are relabelled: steps.sh's summary lists
			# them as failed tests and packages.
			sed -i -e 's/^--- FAIL: /--- accepted deadline race: /' \
				-e 's/^FAIL\t/accepted deadline race (go.dev\/issue\/75804)\t/' "$log"
		else
			result="FAILED (no input written; see the log above)"
			cat "$log"
			found=1
		fi
	fi
	[[ $result == FAILED* ]] || tail -n 3 "$log"
	rows+=("| $pkg | $name | $fuzztime | ${execs:-0} | $result |")
	rm -f "$log"
done < <(grep -o --include='*_test.go' -r '^func Fuzz[A-Za-z0-9_]*' internal lab cmd | sed 's/func //' | sort)

echo
echo "| package | target | time | execs | result |"
echo "| --- | --- | --- | ---: | --- |"
printf '%s\n' "${rows[@]}"
exit $found
