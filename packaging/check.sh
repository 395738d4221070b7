#!/usr/bin/env bash
# packaging/check.sh [linux] [windows]
#
# Checks the packages that packaging/build.sh put in dist/, the way a user
# meets them, and prints "N passed, N failed".
#
# linux (as root, on Debian or Ubuntu):
#   - the .deb lists the binaries, the desktop entries, every icon and the
#     copyright file, and its desktop entries validate;
#   - it installs with dpkg into a clean Debian root (debootstrap minbase
#     plus the libraries the package depends on, cached as a tarball under
#     $GATEHOUSE_CACHE, default ~/.cache/gatehouse, so that only the first
#     run downloads it), and, chrooted there, `gatehouse version`,
#     `gatehouse demo` (when the command exists), `gatehouse server add` and
#     `server test` against a real stdio server, and `gatehouse-app --version`
#     all run;
#   - `dpkg --purge` leaves no file behind but the user data those commands
#     wrote;
#   - the .rpm's requirements and files, installed and erased again with rpm
#     into an empty root; the .tar.gz's layout, and its gatehouse runs.
# windows:
#   - the .zip holds both programs; both are PE32+ x86-64 programs (console
#     and GUI) carrying their icon, manifest and version, and importing only
#     DLLs every Windows has;
#   - under Wine, when it is installed: gatehouse.exe version and
#     gatehouse-app.exe --version run, with no display; the
#     installer installs silently (files, Start menu entry, autostart and
#     uninstall registry values, PATH), the installed gatehouse.exe runs, and
#     the uninstaller removes all of that again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
dist=$root/dist

passed=0 failed=0
ok() {
	passed=$((passed + 1))
	printf '    ok    %s\n' "$*"
}
bad() {
	failed=$((failed + 1))
	printf '    FAIL  %s\n' "$*"
}
# check DESCRIPTION COMMAND...: runs COMMAND, passes if it succeeds.
check() {
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$what"
	else
		bad "$what"
		printf '%s\n' "$out" | tail -n 20 | sed 's/^/          /'
	fi
}
say() { printf '\n==> %s\n' "$*"; }
die() {
	printf 'gatehouse package check: %s\n' "$1" >&2
	[ $# -lt 2 ] || printf 'hint: %s\n' "$2" >&2
	exit 1
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux windows)

version=$(packaging/version.sh)
winversion=$(packaging/version.sh --windows)

# one GLOB: the single file in dist/ matching GLOB, or an error.
one() {
	local files
	shopt -s nullglob
	# shellcheck disable=SC2206
	files=($dist/$1)
	shopt -u nullglob
	[ ${#files[@]} -eq 1 ] || die "want one dist/$1, found ${#files[@]}" "run make package (packaging/build.sh) first"
	printf '%s\n' "${files[0]}"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-check.XXXXXX")
mounts=()
cleanup() {
	local m
	for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
	# --one-file-system: never follow a mount that is still there.
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT

say "version mapping"
check "packaging/version.sh --test" packaging/version.sh --test

# --- Linux ------------------------------------------------------------------

# The files every Linux package must hold.
linux_files=(
	/usr/bin/gatehouse
	/usr/bin/gatehouse-app
	/usr/share/applications/dev.gatehouse.app.desktop
	/usr/share/gatehouse/autostart/dev.gatehouse.app.desktop
	/usr/share/icons/hicolor/scalable/apps/dev.gatehouse.app.svg
)
for n in 16 32 48 64 128 256 512; do
	linux_files+=("/usr/share/icons/hicolor/${n}x$n/apps/dev.gatehouse.app.png")
done

# lists_all LISTING: every path in linux_files appears in LISTING.
lists_all() {
	local f missing=()
	for f in "${linux_files[@]}"; do
		grep -qxF "$f" <<<"$1" || missing+=("$f")
	done
	[ ${#missing[@]} -eq 0 ] || { echo "missing: ${missing[*]}"; return 1; }
}

# debian_root: a tarball of a minimal Debian root with the .deb's
# dependencies installed, made once and cached.
debian_root() {
	local deb=$1 deps suite cache key tarball
	deps=$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/[[:space:]]//g' | grep . | sort | paste -sd, -)
	suite=${GATEHOUSE_CHECK_SUITE:-bookworm}
	cache=${GATEHOUSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gatehouse}
	key=$(printf '%s %s' "$suite" "$deps" | sha256sum | cut -c1-12)
	tarball=$cache/debian-$suite-minbase-$key.tar
	if [ ! -s "$tarball" ]; then
		command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed" "run .ci/deps.sh package as root"
		local mirror=${GATEHOUSE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
		echo "    making a Debian $suite root with $deps (once; cached in $tarball)" >&2
		local r=$work/debootstrap
		if ! debootstrap --variant=minbase --include="$deps" "$suite" "$r" "$mirror" >"$work/debootstrap.log" 2>&1; then
			tail -n 20 "$work/debootstrap.log" >&2
			die "debootstrap $suite from $mirror failed" "set GATEHOUSE_DEBIAN_MIRROR to a Debian mirror this machine reaches"
		fi
		rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
		mkdir -p "$cache"
		tar -C "$r" --numeric-owner -cf "$tarball.tmp" .
		mv "$tarball.tmp" "$tarball"
		rm -rf --one-file-system "$r"
	fi
	printf '%s\n' "$tarball"
}

# snapshot ROOT: the paths in ROOT, but those that change as a system runs.
snapshot() {
	(cd "$1" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./tmp -o -path ./run \
		-o -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache \) -prune -o -print | sort)
}

check_deb() {
	local deb
	deb=$(one 'gatehouse_*.deb')
	say "linux: $(basename "$deb")"

	local listing
	listing=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|; s|/$||')
	check "dpkg -c lists the programs, the desktop entry, the autostart entry and every icon" lists_all "$listing"
	check "dpkg -c lists /usr/share/doc/gatehouse/copyright" grep -qxF /usr/share/doc/gatehouse/copyright <<<"$listing"
	check "control: Version is $version-1" test "$(dpkg-deb -f "$deb" Version)" = "$version-1"
	check "control: Recommends gnome-keyring" grep -qw gnome-keyring <<<"$(dpkg-deb -f "$deb" Recommends)"
	if command -v desktop-file-validate >/dev/null 2>&1; then
		check "desktop-file-validate the desktop entry" desktop-file-validate packaging/linux/dev.gatehouse.app.desktop
		check "desktop-file-validate the autostart entry" desktop-file-validate packaging/linux/autostart/dev.gatehouse.app.desktop
	fi

	if [ "$(id -u)" != 0 ]; then
		bad "install into a clean Debian root: needs root (chroot, dpkg --root)"
		return
	fi
	local tarball r
	tarball=$(debian_root "$deb")
	r=$work/root
	mkdir -p "$r"
	tar -C "$r" --numeric-owner -xf "$tarball"
	mount -t proc proc "$r/proc"
	mounts+=("$r/proc")
	local before after
	before=$(snapshot "$r")

	cp "$deb" "$r/tmp/gatehouse.deb"
	in_root() { chroot "$r" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
	check "dpkg -i into a clean Debian root (its dependencies resolve)" in_root dpkg -i /tmp/gatehouse.deb
	check "the installed files are the ones listed" lists_all "$(in_root dpkg -L gatehouse)"
	local out
	out=$(in_root gatehouse version 2>&1) || true
	check "chroot: gatehouse version prints $version" test "$out" = "gatehouse $version"
	out=$(in_root gatehouse-app --version 2>/dev/null) || true
	check "chroot: gatehouse-app --version prints $version (every library it links is there)" test "$out" = "gatehouse-app $version"
	check "chroot: ldd gatehouse-app finds every library" bash -c "! chroot '$r' ldd /usr/bin/gatehouse-app | grep 'not found'"
	if in_root gatehouse help 2>&1 | grep -qE '^  demo[[:space:]]'; then
		# The root has no Secret Service (a user's desktop session does):
		# a demo that stops there, fail-closed, for want of a keychain is
		# reported, not failed; any other failure fails.
		if out=$(in_root timeout 120 gatehouse demo </dev/null 2>&1); then
			ok "chroot: gatehouse demo"
		elif grep -qi 'keychain' <<<"$out"; then
			echo "    (gatehouse demo needs a keychain, which this root has no session for: $(grep -i -m1 keychain <<<"$out"))"
		else
			bad "chroot: gatehouse demo"
			printf '%s\n' "$out" | tail -n 20 | sed 's/^/          /'
		fi
	else
		echo "    (gatehouse has no demo command yet: server add and server test stand in)"
	fi
	check "chroot: gatehouse server add echo (a home in /root/.config/gatehouse)" in_root gatehouse server add echo -- gatehouse bench-echo-server
	check "chroot: gatehouse server test echo (a real stdio MCP server)" in_root timeout 60 gatehouse server test echo
	check "the home folder was written (user data)" test -d "$r/root/.config/gatehouse"

	rm -f "$r/tmp/gatehouse.deb"
	check "dpkg --purge gatehouse" in_root dpkg --purge gatehouse
	after=$(snapshot "$r")
	# What the purge left: only the user data under /root/.config/gatehouse.
	local left
	left=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep -v '^\./root/\.config\(/gatehouse\(/.*\)\?\)\?$' || true)
	check "dpkg --purge leaves no file behind but user data" test -z "$left"
	[ -z "$left" ] || printf '          left: %s\n' $left
	local gone
	gone=$(comm -23 <(printf '%s\n' "$before") <(printf '%s\n' "$after") || true)
	check "and removes nothing that was there before" test -z "$gone"
	umount "$r/proc" && mounts=()
	rm -rf --one-file-system "$r"
}

check_rpm() {
	local rpm
	rpm=$(one 'gatehouse-*.rpm')
	say "linux: $(basename "$rpm")"
	if ! command -v rpm >/dev/null 2>&1; then
		bad "rpm is not installed (.ci/deps.sh package installs it)"
		return
	fi
	check "rpm -K: digests" rpm -K --nosignature "$rpm"
	check "rpm -qlp lists the programs, the desktop entries and every icon" lists_all "$(rpm -qlp "$rpm" 2>/dev/null)"
	check "rpm: Version $version" test "$(rpm -qp --qf '%{VERSION}' "$rpm" 2>/dev/null)" = "$version"
	check "rpm: requires libGL.so.1 and libX11.so.6" bash -c "rpm -qp --requires '$rpm' 2>/dev/null | grep -qF 'libGL.so.1()(64bit)' && rpm -qp --requires '$rpm' 2>/dev/null | grep -qF 'libX11.so.6()(64bit)'"
	if [ "$(id -u)" = 0 ]; then
		local r=$work/rpmroot
		mkdir -p "$r"
		# The database inside the root (Debian's rpm keeps it in ~/.rpmdb).
		local db=(--root "$r" --dbpath /var/lib/rpm --nodeps --noplugins)
		check "rpm -i into an empty root" rpm "${db[@]}" -i "$rpm"
		check "the installed files are the ones listed" lists_all "$(cd "$r" && find . -type f | sed 's|^\.||')"
		check "rpm -e" rpm "${db[@]}" -e gatehouse
		local left
		left=$(cd "$r" && find . -not -path './var/lib/rpm*' \( -type f -o -path '*gatehouse*' \) | head)
		check "rpm -e leaves no file behind, nor a folder of its own" test -z "$left"
		[ -z "$left" ] || printf '          left: %s\n' $left
	fi
}

check_tgz() {
	local tgz
	tgz=$(one 'gatehouse-*-linux-*.tar.gz')
	say "linux: $(basename "$tgz")"
	local t=$work/tgz
	mkdir -p "$t"
	tar -C "$t" -xzf "$tgz"
	local top=$t/gatehouse-$version-linux-$(go env GOARCH 2>/dev/null || echo amd64)
	local listing
	listing=$(cd "$top" && find . -type f | sed 's|^\./|/usr/|; s|^/usr/README.txt$|/README.txt|')
	check "it holds the packages' layout under one folder" lists_all "$listing"
	local out
	out=$("$top/bin/gatehouse" version 2>&1) || true
	check "bin/gatehouse version prints $version" test "$out" = "gatehouse $version"
}

# --- Windows ----------------------------------------------------------------

# pe_check EXE SUBSYSTEM: a PE32+ x86-64 program of SUBSYSTEM ("Windows GUI"
# or "Windows CUI") with resources, importing only system DLLs.
pe_check() {
	local exe=$1 subsystem=$2 dump
	dump=$(x86_64-w64-mingw32-objdump -p "$exe") || return 1
	grep -q '^Magic[[:space:]]*020b' <<<"$dump" || { echo "not PE32+"; return 1; }
	grep -q "^Subsystem.*($subsystem)" <<<"$dump" || { echo "subsystem: $(grep ^Subsystem <<<"$dump")"; return 1; }
	x86_64-w64-mingw32-objdump -f "$exe" | grep -q 'architecture: i386:x86-64' || { echo "not x86-64"; return 1; }
	x86_64-w64-mingw32-objdump -h "$exe" | grep -q ' \.rsrc ' || { echo "no resources (icon, manifest, version)"; return 1; }
	# Only DLLs that ship with Windows: no MinGW runtime (libgcc, winpthread).
	local dll bad=()
	while read -r dll; do
		case "${dll,,}" in
		kernel32.dll | user32.dll | gdi32.dll | shell32.dll | opengl32.dll | msvcrt.dll | advapi32.dll | ole32.dll | \
			ws2_32.dll | winmm.dll | ntdll.dll | bcrypt.dll | crypt32.dll | dwmapi.dll | imm32.dll | shlwapi.dll | \
			comdlg32.dll | comctl32.dll | uxtheme.dll | version.dll | setupapi.dll | oleaut32.dll | powrprof.dll | \
			api-ms-win-*) ;;
		*) bad+=("$dll") ;;
		esac
	done < <(sed -n 's/^[[:space:]]*DLL Name: //p' <<<"$dump")
	[ ${#bad[@]} -eq 0 ] || { echo "imports DLLs Windows does not have: ${bad[*]}"; return 1; }
}

wine_cmd() {
	if command -v wine64 >/dev/null 2>&1; then
		echo wine64
	elif [ -x /usr/lib/wine/wine64 ]; then
		echo /usr/lib/wine/wine64
	elif command -v wine >/dev/null 2>&1; then
		echo wine
	fi
}

check_windows() {
	local zip setup
	zip=$(one 'gatehouse-*-windows-amd64.zip')
	setup=$(one 'gatehouse-*-windows-amd64-setup.exe')
	say "windows: $(basename "$zip"), $(basename "$setup")"
	local z=$work/zip
	mkdir -p "$z"
	(cd "$z" && unzip -q "$zip")
	local top=$z/gatehouse-$version-windows-amd64
	check "the zip holds gatehouse.exe, gatehouse-app.exe and LICENSE.txt" test -f "$top/gatehouse.exe" -a -f "$top/gatehouse-app.exe" -a -f "$top/LICENSE.txt"
	check "gatehouse.exe: PE32+ x86-64 console program, resources, system DLLs only" pe_check "$top/gatehouse.exe" "Windows CUI"
	check "gatehouse-app.exe: PE32+ x86-64 GUI program, resources, system DLLs only" pe_check "$top/gatehouse-app.exe" "Windows GUI"
	check "the installer is a PE32+ x86-64 GUI program" pe_check "$setup" "Windows GUI"

	local wine
	wine=$(wine_cmd)
	if [ -z "$wine" ]; then
		echo "    (Wine is not installed: the programs and the installer are not run)"
		return
	fi
	# wineserver -w waits for every program of the prefix to end: NSIS
	# uninstallers run on from a copy after the one started returns.
	wineserver() {
		local s
		for s in "$(dirname "$(command -v "$wine")")/wineserver" /usr/lib/wine/wineserver64 /usr/lib/wine/wineserver; do
			if [ -x "$s" ]; then
				"$s" "$@" 2>/dev/null || true
				return
			fi
		done
		command wineserver "$@" 2>/dev/null || true
	}
	export WINEPREFIX=$work/wineprefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
	unset DISPLAY WAYLAND_DISPLAY
	"$wine" wineboot --init >/dev/null 2>&1 || true
	local sys32=$WINEPREFIX/drive_c/windows/system32
	# Go 1.24 and later need ProcessPrng from bcryptprimitives.dll, which
	# Wine added in 9.0. For older Wines (Debian 12 has 8.0) the check puts a
	# stand-in built from a few lines of C into the test prefix's system32;
	# it never ships.
	if [ ! -e "$sys32/bcryptprimitives.dll" ]; then
		cat >"$work/bcryptprimitives.c" <<-'EOF'
			#include <windows.h>
			BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
			__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
				while (len > 0) {
					ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
					if (!SystemFunction036(data, n)) return FALSE;
					data += n;
					len -= n;
				}
				return TRUE;
			}
		EOF
		x86_64-w64-mingw32-gcc -shared -O2 -s -o "$sys32/bcryptprimitives.dll" "$work/bcryptprimitives.c" -ladvapi32
	fi
	local out
	out=$("$wine" "$top/gatehouse.exe" version 2>/dev/null | tr -d '\r') || true
	check "wine: gatehouse.exe version prints $version (no display)" test "$out" = "gatehouse $version"
	out=$(timeout 120 "$wine" "$top/gatehouse-app.exe" --version 2>/dev/null | tr -d '\r') || true
	check "wine: gatehouse-app.exe --version prints $version (it loads: OpenGL and every DLL)" test "$out" = "gatehouse-app $version"

	check "wine: the installer runs silently (/S)" "$wine" "$setup" /S
	wineserver -w
	local user local_app_data instdir
	user=$(ls "$WINEPREFIX/drive_c/users" | grep -vx Public | head -n1)
	local_app_data=$WINEPREFIX/drive_c/users/$user/AppData/Local
	instdir=$local_app_data/Programs/Gatehouse
	check "installed: gatehouse.exe, gatehouse-app.exe, uninstall.exe in %LOCALAPPDATA%\\Programs\\Gatehouse" \
		test -f "$instdir/gatehouse.exe" -a -f "$instdir/gatehouse-app.exe" -a -f "$instdir/uninstall.exe"
	local startmenu="$WINEPREFIX/drive_c/users/$user/AppData/Roaming/Microsoft/Windows/Start Menu/Programs/Gatehouse.lnk"
	check "installed: a Start menu entry" test -f "$startmenu"
	out=$("$wine" "$instdir/gatehouse.exe" version 2>/dev/null | tr -d '\r') || true
	check "installed: gatehouse.exe version prints $version" test "$out" = "gatehouse $version"
	reg() { "$wine" reg query "$@" 2>/dev/null | tr -d '\r'; }
	check "installed: starts at sign-in (HKCU Run value Gatehouse)" \
		grep -q 'gatehouse-app.exe" --hidden' <<<"$(reg 'HKCU\Software\Microsoft\Windows\CurrentVersion\Run' /v Gatehouse)"
	check "installed: an entry in Apps (uninstall key, version $version)" \
		grep -qF "$version" <<<"$(reg 'HKCU\Software\Microsoft\Windows\CurrentVersion\Uninstall\Gatehouse' /v DisplayVersion)"
	check "installed: the folder is on the user's PATH" \
		grep -qi 'Programs\\Gatehouse' <<<"$(reg 'HKCU\Environment' /v Path)"

	check "wine: the uninstaller runs silently (/S)" "$wine" "$instdir/uninstall.exe" /S
	wineserver -w
	check "uninstalled: the install folder is gone" test ! -e "$instdir"
	check "uninstalled: the Start menu entry is gone" test ! -e "$startmenu"
	check "uninstalled: no Run value" bash -c "! '$wine' reg query 'HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run' /v Gatehouse >/dev/null 2>&1"
	check "uninstalled: no uninstall key" bash -c "! '$wine' reg query 'HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Uninstall\\Gatehouse' >/dev/null 2>&1"
	check "uninstalled: the folder is off the PATH" bash -c "! '$wine' reg query 'HKCU\\Environment' /v Path 2>/dev/null | grep -qi 'Programs\\\\Gatehouse'"
	wineserver -k
}

# --- macOS (the recipe; the bundle is built on macOS) ------------------------

check_macos_recipe() {
	say "macos: the recipe (Gatehouse.app is built on macOS)"
	check "bash -n packaging/macos/build-app.sh" bash -n packaging/macos/build-app.sh
	local id plist
	id=$(sed -n 's/^[[:space:]]*ID[[:space:]]*=[[:space:]]*"\(.*\)"[[:space:]]*$/\1/p' FyneApp.toml | head -n1)
	plist=$(sed -e "s|@APP_ID@|$id|" -e "s|@SHORT_VERSION@|${version%%[~+]*}|" -e "s|@BUILD@|1|" -e "s|@VERSION@|$version|" packaging/macos/Info.plist.in)
	check "Info.plist: CFBundleIdentifier is FyneApp.toml's ID ($id)" grep -qF "<string>$id</string>" <<<"$plist"
	check "Info.plist: no field left unfilled" bash -c '! grep -qE "@[A-Z_]+@"' <<<"$plist"
	if command -v xmllint >/dev/null 2>&1; then
		check "Info.plist: well-formed XML" xmllint --noout - <<<"$plist"
	fi
	check "assets/icon.icns is an ICNS file" test "$(head -c 4 assets/icon.icns)" = icns
}

for t in "${targets[@]}"; do
	case "$t" in
	linux)
		check_deb
		check_rpm
		check_tgz
		check_macos_recipe
		;;
	windows) check_windows ;;
	*) die "unknown target $t" "targets: linux windows" ;;
	esac
done

printf '\npackaging: %d passed, %d failed\n' "$passed" "$failed"
[ "$failed" = 0 ]
