#!/usr/bin/env bash
# packaging/version.sh [--windows | --test]
#
# Prints the version the packages carry, from git:
#
#   at tag v1.2.3                      1.2.3
#   at tag v1.2.3-rc.1                 1.2.3~rc.1      (before 1.2.3)
#   5 commits after v1.2.3             1.2.3+5.gabc1234 (after 1.2.3, before 1.2.4)
#   no v* tag yet (FyneApp.toml 0.1.0) 0.1.0~dev.123.gabc1234 (123 commits; before 0.1.0)
#   uncommitted changes                ... .dirty appended (after a count and hash)
#
# Each is a valid Debian and RPM version, and they sort as the commits do.
# With --windows it prints the numeric form Windows' version resources and
# the installer need: MAJOR.MINOR.PATCH.N, N the commits since the tag (or
# since the start when there is no tag), 0 at a tag.
#
# GATEHOUSE_VERSION, when set, is used instead of git (a build from a source
# archive); it must have the form above. --test checks the mapping.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
	printf 'gatehouse version: %s\n' "$1" >&2
	[ $# -lt 2 ] || printf 'hint: %s\n' "$2" >&2
	exit 1
}

# valid VERSION: true if VERSION has a form the packages accept.
valid() {
	[[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+([~+][0-9A-Za-z][0-9A-Za-z.~+]*)?$ ]]
}

# map DESCRIBE BASE COUNT: the package version for `git describe --tags
# --long --dirty --match 'v[0-9]*'` output DESCRIBE (empty without a tag),
# the FyneApp.toml version BASE, COUNT commits in all and the short hash in
# $hash, dirty or not in $dirty.
map() {
	local describe=$1 base=$2 count=$3 v
	if [ -z "$describe" ]; then
		v="$base~dev.$count.g$hash"
	else
		describe=${describe%-dirty}
		local n tag
		n=${describe%-g*}
		n=${n##*-}
		tag=${describe%-*-g*}
		tag=${tag#v}
		# A pre-release tag (v1.2.3-rc.1) sorts before its release.
		case "$tag" in *-*) tag="${tag%%-*}~${tag#*-}" ;; esac
		if [ "$n" = 0 ] && [ -z "$dirty" ]; then
			v=$tag
		else
			v="$tag+$n.g$hash"
		fi
	fi
	[ -z "$dirty" ] || v="$v.dirty"
	printf '%s\n' "$v"
}

# windows VERSION COUNT: MAJOR.MINOR.PATCH.N for VERSION, N the number after
# "+" or "~dev." (COUNT commits), else 0.
windows() {
	local v=$1 core n=0
	core=${v%%[~+]*}
	case "$v" in
	*+*) n=${v#*+} n=${n%%.*} ;;
	*~dev.*) n=${v#*~dev.} n=${n%%.*} ;;
	esac
	local part
	for part in ${core//./ } $n; do
		[ "$part" -le 65535 ] || die "version $v: $part is more than Windows' 65535"
	done
	printf '%s.%s\n' "$core" "$n"
}

base_version() {
	local v
	v=$(sed -n 's/^[[:space:]]*Version[[:space:]]*=[[:space:]]*"\(.*\)"[[:space:]]*$/\1/p' FyneApp.toml | head -n1)
	[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "FyneApp.toml: Version \"$v\" is not MAJOR.MINOR.PATCH"
	printf '%s\n' "$v"
}

self_test() {
	local failed=0 cases=0 got want
	check() { # check WANT DESCRIBE BASE COUNT HASH DIRTY
		cases=$((cases + 1))
		hash=$5 dirty=$6
		got=$(map "$2" "$3" "$4")
		if [ "$got" != "$1" ]; then
			echo "map($2, $3, $4, $5, dirty=$6) = $got, want $1"
			failed=$((failed + 1))
		elif ! valid "$got"; then
			echo "map($2, ...) = $got: not a valid version"
			failed=$((failed + 1))
		fi
	}
	check 1.2.3 v1.2.3-0-gabc1234 0.1.0 40 abc1234 ''
	check 1.2.3+5.gabc1234 v1.2.3-5-gabc1234 0.1.0 45 abc1234 ''
	check 1.2.3+0.gabc1234.dirty v1.2.3-0-gabc1234-dirty 0.1.0 40 abc1234 1
	check 1.2.3~rc.1 v1.2.3-rc.1-0-gabc1234 0.1.0 40 abc1234 ''
	check 1.2.3~rc.1+2.gabc1234 v1.2.3-rc.1-2-gabc1234 0.1.0 42 abc1234 ''
	check 0.1.0~dev.123.gabc1234 '' 0.1.0 123 abc1234 ''
	check 0.1.0~dev.123.gabc1234.dirty '' 0.1.0 123 abc1234 1
	for pair in 1.2.3:1.2.3.0 1.2.3+5.gabc:1.2.3.5 0.1.0~dev.123.gabc.dirty:0.1.0.123 1.2.3~rc.1:1.2.3.0; do
		cases=$((cases + 1))
		got=$(windows "${pair%%:*}")
		want=${pair#*:}
		[ "$got" = "$want" ] || { echo "windows(${pair%%:*}) = $got, want $want"; failed=$((failed + 1)); }
	done
	if (windows 1.70000.0) >/dev/null 2>&1; then
		echo "windows(1.70000.0): no error, want one"
		failed=$((failed + 1))
	fi
	# The order the package managers see is the order of the commits.
	local order=(0.1.0~dev.9.gaaa 0.1.0~dev.10.gbbb 0.1.0~rc.1 0.1.0 0.1.0+1.gccc 0.1.0+1.gccc.dirty 0.1.0+12.gddd 0.1.1~rc.1 0.1.1)
	if command -v dpkg >/dev/null 2>&1; then
		local i
		for ((i = 1; i < ${#order[@]}; i++)); do
			dpkg --compare-versions "${order[i - 1]}" lt "${order[i]}" ||
				{ echo "dpkg: ${order[i - 1]} does not sort before ${order[i]}"; failed=$((failed + 1)); }
		done
	fi
	if command -v rpmdev-vercmp >/dev/null 2>&1 || command -v rpm >/dev/null 2>&1; then
		for ((i = 1; i < ${#order[@]}; i++)); do
			local r
			r=$(rpm --eval "%{lua: print(rpm.vercmp('${order[i - 1]}', '${order[i]}'))}" 2>/dev/null) || r=
			[ -z "$r" ] || [ "$r" = -1 ] ||
				{ echo "rpm: ${order[i - 1]} does not sort before ${order[i]}"; failed=$((failed + 1)); }
		done
	fi
	echo "version.sh: $cases mapping cases, $((${#order[@]} - 1)) orderings; $failed failed"
	[ "$failed" = 0 ]
}

mode=${1:-}
case "$mode" in
--test)
	self_test
	exit
	;;
"" | --windows) ;;
*) die "unknown argument $mode" "usage: packaging/version.sh [--windows | --test]" ;;
esac

if [ -n "${GATEHOUSE_VERSION:-}" ]; then
	version=$GATEHOUSE_VERSION
	valid "$version" || die "GATEHOUSE_VERSION=$version is not a package version" "use MAJOR.MINOR.PATCH, optionally followed by ~PRERELEASE or +BUILD (letters, digits, dots)"
else
	git rev-parse --git-dir >/dev/null 2>&1 ||
		die "not a git checkout: the version comes from git" "set GATEHOUSE_VERSION=MAJOR.MINOR.PATCH"
	hash=$(git rev-parse --short=7 HEAD)
	dirty=
	# Refresh the index first, so that a touched but unchanged file is clean.
	git update-index -q --refresh >/dev/null 2>&1 || true
	git diff-index --quiet HEAD -- || dirty=1
	describe=$(git describe --tags --long --match 'v[0-9]*' HEAD 2>/dev/null) || describe=
	version=$(map "$describe" "$(base_version)" "$(git rev-list --count HEAD)")
	valid "$version" || die "the version from git, $version, is not a package version" "tag releases vMAJOR.MINOR.PATCH (or vMAJOR.MINOR.PATCH-PRERELEASE)"
fi

if [ "$mode" = --windows ]; then
	windows "$version"
else
	printf '%s\n' "$version"
fi
