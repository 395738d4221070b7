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
# The pinned test peers' own floor (the MCP Inspector declares >=22.19.0).
NODE_MIN=22.19
NODE_MAJOR=${NODE_MIN%%.*}

# Debian packages. run: the cgo build of the Fyne GL driver, and Mesa to draw.
RUN_PKGS=(gcc libc6-dev pkg-config libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev
	libxinerama-dev libxi-dev libxxf86vm-dev libgl1-mesa-dri)
# test: a virtual display and screenshots for the GUI tests, a private D-Bus
# session with gnome-keyring for the keychain tests, tmux for terminal tests,
# Python for the test that reads every message as Python's json does (Node,
# the other reader, comes with the npm peers below), rsyslog for the test
# that exports the evidence to a real syslog receiver.
TEST_PKGS=(xvfb xauth dbus dbus-x11 gnome-keyring libsecret-tools imagemagick xdotool tmux python3 rsyslog)
# package: the Windows cross build (MinGW-w64, windres) and installer (NSIS),
# zip, and what packaging/check.sh uses: a Debian root to install the .deb
# into, rpm, desktop-file-validate, xmllint, and Wine to run the Windows
# programs and installer.
PACKAGE_PKGS=(binutils gcc-mingw-w64-x86-64 binutils-mingw-w64-x86-64 nsis zip unzip debootstrap rpm
	desktop-file-utils libxml2-utils wine64)

# Node.js from the registries alone: Debian's npm (which brings Debian's
# older nodejs), then the npm registry's build of Node.
NODE_INSTALL="apt-get install npm && npm install -g --prefix /usr/local node@$NODE_MAJOR"

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
		Linux) hint "unpack Go $GO_MIN for linux-$(go_arch) into /usr/local/go (and add /usr/local/go/bin to PATH); Debian's golang package is older" ;;
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
node_version() { # prints the version of node on PATH (22.23.3), or nothing
	local v
	command -v node >/dev/null 2>&1 || return 0
	v=$(node --version 2>/dev/null) || return 0
	echo "${v#v}"
}

node_ok() {
	local v
	v=$(node_version)
	[ -n "$v" ] && version_ge "$v" "$NODE_MIN" && command -v npm >/dev/null 2>&1
}

node_found() { # a description of the node on PATH, for messages
	if command -v node >/dev/null 2>&1; then
		echo "found node $(node --version 2>/dev/null) at $(command -v node)$(command -v npm >/dev/null 2>&1 || echo ', no npm')"
	else
		echo "no node on PATH"
	fi
}

# npm_run DIR ARGS...: runs npm in DIR; when it fails, says why in words
# that fit the cause (the network, a certificate, the lock file) and
# returns 1.
npm_run() {
	local dir=$1 out
	shift
	if out=$(cd "$dir" && npm "$@" 2>&1); then
		printf '%s\n' "$out" | grep -v '^npm warn' >&2 || true
		return 0
	fi
	printf '%s\n' "$out" | tail -n 20 >&2
	say "npm $* failed in $dir"
	case "$out" in
	*ENOTFOUND* | *EAI_AGAIN* | *ECONNREFUSED* | *ECONNRESET* | *ETIMEDOUT* | *ENETUNREACH* | *"network request"*)
		hint "npm could not reach its registry ($(npm config get registry 2>/dev/null)): check the network and any proxy (npm config get proxy), then run the command again" ;;
	*CERT* | *certificate* | *SSL* | *"self signed"* | *"self-signed"*)
		hint "npm does not trust the registry's TLS certificate: a proxy that inspects TLS needs its CA given to npm (npm config set cafile FILE), or the system's CA certificates (as root: apt-get install ca-certificates)" ;;
	*EUSAGE* | *"in sync"* | *"package-lock.json"*)
		hint "package.json and package-lock.json disagree: cd $dir && npm install --no-audit --no-fund, then review and commit package-lock.json" ;;
	*EACCES* | *EPERM*)
		hint "npm may not write there: run .ci/deps.sh $mode as root, or as the user who owns $dir" ;;
	*)
		hint "the lines above are npm's own account of what went wrong" ;;
	esac
	return 1
}

# npm_install DIR: installs exactly what DIR/package-lock.json pins.
npm_install() { npm_run "$1" ci --no-audit --no-fund; }

# install_node (as root): npm from Debian when there is none, then Node from
# the npm registry into /usr/local (bin/node), which PATH puts ahead of the
# system's /usr/bin/node.
install_node() {
	command -v npm >/dev/null 2>&1 || apt_install npm
	say "installing Node.js $NODE_MAJOR from the npm registry into /usr/local (npm install -g --prefix /usr/local node@$NODE_MAJOR)"
	if ! npm_run "$PWD" install -g --prefix /usr/local --no-audit --no-fund "node@$NODE_MAJOR"; then
		return 1
	fi
	hash -r
	if ! node_ok && [ -x /usr/local/bin/node ]; then
		say "/usr/local/bin/node is Node.js $(/usr/local/bin/node --version 2>/dev/null), but PATH finds $(command -v node) first"
		hint "put /usr/local/bin before $(dirname "$(command -v node)") in PATH"
		return 1
	fi
	node_ok
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

	local need_node=''
	[ "$mode" = test ] && ! node_ok && need_node=1

	if [ ${#missing[@]} -eq 0 ] && [ -z "$need_node" ]; then
		return 0
	fi

	if is_root; then
		[ ${#missing[@]} -gt 0 ] && apt_install "${missing[@]}"
		if [ -n "$need_node" ] && ! install_node; then
			say "missing: Node.js >= $NODE_MIN with npm ($(node_found))"
			hint "as root: $NODE_INSTALL"
			fail
		fi
		return 0
	fi

	if [ ${#missing[@]} -gt 0 ]; then
		say "missing: ${missing[*]}"
		hint "as root: apt-get install ${missing[*]}   (or run .ci/deps.sh $mode as root, which installs them)"
	fi
	if [ -n "$need_node" ]; then
		say "missing: Node.js >= $NODE_MIN with npm ($(node_found))"
		hint "as root: $NODE_INSTALL   (or run .ci/deps.sh $mode as root, which does that)"
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
		Darwin) hint "brew install node@$NODE_MAJOR   (or the installer from https://nodejs.org)" ;;
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
if [ "$mode" = test ]; then
	# The OpenTelemetry Collector the export tests build (a module of its own).
	(cd cmd/gatehouse/testdata/otelcol && go mod download)
fi
if [ "$mode" = package ]; then
	(cd packaging/tools && go mod download)
fi

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
