// Package iconfile writes the icon containers that Windows and macOS read,
// from square PNG renders of one icon: ICO (Windows executables and
// installers) and ICNS (macOS app bundles). Both store each size as the PNG
// itself, which Windows Vista and later and macOS 10.7 and later read.
package iconfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image/png"
	"slices"
)

// Render is one PNG render of the icon, Size×Size pixels.
type Render struct {
	Size int
	PNG  []byte
}

// check decodes r's header and returns an error unless it is a square PNG
// of r.Size pixels.
func (r Render) check() error {
	cfg, err := png.DecodeConfig(bytes.NewReader(r.PNG))
	if err != nil {
		return fmt.Errorf("%d px render: %w", r.Size, err)
	}
	if cfg.Width != r.Size || cfg.Height != r.Size {
		return fmt.Errorf("%d px render is %d×%d", r.Size, cfg.Width, cfg.Height)
	}
	return nil
}

// ICO returns an ICO file holding the renders of at most 256 pixels, smallest
// first. Larger renders are left out: 256 is the most the format describes.
func ICO(renders []Render) ([]byte, error) {
	var use []Render
	for _, r := range sorted(renders) {
		if r.Size > 256 {
			continue
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("ico: %w", err)
		}
		use = append(use, r)
	}
	if len(use) == 0 {
		return nil, fmt.Errorf("ico: no render of 256 px or less")
	}
	var b bytes.Buffer
	// ICONDIR: reserved, type 1 (icon), count.
	le(&b, uint16(0), uint16(1), uint16(len(use)))
	offset := 6 + 16*len(use)
	for _, r := range use {
		// ICONDIRENTRY: width and height (0 means 256), colour count,
		// reserved, planes, bits per pixel, size, offset.
		dim := uint8(r.Size % 256)
		le(&b, dim, dim, uint8(0), uint8(0), uint16(1), uint16(32), uint32(len(r.PNG)), uint32(offset))
		offset += len(r.PNG)
	}
	for _, r := range use {
		b.Write(r.PNG)
	}
	return b.Bytes(), nil
}

// icnsTypes maps a render's pixel size to the ICNS element types that hold
// it: the size at 1x, and the half size at 2x (Retina).
var icnsTypes = map[int][]string{
	16:   {"icp4"},
	32:   {"icp5", "ic11"},
	64:   {"icp6", "ic12"},
	128:  {"ic07"},
	256:  {"ic08", "ic13"},
	512:  {"ic09", "ic14"},
	1024: {"ic10"},
}

// ICNS returns an ICNS file holding every render whose size macOS names
// (16, 32, 64, 128, 256, 512 and 1024 pixels); others are left out.
func ICNS(renders []Render) ([]byte, error) {
	var body bytes.Buffer
	for _, r := range sorted(renders) {
		types, ok := icnsTypes[r.Size]
		if !ok {
			continue
		}
		if err := r.check(); err != nil {
			return nil, fmt.Errorf("icns: %w", err)
		}
		for _, typ := range types {
			body.WriteString(typ)
			be(&body, uint32(8+len(r.PNG)))
			body.Write(r.PNG)
		}
	}
	if body.Len() == 0 {
		return nil, fmt.Errorf("icns: no render of a size macOS uses")
	}
	var b bytes.Buffer
	b.WriteString("icns")
	be(&b, uint32(8+body.Len()))
	b.Write(body.Bytes())
	return b.Bytes(), nil
}

func sorted(renders []Render) []Render {
	return slices.SortedFunc(slices.Values(renders), func(a, b Render) int { return a.Size - b.Size })
}

func le(b *bytes.Buffer, vs ...any) {
	for _, v := range vs {
		_ = binary.Write(b, binary.LittleEndian, v) // a bytes.Buffer does not fail
	}
}

func be(b *bytes.Buffer, v uint32) {
	_ = binary.Write(b, binary.BigEndian, v)
}
