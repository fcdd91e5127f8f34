# shellcheck shell=bash
# debian_mirror [ROOT]: prints the Debian archive the machine's apt already
# uses, read as apt reads its sources: ROOT/etc/apt/sources.list, then
# ROOT/etc/apt/sources.list.d/*.list and *.sources in name order (one-line
# and deb822 formats; comments, deb-src, disabled entries and the security
# archive skipped). The first entry of a Debian suite wins, its URI as
# written (a site mirror, a caching proxy's URL or mirror+file: all work
# unchanged). FALCON_DEBIAN_MIRROR overrides it. Fails, saying so, when the
# machine has no Debian source (Ubuntu, for one).
debian_mirror() {
	local root=${1:-} f files=() uri
	if [ -n "${FALCON_DEBIAN_MIRROR:-}" ]; then
		echo "${FALCON_DEBIAN_MIRROR%/}"
		return 0
	fi
	[ -f "$root/etc/apt/sources.list" ] && files+=("$root/etc/apt/sources.list")
	for f in "$root"/etc/apt/sources.list.d/*; do
		case $f in *.list | *.sources) [ -f "$f" ] && files+=("$f") ;; esac
	done
	uri=""
	for f in "${files[@]}"; do
		case $f in
		*.sources) uri=$(_debian_mirror_deb822 <"$f") ;;
		*) uri=$(_debian_mirror_oneline <"$f") ;;
		esac
		[ -z "$uri" ] || break
	done
	if [ -z "$uri" ]; then
		echo "no Debian archive in $root/etc/apt/sources.list{,.d/} (a deb entry of a Debian suite such as bookworm or trixie): set FALCON_DEBIAN_MIRROR to a Debian mirror's URL" >&2
		return 1
	fi
	echo "${uri%/}"
}

# A Debian suite (stable's codename or alias, or its -updates or
# -backports), not the security archive, which holds no kernel images.
_debian_mirror_suite='^(buster|bullseye|bookworm|trixie|forky|duke|sid|stable|testing|unstable|oldstable|oldoldstable)(-updates|-backports|-proposed-updates)?$'

# One-line format: "deb [options] URI SUITE COMPONENT...".
_debian_mirror_oneline() {
	awk -v re="$_debian_mirror_suite" '
		{ sub(/#.*/, ""); gsub(/\[[^]]*\]/, "") }
		$1 == "deb" && $3 ~ re { print $2; exit }'
}

# deb822: paragraphs of "Field: value" lines; continuation lines (a
# multi-line Signed-By key) begin with white space.
_debian_mirror_deb822() {
	awk -v re="$_debian_mirror_suite" '
		function done() {
			if (types ~ /(^| )deb( |$)/ && tolower(enabled) != "no")
				for (i = 1; i <= ns; i++) if (suites[i] ~ re) { print uri; found = 1; exit }
			types = ""; enabled = ""; uri = ""; ns = 0
		}
		/^#/ { next }
		/^[ \t]*$/ { done(); next }
		/^[ \t]/ { next }
		{
			key = tolower($1); val = $0; sub(/^[^:]*:[ \t]*/, "", val); sub(/[ \t]+$/, "", val)
			if (key == "types:") types = val
			else if (key == "enabled:") enabled = val
			else if (key == "uris:") { split(val, u, /[ \t]+/); uri = u[1] }
			else if (key == "suites:") ns = split(val, suites, /[ \t]+/)
		}
		END { if (!found) done() }'
}
