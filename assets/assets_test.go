package assets_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"os"
	"slices"
	"testing"

	"github.com/gatehouse-dev/gatehouse/assets"
	"github.com/gatehouse-dev/gatehouse/assets/internal/iconfile"
)

func decodePNG(t *testing.T, name string, b []byte) image.Image {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return img
}

// TestRenders checks that each committed PNG has the size its name promises,
// a transparent background and the opaque shield in the middle: what a dock,
// a taskbar or a package manager shows.
func TestRenders(t *testing.T) {
	t.Parallel()
	for _, n := range assets.Sizes() {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			name := assets.IconPNGName(n)
			b, err := fs.ReadFile(assets.FS(), name)
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			img := decodePNG(t, name, b)
			if got := img.Bounds().Size(); got != image.Pt(n, n) {
				t.Fatalf("%s size = %v, want %dx%d", name, got, n, n)
			}
			if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
				t.Errorf("%s top-left alpha = %d, want 0 (transparent background)", name, a)
			}
			if _, _, _, a := img.At(n/2, n/8).RGBA(); a != 0xffff {
				t.Errorf("%s alpha near the top centre = %d, want opaque shield", name, a)
			}
		})
	}
}

func TestIconPNG(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		size int
		want int
	}{
		{"exact small", 16, 16},
		{"exact large", 512, 512},
		{"between sizes rounds up", 20, 32},
		{"tray size rounds up", 22, 32},
		{"zero gives the smallest", 0, 16},
		{"beyond the largest gives the largest", 1024, 512},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			img := decodePNG(t, tt.name, assets.IconPNG(tt.size))
			if got := img.Bounds().Dx(); got != tt.want {
				t.Errorf("IconPNG(%d) is %d px wide, want %d", tt.size, got, tt.want)
			}
		})
	}
}

func TestSVG(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		svg  []byte
	}{
		{"icon", assets.IconSVG},
		{"tray", assets.TraySVG},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var doc struct {
				XMLName xml.Name
				ViewBox string `xml:"viewBox,attr"`
				Title   string `xml:"title"`
			}
			if err := xml.Unmarshal(tt.svg, &doc); err != nil {
				t.Fatalf("parse %s SVG: %v", tt.name, err)
			}
			if doc.XMLName.Local != "svg" || doc.XMLName.Space != "http://www.w3.org/2000/svg" {
				t.Errorf("%s root = %v, want svg in the SVG namespace", tt.name, doc.XMLName)
			}
			if doc.ViewBox != "0 0 64 64" {
				t.Errorf("%s viewBox = %q, want %q (square, on the 64-unit grid)", tt.name, doc.ViewBox, "0 0 64 64")
			}
			if doc.Title != "Gatehouse" {
				t.Errorf("%s title = %q, want %q", tt.name, doc.Title, "Gatehouse")
			}
		})
	}
}

func TestTrayPNG(t *testing.T) {
	t.Parallel()
	img := decodePNG(t, "tray-64.png", assets.TrayPNG)
	if got := img.Bounds().Size(); got != image.Pt(64, 64) {
		t.Fatalf("TrayPNG size = %v, want 64x64", got)
	}
	// A template image is black where it is drawn: the menu bar supplies the colour.
	for y := range 64 {
		for x := range 64 {
			r, g, b, a := img.At(x, y).RGBA()
			if a > 0 && (r|g|b) != 0 {
				t.Fatalf("TrayPNG pixel (%d,%d) = rgba(%d,%d,%d,%d), want black or transparent", x, y, r, g, b, a)
			}
		}
	}
}

func TestFS(t *testing.T) {
	t.Parallel()
	var got []string
	err := fs.WalkDir(assets.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			got = append(got, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk FS: %v", err)
	}
	want := []string{"icon.svg", "tray-64.png", "tray.svg"}
	for _, n := range assets.Sizes() {
		want = append(want, assets.IconPNGName(n))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("FS files = %v, want %v", got, want)
	}
}

func ExampleIconPNG() {
	b := assets.IconPNG(48)
	cfg, _ := png.DecodeConfig(bytes.NewReader(b))
	fmt.Printf("%dx%d\n", cfg.Width, cfg.Height)
	// Output: 48x48
}

func ExampleSizes() {
	fmt.Println(assets.Sizes())
	// Output: [16 32 48 64 128 256 512]
}

// TestIconContainers checks that icon.ico and icon.icns hold the committed
// renders: after the PNGs change, `go generate` must run again.
func TestIconContainers(t *testing.T) {
	t.Parallel()
	var renders []iconfile.Render
	for _, n := range assets.Sizes() {
		renders = append(renders, iconfile.Render{Size: n, PNG: assets.IconPNG(n)})
	}
	for _, c := range []struct {
		name  string
		write func([]iconfile.Render) ([]byte, error)
	}{{assets.ICOName, iconfile.ICO}, {assets.ICNSName, iconfile.ICNS}} {
		want, err := c.write(renders)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(c.name)
		if err != nil {
			t.Fatalf("read %s: %v", c.name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./assets", c.name)
		}
	}
}
