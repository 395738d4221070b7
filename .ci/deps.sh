#!/usr/bin/env bash
# deps.sh run|test|package
#
# Checks what `make run` (run), `make test` (test) or `make package` and
# `make package-check` (package) need. On Debian/Ubuntu,
# as root, it installs the missing packages with apt-get; as any other user it
# prints what is missing and the command that installs it, and exits 1.
# Then it downloads the Go modules and, for test, installs the pinned npm test
# peers in cmd/gatehouse/testdata/npm; for package, the packaging tools' Go modules.
# Quick when everything is present.
#
# On macOS and Windows it checks the few tools it can and says what to install.

set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-}
case "$mode" in
run | test | package) ;;
*)
	echo "usage: .ci/deps.sh run|test|package" >&2
	exit 2
	;;
esac

GO_MIN=1.26.8
NODE_MIN=20

# Debian packages. run: the cgo build of the Fyne GL driver, and Mesa to draw.
RUN_PKGS=(gcc libc6-dev pkg-config libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev
	libxinerama-dev libxi-dev libxxf86vm-dev libgl1-mesa-dri)
# test: a virtual display and screenshots for the GUI tests, a private D-Bus
# session with gnome-keyring for the keychain tests, tmux for terminal tests.
TEST_PKGS=(xvfb xauth dbus dbus-x11 gnome-keyring libsecret-tools imagemagick xdotool tmux)
# package: the Windows cross build (MinGW-w64, windres) and installer (NSIS),
# zip, and what packaging/check.sh uses: a Debian root to install the .deb
# into, rpm, desktop-file-validate, xmllint, and Wine to run the Windows
# programs and installer.
PACKAGE_PKGS=(binutils gcc-mingw-w64-x86-64 binutils-mingw-w64-x86-64 nsis zip unzip debootstrap rpm
	desktop-file-utils libxml2-utils wine64)

NODESOURCE_HINT="curl -fsSL https://deb.nodesource.com/setup_${NODE_MIN}.x | sudo -E bash - && sudo apt-get install -y nodejs"

say() { printf 'gatehouse deps: %s\n' "$*" >&2; }
hint() { printf 'hint: %s\n' "$*" >&2; }

is_root() { [ "$(id -u)" = 0 ]; }

failed=0
fail() { failed=1; }

# --- Go ---------------------------------------------------------------------
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi

version_ge() { # version_ge 1.26.8 1.26: true if $1 >= $2
	[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]
}

check_go() {
	if ! command -v go >/dev/null 2>&1; then
		say "missing: Go (Go $GO_MIN or later is needed; not found on PATH nor in /usr/local/go/bin)"
		case "$(uname -s)" in
		Linux) hint "download it from https://go.dev/dl/, e.g. curl -fsSL https://go.dev/dl/go1.26.8.linux-$(go_arch).tar.gz | sudo tar -C /usr/local -xz  (then add /usr/local/go/bin to PATH; Debian's golang package is older)" ;;
		Darwin) hint "brew install go   (or the installer from https://go.dev/dl/)" ;;
		*) hint "winget install GoLang.Go   (or the installer from https://go.dev/dl/)" ;;
		esac
		fail
		return
	fi
	local v
	if ! v=$(go env GOVERSION 2>/dev/null); then
		say "go env GOVERSION failed: $(go env GOVERSION 2>&1 | head -n1)"
		fail
		return
	fi
	v=${v#go}
	v=${v%%[-+ ]*}
	if ! version_ge "$v" "$GO_MIN"; then
		say "missing: Go $GO_MIN or later (found go$v at $(command -v go))"
		hint "install Go $GO_MIN from https://go.dev/dl/"
		fail
	fi
}

go_arch() {
	case "$(uname -m)" in
	x86_64 | amd64) echo amd64 ;;
	aarch64 | arm64) echo arm64 ;;
	*) uname -m ;;
	esac
}

# --- Node.js ----------------------------------------------------------------
node_major() { # prints the major version of node on PATH, or nothing
	local v
	command -v node >/dev/null 2>&1 || return 0
	v=$(node --version 2>/dev/null) || return 0
	v=${v#v}
	echo "${v%%.*}"
}

node_ok() {
	local m
	m=$(node_major)
	[ -n "$m" ] && [ "$m" -ge "$NODE_MIN" ] && command -v npm >/dev/null 2>&1
}

node_found() { # a description of the node on PATH, for messages
	if command -v node >/dev/null 2>&1; then
		echo "found node $(node --version 2>/dev/null) at $(command -v node)$(command -v npm >/dev/null 2>&1 || echo ', no npm')"
	else
		echo "no node on PATH"
	fi
}

apt_candidate() { # apt_candidate PKG: the version apt would install, or nothing
	local v
	v=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
	[ "$v" = "(none)" ] && v=
	echo "${v#*:}"
}

# --- Debian / Ubuntu ----------------------------------------------------------
missing_debs() { # prints the packages of "$@" that are not installed
	local installed
	installed=$(dpkg-query -W -f='${Package} ${Status}\n' "$@" 2>/dev/null |
		awk '$4 == "installed" {print $1}') || true
	local p
	for p in "$@"; do
		grep -qxF "$p" <<<"$installed" || echo "$p"
	done
}

apt_updated=
apt_update() {
	[ -n "$apt_updated" ] && return 0
	say "apt-get update"
	DEBIAN_FRONTEND=noninteractive apt-get update -q
	apt_updated=1
}

apt_install() {
	apt_update
	say "installing: $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends -q "$@"
}

debian_deps() {
	local pkgs=("${RUN_PKGS[@]}")
	[ "$mode" = test ] && pkgs+=("${TEST_PKGS[@]}")
	[ "$mode" = package ] && pkgs+=("${PACKAGE_PKGS[@]}")

	local missing=()
	mapfile -t missing < <(missing_debs "${pkgs[@]}")

	# Node.js >= 20 with npm. Debian's own nodejs may be older: use it only if
	# the version apt offers is new enough.
	local need_node='' node_debs=() node_hint=''
	if [ "$mode" = test ] && ! node_ok; then
		need_node=1
		if [ -n "$(node_major)" ] && [ "$(node_major)" -ge "$NODE_MIN" ]; then
			# A recent node without npm: Debian ships npm on its own.
			node_debs=(npm)
		else
			# As root, judge apt's offer on fresh package lists.
			if is_root; then apt_update; fi
			local cand
			cand=$(apt_candidate nodejs)
			if [ -n "$cand" ] && [ "${cand%%.*}" -ge "$NODE_MIN" ] 2>/dev/null; then
				node_debs=(nodejs)
				# NodeSource's nodejs carries npm; Debian's does not.
				case "$cand" in *nodesource*) ;; *) command -v npm >/dev/null 2>&1 || node_debs+=(npm) ;; esac
			else
				node_hint="Node.js $NODE_MIN or later is needed ($(node_found)); apt offers nodejs ${cand:-(none)}. Install it from NodeSource: $NODESOURCE_HINT  (or from https://nodejs.org)"
			fi
		fi
	fi

	if [ ${#missing[@]} -eq 0 ] && [ ${#node_debs[@]} -eq 0 ] && [ -z "$node_hint" ]; then
		return 0
	fi

	if is_root; then
		local install=("${missing[@]}" "${node_debs[@]}")
		[ ${#install[@]} -gt 0 ] && apt_install "${install[@]}"
		if [ -n "$need_node" ] && ! node_ok && [ -z "$node_hint" ]; then
			# nodejs came without npm after all.
			command -v npm >/dev/null 2>&1 || apt_install npm
			node_ok || node_hint="Node.js $NODE_MIN or later with npm is still missing ($(node_found)). Install it from NodeSource: $NODESOURCE_HINT"
		fi
		if [ -n "$node_hint" ]; then
			say "missing: Node.js >= $NODE_MIN"
			hint "$node_hint"
			fail
		fi
		return 0
	fi

	local apt_list=("${missing[@]}" "${node_debs[@]}")
	if [ ${#node_debs[@]} -gt 0 ]; then
		say "Node.js $NODE_MIN or later with npm is needed ($(node_found)); apt offers it"
	fi
	if [ ${#apt_list[@]} -gt 0 ]; then
		say "missing: ${apt_list[*]}"
		hint "sudo apt-get install ${apt_list[*]}   (or run .ci/deps.sh $mode as root)"
	fi
	if [ -n "$node_hint" ]; then
		say "missing: Node.js >= $NODE_MIN"
		hint "$node_hint"
	fi
	fail
}

# --- Other systems -------------------------------------------------------------
other_deps() {
	local os
	os=$(uname -s)
	case "$os" in
	Darwin)
		if ! xcode-select -p >/dev/null 2>&1; then
			say "missing: Xcode Command Line Tools (the C compiler for the GUI; nothing else is needed)"
			hint "xcode-select --install"
			fail
		fi
		;;
	MINGW* | MSYS* | CYGWIN*)
		if ! command -v gcc >/dev/null 2>&1; then
			say "missing: gcc (a mingw-w64 gcc, for the GUI's cgo build)"
			hint "install MSYS2 (https://www.msys2.org), run: pacman -S --needed mingw-w64-ucrt-x86_64-gcc  and add C:\\msys64\\ucrt64\\bin to PATH"
			fail
		fi
		;;
	*)
		say "not a Debian/Ubuntu system: install the equivalents of the Debian packages"
		say "  run:  ${RUN_PKGS[*]}"
		[ "$mode" = test ] && say "  test: ${TEST_PKGS[*]}"
		[ "$mode" = package ] && say "  package: ${PACKAGE_PKGS[*]}"
		local t missing=()
		for t in gcc pkg-config; do command -v "$t" >/dev/null 2>&1 || missing+=("$t"); done
		if [ "$mode" = test ]; then
			for t in dbus-run-session dbus-send gnome-keyring-daemon Xvfb; do
				command -v "$t" >/dev/null 2>&1 || missing+=("$t")
			done
		fi
		if [ ${#missing[@]} -gt 0 ]; then
			say "missing: ${missing[*]}"
			fail
		fi
		;;
	esac

	if [ "$mode" = test ] && ! node_ok; then
		say "missing: Node.js >= $NODE_MIN with npm ($(node_found))"
		case "$os" in
		Darwin) hint "brew install node@$NODE_MIN   (or the installer from https://nodejs.org)" ;;
		MINGW* | MSYS* | CYGWIN*) hint "winget install OpenJS.NodeJS.LTS   (or the installer from https://nodejs.org)" ;;
		*) hint "install Node.js $NODE_MIN or later from your distribution or https://nodejs.org" ;;
		esac
		fail
	fi
}

# --- Main -------------------------------------------------------------------
if command -v dpkg-query >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
	debian_deps
else
	other_deps
fi
check_go

if [ "$failed" != 0 ]; then
	exit 1
fi

go mod download
if [ "$mode" = package ]; then
	(cd packaging/tools && go mod download)
fi

# npm_install DIR: installs exactly what DIR/package-lock.json pins.
npm_install() {
	local dir=$1
	if ! (cd "$dir" && npm ci --no-audit --no-fund); then
		say "npm ci failed in $dir"
		hint "if package.json changed: cd $dir && npm install --no-audit --no-fund, then review and commit package-lock.json"
		return 1
	fi
}

if [ "$mode" = test ]; then
	npm_dir=cmd/gatehouse/testdata/npm
	stamp=$npm_dir/node_modules/.gatehouse-installed
	if [ ! -d "$npm_dir/node_modules" ] || [ ! -e "$stamp" ] ||
		[ "$npm_dir/package-lock.json" -nt "$stamp" ] || [ "$npm_dir/package.json" -nt "$stamp" ]; then
		say "installing the pinned test peers in $npm_dir"
		npm_install "$npm_dir"
		touch "$stamp"
	fi
fi
