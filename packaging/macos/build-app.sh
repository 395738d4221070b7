#!/usr/bin/env bash
# packaging/macos/build-app.sh OUTDIR
#
# Builds OUTDIR/Gatehouse.app on macOS (it needs the macOS SDK: Xcode or its
# Command Line Tools). packaging/build.sh macos runs it and then packs the
# bundle into a disk image; docs/packaging.md explains both.
#
#   Gatehouse.app/Contents/Info.plist        from Info.plist.in
#   Gatehouse.app/Contents/MacOS/gatehouse-app  the tray app (universal: arm64 and x86_64)
#   Gatehouse.app/Contents/MacOS/gatehouse      the command line and MCP proxy (universal)
#   Gatehouse.app/Contents/Resources/Gatehouse.icns  assets/icon.icns
#
# The app finds the proxy beside itself, in Contents/MacOS, and the client
# configs it writes name that path.
#
# Signing: with GATEHOUSE_CODESIGN_IDENTITY set (a "Developer ID
# Application: ..." identity in your keychain) both programs and the bundle
# are signed with it, with the hardened runtime and a secure timestamp, as
# notarization requires; without it they are signed ad hoc, which runs on
# the machine that built it (Apple silicon refuses unsigned code) but makes
# Gatehouse on any other Mac a program from an unidentified developer.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

die() {
	printf 'gatehouse package: %s\n' "$1" >&2
	[ $# -lt 2 ] || printf 'hint: %s\n' "$2" >&2
	exit 1
}
[ $# -eq 1 ] || die "usage: packaging/macos/build-app.sh OUTDIR"
[ "$(uname -s)" = Darwin ] || die "Gatehouse.app is built on macOS" "see docs/packaging.md, macOS"
for tool in go clang lipo codesign plutil; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed" "xcode-select --install; Go from https://go.dev/dl/"
done

out=$1
version=${GATEHOUSE_VERSION:-$(packaging/version.sh)}
short=${version%%[~+]*}
build=$(git rev-list --count HEAD 2>/dev/null || echo 1)
app_id=$(sed -n 's/^[[:space:]]*ID[[:space:]]*=[[:space:]]*"\(.*\)"[[:space:]]*$/\1/p' FyneApp.toml | head -n1)
[ -n "$app_id" ] || die "FyneApp.toml has no ID"
ldflags="-s -w -X main.version=$version"

bundle=$out/Gatehouse.app
rm -rf "$bundle"
mkdir -p "$bundle/Contents/MacOS" "$bundle/Contents/Resources" "$out/arm64" "$out/amd64"

echo "==> macos: build gatehouse and gatehouse-app $version (arm64, amd64)"
for arch in arm64 amd64; do
	GOOS=darwin GOARCH=$arch CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$arch/gatehouse" ./cmd/gatehouse
	GOOS=darwin GOARCH=$arch CGO_ENABLED=1 go build -trimpath -ldflags "$ldflags" -o "$out/$arch/gatehouse-app" ./cmd/gatehouse-app
done
for prog in gatehouse gatehouse-app; do
	lipo -create -output "$bundle/Contents/MacOS/$prog" "$out/arm64/$prog" "$out/amd64/$prog"
done
rm -rf "$out/arm64" "$out/amd64"

sed -e "s|@APP_ID@|$app_id|" -e "s|@SHORT_VERSION@|$short|" -e "s|@BUILD@|$build|" -e "s|@VERSION@|$version|" \
	packaging/macos/Info.plist.in >"$bundle/Contents/Info.plist"
plutil -lint "$bundle/Contents/Info.plist" >/dev/null
cp assets/icon.icns "$bundle/Contents/Resources/Gatehouse.icns"
printf 'APPL????' >"$bundle/Contents/PkgInfo"

echo "==> macos: codesign"
if [ -n "${GATEHOUSE_CODESIGN_IDENTITY:-}" ]; then
	sign=(codesign --force --options runtime --timestamp --sign "$GATEHOUSE_CODESIGN_IDENTITY")
else
	echo "    (GATEHOUSE_CODESIGN_IDENTITY is not set: signing ad hoc)"
	sign=(codesign --force --sign -)
fi
# Inside out: the programs, then the bundle that seals them.
"${sign[@]}" "$bundle/Contents/MacOS/gatehouse"
"${sign[@]}" --identifier "$app_id" "$bundle/Contents/MacOS/gatehouse-app"
"${sign[@]}" "$bundle"
codesign --verify --strict --deep "$bundle"
echo "    $bundle"
