package iconfile

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
)

func render(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.NRGBA{R: uint8(w), A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func renders(t *testing.T, sizes ...int) []Render {
	var rs []Render
	for _, n := range sizes {
		rs = append(rs, Render{Size: n, PNG: render(t, n, n)})
	}
	return rs
}

// icoEntry is one image of an ICO file, as a reader finds it.
type icoEntry struct {
	width, height int
	png           []byte
}

// readICO parses an ICO file the way Windows does: the directory, then each
// image at its offset.
func readICO(t *testing.T, b []byte) []icoEntry {
	t.Helper()
	if len(b) < 6 {
		t.Fatalf("ico of %d bytes", len(b))
	}
	le := binary.LittleEndian
	if le.Uint16(b[0:]) != 0 || le.Uint16(b[2:]) != 1 {
		t.Fatalf("ico header % x, want reserved 0, type 1", b[:4])
	}
	n := int(le.Uint16(b[4:]))
	var es []icoEntry
	for i := range n {
		d := b[6+16*i : 6+16*(i+1)]
		w, h := int(d[0]), int(d[1])
		if w == 0 {
			w = 256
		}
		if h == 0 {
			h = 256
		}
		if planes, bpp := le.Uint16(d[4:]), le.Uint16(d[6:]); planes != 1 || bpp != 32 {
			t.Errorf("entry %d: planes %d, bits %d; want 1, 32", i, planes, bpp)
		}
		size, off := int(le.Uint32(d[8:])), int(le.Uint32(d[12:]))
		if off+size > len(b) {
			t.Fatalf("entry %d: bytes %d..%d past the end (%d)", i, off, off+size, len(b))
		}
		es = append(es, icoEntry{w, h, b[off : off+size]})
	}
	return es
}

func TestICO(t *testing.T) {
	in := renders(t, 256, 16, 512, 48)
	b, err := ICO(in)
	if err != nil {
		t.Fatal(err)
	}
	got := readICO(t, b)
	want := []int{16, 48, 256}
	if len(got) != len(want) {
		t.Fatalf("ICO holds %d images, want %d (16, 48, 256; not 512)", len(got), len(want))
	}
	for i, e := range got {
		if e.width != want[i] || e.height != want[i] {
			t.Errorf("entry %d is %d×%d, want %d×%d", i, e.width, e.height, want[i], want[i])
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(e.png))
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if cfg.Width != want[i] {
			t.Errorf("entry %d's PNG is %d px wide, want %d", i, cfg.Width, want[i])
		}
	}
}

// readICNS parses an ICNS file into its element types and data.
func readICNS(t *testing.T, b []byte) (types []string, data map[string][]byte) {
	t.Helper()
	be := binary.BigEndian
	if len(b) < 8 || string(b[:4]) != "icns" || int(be.Uint32(b[4:])) != len(b) {
		t.Fatalf("icns header % x for %d bytes", b[:min(8, len(b))], len(b))
	}
	data = map[string][]byte{}
	for p := 8; p < len(b); {
		typ, n := string(b[p:p+4]), int(be.Uint32(b[p+4:]))
		if n < 8 || p+n > len(b) {
			t.Fatalf("element %s at %d: length %d past the end (%d)", typ, p, n, len(b))
		}
		types = append(types, typ)
		data[typ] = b[p+8 : p+n]
		p += n
	}
	return types, data
}

func TestICNS(t *testing.T) {
	b, err := ICNS(renders(t, 512, 16, 48, 32))
	if err != nil {
		t.Fatal(err)
	}
	types, data := readICNS(t, b)
	if got, want := strings.Join(types, " "), "icp4 icp5 ic11 ic09 ic14"; got != want {
		t.Errorf("ICNS elements = %s, want %s (48 has no ICNS type)", got, want)
	}
	for typ, size := range map[string]int{"icp4": 16, "ic11": 32, "ic14": 512} {
		cfg, err := png.DecodeConfig(bytes.NewReader(data[typ]))
		if err != nil || cfg.Width != size {
			t.Errorf("%s: %d px, %v; want a %d px PNG", typ, cfg.Width, err, size)
		}
	}
}

func TestBadRenders(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   []Render
		want string
	}{
		{"not a PNG", []Render{{16, []byte("GIF89a")}}, "16 px render"},
		{"wrong size", []Render{{32, render(t, 16, 16)}}, "32 px render is 16×16"},
		{"not square", []Render{{32, render(t, 32, 16)}}, "32 px render is 32×16"},
		{"nothing to hold", nil, "no render"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ICO(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ICO: %v, want an error with %q", err, tt.want)
			}
			if _, err := ICNS(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ICNS: %v, want an error with %q", err, tt.want)
			}
		})
	}
	if _, err := ICO(renders(t, 512)); err == nil {
		t.Error("ICO of a 512 px render alone: no error, want one (nothing of 256 px or less)")
	}
}
