// Package assets holds the Gatehouse artwork, embedded in the binary so that
// every build carries the same icon.
//
// # Files
//
//   - icon.svg is the app icon: a shield holding a gateway whose portcullis is
//     half raised. It is flat and drawn on a 64-unit grid so that it stays
//     legible at 16 pixels.
//   - icon-<n>.png are renders of icon.svg at n×n pixels for n in [Sizes], for
//     window icons, packaging ("fyne package" reads icon-512.png through
//     FyneApp.toml) and platforms that cannot draw SVG.
//   - icon.ico ([ICOName]) holds the renders up to 256 pixels for Windows (the
//     executables' icon and the installer's), and icon.icns ([ICNSName]) holds
//     them for macOS app bundles. They are not embedded: the packages read
//     them from this folder.
//   - tray.svg and tray-64.png are a one-colour variant for menu bars that
//     tint their icons, such as the macOS menu bar (a "template" image).
//
// The PNG, ICO and ICNS files are committed; after editing an SVG, regenerate
// them with `go generate ./assets` (it needs rsvg-convert, from the Debian
// package librsvg2-bin). A test fails while icon.ico or icon.icns is stale.
//
// # Use
//
// [IconSVG] and [IconPNG] return the bytes; [FS] serves every file by name.
// The package has no dependency on a GUI toolkit: callers wrap the bytes in
// their toolkit's resource type.
package assets

import (
	"embed"
	"fmt"
	"io/fs"
)

//go:generate rsvg-convert -w 16 -h 16 icon.svg -o icon-16.png
//go:generate rsvg-convert -w 32 -h 32 icon.svg -o icon-32.png
//go:generate rsvg-convert -w 48 -h 48 icon.svg -o icon-48.png
//go:generate rsvg-convert -w 64 -h 64 icon.svg -o icon-64.png
//go:generate rsvg-convert -w 128 -h 128 icon.svg -o icon-128.png
//go:generate rsvg-convert -w 256 -h 256 icon.svg -o icon-256.png
//go:generate rsvg-convert -w 512 -h 512 icon.svg -o icon-512.png
//go:generate rsvg-convert -w 64 -h 64 tray.svg -o tray-64.png
//go:generate go run mkicons.go

//go:embed icon.svg tray.svg icon-*.png tray-64.png
var files embed.FS

// sizes are the pixel sizes of the icon renders, in increasing order; keep
// them in step with the go:generate lines above.
var sizes = []int{16, 32, 48, 64, 128, 256, 512}

// Sizes returns, in increasing order, the pixel sizes at which the icon is
// rendered to PNG.
func Sizes() []int { return append([]int(nil), sizes...) }

// The icon containers in this folder, written from the PNG renders by
// `go generate`: ICO for Windows, ICNS for macOS.
const (
	ICOName  = "icon.ico"
	ICNSName = "icon.icns"
)

// IconSVG is the app icon as SVG.
var IconSVG = mustRead("icon.svg")

// TraySVG is the one-colour tray icon as SVG: black on transparent, meant to
// be tinted by the menu bar that shows it.
var TraySVG = mustRead("tray.svg")

// TrayPNG is [TraySVG] rendered at 64×64 pixels.
var TrayPNG = mustRead("tray-64.png")

var iconPNGs = func() map[int][]byte {
	m := make(map[int][]byte, len(sizes))
	for _, n := range sizes {
		m[n] = mustRead(IconPNGName(n))
	}
	return m
}()

// IconPNGName returns the file name, within [FS], of the icon rendered at
// size×size pixels. Only the sizes in [Sizes] exist.
func IconPNGName(size int) string {
	return fmt.Sprintf("icon-%d.png", size)
}

// IconPNG returns the app icon as a PNG of at least size×size pixels: the
// smallest render in [Sizes] that is not smaller than size, or the largest
// render when size exceeds them all. Callers that need an exact size ask for
// one listed in [Sizes].
func IconPNG(size int) []byte {
	for _, n := range sizes {
		if n >= size {
			return iconPNGs[n]
		}
	}
	return iconPNGs[sizes[len(sizes)-1]]
}

// FS returns the embedded files: icon.svg, tray.svg, tray-64.png and
// icon-<n>.png for each n in [Sizes].
func FS() fs.FS { return files }

// mustRead reads an embedded file. The files are checked into the package and
// named by the embed directive, so a missing one is a programmer error.
func mustRead(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("assets: read embedded %s: %v", name, err))
	}
	return b
}
