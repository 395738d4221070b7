#!/usr/bin/env bash
# packaging/build.sh [linux] [windows] [macos]
#
# Builds Gatehouse's installable packages into dist/, each with a .sha256
# file beside it, and dist/SHA256SUMS over them all. With no argument it
# builds what this machine can: on Linux the Linux and Windows packages, on
# macOS the app bundle and disk image.
#
#   linux    gatehouse_VERSION_amd64.deb, gatehouse-VERSION-1.x86_64.rpm,
#            gatehouse-VERSION-linux-amd64.tar.gz
#   windows  gatehouse-VERSION-windows-amd64.zip,
#            gatehouse-VERSION-windows-amd64-setup.exe (NSIS)
#   macos    Gatehouse-VERSION-macos.dmg, holding Gatehouse.app (run on macOS)
#
# VERSION comes from git (packaging/version.sh). The Debian packages this
# needs are installed by `.ci/deps.sh package`; docs/packaging.md says
# what each artifact holds. The binaries are built with -trimpath, and file
# times inside the archives are the last commit's (SOURCE_DATE_EPOCH).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

say() { printf '==> %s\n' "$*"; }
die() {
	printf 'gatehouse package: %s\n' "$1" >&2
	[ $# -lt 2 ] || printf 'hint: %s\n' "$2" >&2
	exit 1
}
need() { # need TOOL PACKAGE
	command -v "$1" >/dev/null 2>&1 ||
		die "$1 is not installed" "run .ci/deps.sh package as root, or install the Debian package $2"
}

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
need go golang
# The Fyne GL driver builds with the gles tag, as everywhere else (Makefile).
case "${GOFLAGS:-}" in *-tags=*gles*) ;; *) export GOFLAGS="-tags=gles${GOFLAGS:+ $GOFLAGS}" ;; esac

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	case "$(uname -s)" in
	Linux) targets=(linux windows) ;;
	Darwin) targets=(macos) ;;
	*) die "no packages are built on $(uname -s) by default" "name them: packaging/build.sh linux|windows|macos" ;;
	esac
fi
for t in "${targets[@]}"; do
	case "$t" in
	linux | windows | macos) ;;
	*) die "unknown target $t" "targets: linux windows macos" ;;
	esac
done

version=$(packaging/version.sh)
winversion=$(packaging/version.sh --windows)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
ldflags="-s -w -X main.version=$version"
dist=$root/dist
mkdir -p "$dist"
work=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-package.XXXXXX")
sysos=()
cleanup() {
	rm -rf "$work"
	# The Windows resources exist only while the Windows binaries build.
	[ ${#sysos[@]} -eq 0 ] || rm -f "${sysos[@]}"
}
trap cleanup EXIT

sha256() { # sha256 FILE: writes FILE.sha256 in sha256sum's format
	local dir base
	dir=$(dirname "$1") base=$(basename "$1")
	if command -v sha256sum >/dev/null 2>&1; then
		(cd "$dir" && sha256sum "$base" >"$base.sha256")
	else
		(cd "$dir" && shasum -a 256 "$base" >"$base.sha256")
	fi
}

# artifact FILE: records a finished artifact and its checksum.
artifacts=()
artifact() {
	sha256 "$1"
	artifacts+=("$1")
	printf '    %s (%s bytes)\n' "${1#"$root"/}" "$(wc -c <"$1" | tr -d ' ')"
}

# tar_gz DIR OUT: a reproducible .tar.gz of DIR (its base name at the top).
tar_gz() {
	tar -C "$(dirname "$1")" --sort=name --owner=0 --group=0 --numeric-owner \
		--mtime="@$SOURCE_DATE_EPOCH" -cf - "$(basename "$1")" | gzip -9n >"$2"
}

# --- Linux ------------------------------------------------------------------

build_linux() {
	need gcc gcc
	need objdump binutils
	local arch stage
	arch=$(go env GOARCH)
	[ "$arch" = amd64 ] || [ "$arch" = arm64 ] || die "Linux packages are built for amd64 and arm64, not $arch"
	stage=$work/linux
	mkdir -p "$stage"
	rm -f "$dist"/gatehouse_*.deb* "$dist"/gatehouse-*.rpm* "$dist"/gatehouse-*-linux-*.tar.gz*

	say "linux: build gatehouse and gatehouse-app $version ($arch)"
	CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$stage/gatehouse" ./cmd/gatehouse
	CGO_ENABLED=1 go build -trimpath -ldflags "$ldflags" -o "$stage/gatehouse-app" ./cmd/gatehouse-app

	# The oldest glibc the app runs on: the newest symbol version it links.
	local glibc
	glibc=$(objdump -T "$stage/gatehouse-app" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1)
	[ -n "$glibc" ] || die "found no glibc symbol versions in gatehouse-app"

	# Debian's machine-readable copyright file, made from LICENSE.
	{
		echo 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/'
		echo 'Upstream-Name: gatehouse'
		echo 'Source: https://github.com/gatehouse-dev/gatehouse'
		echo
		echo 'Files: *'
		echo "Copyright: $(sed -n 's/^Copyright (c) //p' LICENSE | head -n1)"
		echo 'License: MIT'
		# The license text, indented, blank lines as " ."
		sed -n '/^Permission is hereby granted/,$p' LICENSE | sed 's/^$/./; s/^/ /'
	} >"$stage/copyright"

	local nfpm_arch=$arch deb_arch=$arch rpm_arch
	case "$arch" in amd64) rpm_arch=x86_64 ;; arm64) rpm_arch=aarch64 ;; esac
	local pkg
	for pkg in deb rpm; do
		say "linux: nfpm $pkg"
		mkdir -p "$work/$pkg"
		GATEHOUSE_VERSION=$version GATEHOUSE_ARCH=$nfpm_arch GATEHOUSE_STAGE=$stage \
			GATEHOUSE_GLIBC=$glibc GATEHOUSE_ROOT=$root \
			GATEHOUSE_MAINTAINER=${GATEHOUSE_MAINTAINER:-The Gatehouse Authors <https://github.com/gatehouse-dev/gatehouse/issues>} \
			nfpm pkg --config "$root/packaging/linux/nfpm.yaml" --packager "$pkg" --target "$work/$pkg/" | sed 's/^/    /'
	done
	mv "$work/deb/"*.deb "$dist/gatehouse_${version}-1_${deb_arch}.deb"
	mv "$work/rpm/"*.rpm "$dist/gatehouse-${version}-1.${rpm_arch}.rpm"
	artifact "$dist/gatehouse_${version}-1_${deb_arch}.deb"
	artifact "$dist/gatehouse-${version}-1.${rpm_arch}.rpm"

	# The archive mirrors the packages' layout under a prefix, so that
	# `tar -xzf ... --strip-components=1 -C ~/.local` installs it.
	say "linux: tar.gz"
	local name=gatehouse-$version-linux-$arch t
	t=$work/$name
	install -Dm755 "$stage/gatehouse" "$t/bin/gatehouse"
	install -Dm755 "$stage/gatehouse-app" "$t/bin/gatehouse-app"
	install -Dm644 packaging/linux/dev.gatehouse.app.desktop "$t/share/applications/dev.gatehouse.app.desktop"
	install -Dm644 packaging/linux/autostart/dev.gatehouse.app.desktop "$t/share/gatehouse/autostart/dev.gatehouse.app.desktop"
	install -Dm644 assets/icon.svg "$t/share/icons/hicolor/scalable/apps/dev.gatehouse.app.svg"
	local n
	for n in 16 32 48 64 128 256 512; do
		install -Dm644 "assets/icon-$n.png" "$t/share/icons/hicolor/${n}x$n/apps/dev.gatehouse.app.png"
	done
	install -Dm644 LICENSE "$t/share/doc/gatehouse/LICENSE"
	install -Dm644 packaging/linux/README.txt "$t/README.txt"
	tar_gz "$t" "$dist/$name.tar.gz"
	artifact "$dist/$name.tar.gz"
}

nfpm() {
	(cd "$root/packaging/tools" && go tool nfpm "$@")
}

# --- Windows ----------------------------------------------------------------

build_windows() {
	need x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64
	need x86_64-w64-mingw32-windres binutils-mingw-w64-x86-64
	need makensis nsis
	need zip zip
	local stage=$work/windows
	mkdir -p "$stage"
	rm -f "$dist"/gatehouse-*-windows-*

	say "windows: resources (icon, manifest, version $winversion)"
	local name desc
	for name in gatehouse gatehouse-app; do
		case "$name" in
		gatehouse) desc="Gatehouse command line and MCP proxy" ;;
		gatehouse-app) desc="Gatehouse" ;;
		esac
		sed -e "s|@NAME@|$name|g" -e "s|@DESCRIPTION@|$desc|g" -e "s|@WINVERSION@|$winversion|g" \
			packaging/windows/gatehouse.manifest >"$work/$name.manifest"
		sed -e "s|@NAME@|$name|g" -e "s|@DESCRIPTION@|$desc|g" -e "s|@VERSION@|$version|g" \
			-e "s|@WINVERSION_COMMAS@|${winversion//./,}|g" \
			-e "s|@ICON@|$root/assets/icon.ico|g" -e "s|@MANIFEST@|$work/$name.manifest|g" \
			packaging/windows/resource.rc.in >"$work/$name.rc"
		# go build links every .syso file of the package; the name keeps it
		# to Windows amd64 builds, and it is deleted when this script ends.
		local syso=cmd/$name/zz_resource_windows_amd64.syso
		sysos+=("$root/$syso")
		x86_64-w64-mingw32-windres --input-format=rc --output-format=coff -i "$work/$name.rc" -o "$syso"
	done

	say "windows: build gatehouse.exe and gatehouse-app.exe $version (amd64)"
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 \
		go build -trimpath -ldflags "$ldflags" -o "$stage/gatehouse.exe" ./cmd/gatehouse
	# -H windowsgui: the tray app opens no console window.
	GOOS=windows GOARCH=amd64 CGO_ENABLED=1 CC=x86_64-w64-mingw32-gcc CXX=x86_64-w64-mingw32-g++ \
		go build -trimpath -ldflags "$ldflags -H windowsgui" -o "$stage/gatehouse-app.exe" ./cmd/gatehouse-app
	rm -f "${sysos[@]}"
	sysos=()
	sed 's/$/\r/' LICENSE >"$stage/LICENSE.txt"
	sed 's/$/\r/' packaging/windows/README.txt >"$stage/README.txt"

	say "windows: zip"
	local zipname=gatehouse-$version-windows-amd64
	mkdir -p "$work/zip/$zipname"
	cp "$stage/gatehouse.exe" "$stage/gatehouse-app.exe" "$stage/LICENSE.txt" "$stage/README.txt" "$work/zip/$zipname/"
	touch -d "@$SOURCE_DATE_EPOCH" "$work/zip/$zipname" "$work/zip/$zipname"/*
	(cd "$work/zip" && TZ=UTC zip -qX9 -r "$dist/$zipname.zip" "$zipname")
	artifact "$dist/$zipname.zip"

	say "windows: NSIS installer"
	makensis -V2 -NOCD -DVERSION="$version" -DWINVERSION="$winversion" -DSTAGE="$stage" \
		-DICON="$root/assets/icon.ico" -DOUTFILE="$dist/$zipname-setup.exe" packaging/windows/gatehouse.nsi
	artifact "$dist/$zipname-setup.exe"
}

# --- macOS ------------------------------------------------------------------

build_macos() {
	[ "$(uname -s)" = Darwin ] ||
		die "the macOS app bundle and disk image are built on macOS (they need its SDK, codesign and hdiutil)" "see docs/packaging.md, macOS"
	rm -f "$dist"/Gatehouse-*-macos.dmg*
	GATEHOUSE_VERSION=$version bash packaging/macos/build-app.sh "$work/macos"
	local dmg=$dist/Gatehouse-$version-macos.dmg
	say "macos: disk image"
	local staging=$work/dmg
	mkdir -p "$staging"
	cp -R "$work/macos/Gatehouse.app" "$staging/"
	ln -s /Applications "$staging/Applications"
	hdiutil create -volname "Gatehouse $version" -srcfolder "$staging" -fs HFS+ -format UDZO -ov "$dmg" >/dev/null
	if [ -n "${GATEHOUSE_CODESIGN_IDENTITY:-}" ]; then
		codesign --force --timestamp --sign "$GATEHOUSE_CODESIGN_IDENTITY" "$dmg"
	fi
	# Notarization: a keychain profile made once with
	# `xcrun notarytool store-credentials NAME`.
	if [ -n "${GATEHOUSE_NOTARY_PROFILE:-}" ]; then
		say "macos: notarize"
		xcrun notarytool submit "$dmg" --keychain-profile "$GATEHOUSE_NOTARY_PROFILE" --wait
		xcrun stapler staple "$dmg"
	fi
	artifact "$dmg"
}

for t in "${targets[@]}"; do
	"build_$t"
done

# SHA256SUMS: every artifact in dist/, whichever run built it.
(
	cd "$dist"
	shopt -s nullglob
	sums=()
	for f in *.sha256; do sums+=("$f"); done
	if [ ${#sums[@]} -gt 0 ]; then cat "${sums[@]}" >SHA256SUMS; fi
)
say "dist/SHA256SUMS"
sed 's/^/    /' "$dist/SHA256SUMS"
