#!/usr/bin/env bash
# Validates falcon's Kubernetes manifests against the Kubernetes API schemas,
# offline: kubernetes-validate carries the JSON schemas of every Kubernetes
# release it supports inside its wheel, so no cluster and no network is
# needed once it is installed (into a venv, as Debian's pip is externally
# managed).
#
# usage: validate.sh [-k VERSION]... [FILE...]   validate (default: *.yaml here,
#                                                against 1.30 and the newest)
#        validate.sh --install                   only install the validator
#        validate.sh --json [FILE...]            print the documents as JSON
#
# FALCON_VENV (default /opt/falcon-venv) is where the validator lives; it is
# installed there on first use.
set -euo pipefail

venv=${FALCON_VENV:-/opt/falcon-venv}
pkg=kubernetes-validate
ver=1.37.0
# 1.30 is the oldest release with securityContext.appArmorProfile.
min_k8s=1.30
here=$(cd "$(dirname "$0")" && pwd)

installed() {
	[ -x "$venv/bin/kubernetes-validate" ] &&
		[ "$("$venv/bin/python" -c 'import kubernetes_validate.version as v; print(v.__version__)' 2>/dev/null)" = "$ver" ]
}

install() {
	installed && return 0
	echo "validate: installing $pkg $ver into $venv" >&2
	if [ ! -x "$venv/bin/pip" ]; then
		python3 -m venv "$venv" || {
			echo "validate: cannot create a venv at $venv (Debian: apt-get install python3-venv; or set FALCON_VENV)" >&2
			return 1
		}
	fi
	"$venv/bin/pip" install -q --disable-pip-version-check "$pkg==$ver" || {
		echo "validate: pip install $pkg==$ver failed (needs PyPI once)" >&2
		return 1
	}
	installed
}

mode=validate versions=()
while [ $# -gt 0 ]; do
	case $1 in
	--install) mode=install; shift ;;
	--json) mode=json; shift ;;
	-k) versions+=("$2"); shift 2 ;;
	-h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "validate: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done

install || exit 3
[ "$mode" = install ] && exit 0

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
	files=("$here"/*.yaml)
fi

if [ "$mode" = json ]; then
	exec "$venv/bin/python" - "${files[@]}" <<'EOF'
import json, sys, yaml
docs = []
for f in sys.argv[1:]:
    with open(f) as fh:
        docs += [{"file": f, "doc": d} for d in yaml.safe_load_all(fh) if d]
json.dump(docs, sys.stdout)
EOF
fi

if [ ${#versions[@]} -eq 0 ]; then
	newest=$("$venv/bin/python" -c 'import kubernetes_validate.utils as u; print(u.latest_version())')
	versions=("$min_k8s" "$newest")
fi
args=(--strict)
for v in "${versions[@]}"; do args+=(-k "$v"); done

# --strict rejects fields the schema does not know. A kind without a schema
# is only a WARN to kubernetes-validate; here it is an error, as is anything
# but a passing line.
rc=0
out=$("$venv/bin/kubernetes-validate" "${args[@]}" "${files[@]}" 2>&1) || rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ] || printf '%s\n' "$out" | grep -qv '^INFO '; then
	echo "validate: FAILED" >&2
	exit 1
fi
echo "validate: ${#files[@]} files valid for Kubernetes ${versions[*]}"
