#!/usr/bin/env bash
# fresh-check.sh: the README's two commands on a fresh Debian machine.
#
# Makes a minimal Debian root (debootstrap --variant=minbase, cached) holding
# only what the README asks a user to bring: make, git, gcc, and Go in
# /usr/local/go (this machine's, copied). It clones this repository's HEAD
# into it and, inside it (chroot, with /proc, /sys, /dev and the network):
#
#   1. as another user, `make test` must stop at once, exit non-zero, and
#      name each missing piece with the command that installs it;
#   2. as root, `make test` must pass with no step by hand (it installs the
#      Debian packages, Node.js, the Go modules and the npm peers itself);
#   3. as root, `make run ARGS=--version` must build and start the app.
#
# Not part of make test or CI: it needs root, downloads a Debian root and
# every package, and takes about half an hour. docs/development.md records
# its last result. Usage: sudo packaging/fresh-check.sh [SUITE] (bookworm).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

suite=${1:-bookworm}
cache=${GATEHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gatehouse}
mirror=${GATEHOUSE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

say() { printf 'fresh-check: %s\n' "$*" >&2; }
die() { say "$1"; [ -n "${2:-}" ] && printf 'hint: %s\n' "$2" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts)" "run it as root"
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed" "as root: apt-get install debootstrap"
goroot=$(go env GOROOT 2>/dev/null) || die "no Go on this machine to copy into the root"

# The root, made once: minbase plus what the README assumes.
tarball=$cache/fresh-$suite-minbase.tar
if [ ! -s "$tarball" ]; then
	say "making a minimal Debian $suite root (once; cached in $tarball)"
	tmp=$(mktemp -d)
	if ! debootstrap --variant=minbase --include=make,git,gcc,libc6-dev,ca-certificates "$suite" "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1; then
		tail -n 20 "$tmp/debootstrap.log" >&2
		die "debootstrap $suite from $mirror failed" "set GATEHOUSE_DEBIAN_MIRROR to a mirror this machine reaches"
	fi
	rm -rf "$tmp/root"/var/cache/apt/archives/*.deb
	mkdir -p "$cache"
	tar -C "$tmp/root" --numeric-owner -cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
	rm -rf --one-file-system "$tmp"
fi

work=$(mktemp -d /var/tmp/gatehouse-fresh.XXXXXX)
root=$work/root
mounted=()
cleanup() {
	local m
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] && { say "kept $root"; return; }
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
mkdir -p "$root"
tar -C "$root" -xf "$tarball"
for m in proc sys dev dev/pts; do
	mount --bind "/$m" "$root/$m"
	mounted+=("$root/$m")
done
mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm" && mounted+=("$root/dev/shm")
# This machine's network, not a setup step: its resolver, and the
# certificate authorities it adds (a proxy that inspects TLS), for apt,
# Go and Node alike.
cp /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
	cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
	chroot "$root" update-ca-certificates >/dev/null
fi
cp -a "$goroot" "$root/usr/local/go"
git clone -q "$repo" "$root/src/gatehouse"
chroot "$root" useradd -m dev
chroot "$root" chown -R dev: /src/gatehouse

# in_root USER CMD: runs CMD in the clone as USER, with a fresh login's
# environment (and the registries this machine is configured for).
in_root() {
	local user=$1
	shift
	chroot "$root" /usr/bin/env -i HOME="$(chroot "$root" getent passwd "$user" | cut -d: -f6)" \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
		GOPROXY="$(go env GOPROXY)" GOSUMDB="$(go env GOSUMDB)" \
		npm_config_registry="$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)" \
		NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
		su -s /bin/bash "$user" -c "cd /src/gatehouse && $*"
}

ok=1
say "1. as another user: make test"
start=$SECONDS
if in_root dev make test >"$work/user.log" 2>&1; then
	say "   FAIL: make test passed as a user on a machine missing its packages"
	ok=
else
	grep -E '^(gatehouse deps|hint):' "$work/user.log" | sed 's/^/   | /' >&2
	if grep -q '^hint: as root: apt-get install ' "$work/user.log" && grep -q 'Node.js' "$work/user.log"; then
		say "   ok: stopped after $((SECONDS - start)) s, naming the packages and Node.js with their commands"
	else
		say "   FAIL: it stopped without naming what is missing (log: $work/user.log)"
		ok=
	fi
fi

say "2. as root: make test"
start=$SECONDS
if in_root root make test >"$work/root.log" 2>&1; then
	say "   ok: make test passed in $((SECONDS - start)) s"
else
	tail -n 40 "$work/root.log" >&2
	say "   FAIL: make test as root failed after $((SECONDS - start)) s"
	ok=
fi

say "3. as root: make run ARGS=--version"
start=$SECONDS
if in_root root make run ARGS=--version >"$work/run.log" 2>&1 && grep -q '^gatehouse-app ' "$work/run.log"; then
	say "   ok: $(grep '^gatehouse-app ' "$work/run.log") in $((SECONDS - start)) s"
else
	tail -n 20 "$work/run.log" >&2
	say "   FAIL: make run"
	ok=
fi

if [ -z "$ok" ]; then
	KEEP=1
	die "the fresh machine did not set itself up (logs in $work)"
fi
say "passed: the README's two commands set up a fresh Debian $suite root by themselves"
