#!/usr/bin/env bash
# Writes the Markdown summary of one kernel's run (scripts/kernels/run.sh)
# to stdout; exits 1 when a package failed or did not finish.
# Usage: summary.sh SERIES OUTDIR SECONDS
set -uo pipefail
series=$1 out=$2 secs=$3
. "$out/env"
status=0
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
echo "# falcon on Debian's Linux $series ($KREL)"
echo
if [ "$ACCEL" = kvm ]; then how="KVM, \`-cpu host -smp 2 -m 4G\`"; else how="software emulation (TCG), \`-cpu max -smp 2 -m 4G\`"; fi
echo "Package \`$(cat "$(dirname "$KROOT")/package")\`, booted by \`make test-kernels\` under QEMU ($how,"
echo "the host's root shared read-only over virtio-9p) on a host with"
echo "$(nproc) vCPUs ($cpu), kernel $(uname -r). Whole run, boot to power-off: ${secs} s."
if [ "$ACCEL" = tcg ] && [ -d /sys/module/kvm_pvm ]; then
	echo "Emulated, not KVM: this host's /dev/kvm is PVM (kvm_pvm, a paravirtual nested KVM), which"
	echo "cannot boot stock kernels; emulation makes every test slower, not a kernel feature different."
fi
[ ! -s "$out/holdkeys.txt" ] || { echo; echo "Held for the whole run (scripts/kernels/guest.sh says why): \`$(head -1 "$out/holdkeys.txt")\`."; }
[ ! -f "$out/rebooted" ] || { echo; cat "$out/rebooted"; }
echo
echo "## falcon doctor"
echo
echo '```'
cat "$out/doctor.txt" 2>/dev/null || echo "(no output: the guest did not get this far)"
echo '```'
echo
echo "## Tests"
echo
echo "| package | result | passed | failed | skipped | seconds |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for t in $TESTS; do
	pkg=${t%%:*} name=$(basename "${t%%:*}")
	log=$out/$name.log
	filter=
	[ "$t" != "$pkg" ] && filter=" (-run ${t#*:})"
	if [ ! -s "$out/$name.rc" ]; then
		echo "| $pkg$filter | did not finish | | | | |"
		status=1
		continue
	fi
	read -r rc took <"$out/$name.rc"
	p=$(grep -c '^--- PASS' "$log")
	f=$(grep -c '^--- FAIL' "$log")
	s=$(grep -c '^--- SKIP' "$log")
	res=ok
	[ "$rc" = 0 ] || { res="FAIL (exit $rc)"; status=1; }
	echo "| $pkg$filter | $res | $p | $f | $s | $took |"
done
echo
if [ -n "${SKIP:-}" ]; then
	echo 'Not run in the guest (`KERNEL_SKIP`, `go test -test.skip`): tests that only hold falcon to a speed'
	echo "or a volume, which software emulation cannot reach — emulator speed, not a kernel feature —"
	echo "and the layout sweeps' cases beyond docker and docker-ipv6, whose layouts differ in names and"
	echo "addresses, not in what the kernel does (scripts/kernels/run.sh says why, test by test):"
	echo
	for k in $SKIP; do echo "- ${k%%:*}: \`${k#*:}\`"; done
	echo
fi
for t in $TESTS; do
	name=$(basename "${t%%:*}")
	log=$out/$name.log
	[ -f "$log" ] || continue
	# go test -v prints a test's log (the skip reason) after its "=== RUN"
	# line and before its "--- SKIP" line; subtests are indented. A failed
	# test's last log lines follow its line: CI shows only the end of its
	# output, so the reason has to be here.
	awk -v pkg="${t%%:*}" -v keep=12 '
		/^=== (RUN|CONT) / { cur = $3; next }
		/^    [^ -]/ && cur != "" {
			s = $0; sub(/^ +/, "", s)
			if (!(cur in why)) why[cur] = s
			n[cur]++; tail[cur, n[cur] % keep] = substr(s, 1, 300)
			next
		}
		/^ *--- SKIP: / { printf "- skipped %s %s: %s\n", pkg, $3, ($3 in why) ? why[$3] : "(no reason logged)"; next }
		/^ *--- FAIL: / {
			printf "- **failed** %s %s\n", pkg, $3
			if (n[$3] == 0) next
			print "  ```"
			for (i = (n[$3] > keep ? n[$3] - keep + 1 : 1); i <= n[$3]; i++) print "  " tail[$3, i % keep]
			print "  ```"
		}
	' "$log"
done
# Last, because CI shows only the end of the output: a package that did not
# finish, the test it was in, and what stopped the guest (the watchdog's
# line, QEMU's timeout), which the table above cannot say.
for t in $TESTS; do
	name=$(basename "${t%%:*}")
	[ ! -s "$out/$name.rc" ] || continue
	running=$(awk '/^=== (RUN|CONT) / { open[$3] = NR }
		/^ *--- (PASS|FAIL|SKIP): / { delete open[$3] }
		END { for (k in open) if (open[k] > n) { n = open[k]; last = k }; print last }' "$out/$name.log" 2>/dev/null)
	echo "- **did not finish** ${t%%:*}: ${running:-no test} was running"
done
[ ! -f "$out/rebooted" ] || echo "- the guest was booted twice: $(head -2 "$out/rebooted" | tr '\n' ' ')"
[ ! -f "$out/hung" ] || echo "- the watchdog stopped the guest (nothing written for KERNEL_STALL minutes); last line: $(cat "$out/hung")"
grep -h '^test-kernels: QEMU exited' "$out/console.log" 2>/dev/null | sed 's/^/- /'
# The kernel prints only errors to the console (loglevel=4): a stall or
# lockup report there says why a boot stopped.
for c in "$out.hung/console.log" "$out/console.log"; do
	grep -E '^\[ *[0-9.]+\] ' "$c" 2>/dev/null | grep -v -E 'sysrq: Power Off|reboot: Power down' | tail -3 |
		sed "s|^|- $(basename "$(dirname "$c")") console: |" | cut -c1-240
done
exit $status
