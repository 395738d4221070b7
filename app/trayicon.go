package app

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"sync"

	"fyne.io/fyne/v2"

	"github.com/gatehouse-dev/gatehouse/assets"
)

// A trayLook is what the tray icon shows: the shield alone while every
// server the agents run goes through Gatehouse, or with a badge in a corner
// that a glance at the panel catches.
type trayLook int

const (
	lookPlain   trayLook = iota // the shield alone
	lookWarn                    // an amber badge: paused, or some servers bypass Gatehouse
	lookBad                     // a red badge: nothing the agents run goes through Gatehouse
	lookWaiting                 // a blue badge with a white ring: an approval waits
)

// trayLook returns the icon for s. An approval waiting comes first: it is
// the one thing a person must act on now.
func (s status) trayLook() trayLook {
	if s.waiting > 0 {
		return lookWaiting
	}
	switch _, t := s.headline(); t {
	case toneWarn:
		return lookWarn
	case toneBad:
		return lookBad
	}
	return lookPlain
}

// Badge colours: amber 500, red 500, blue 600.
var badgeColors = map[trayLook]color.NRGBA{
	lookWarn:    {R: 0xF5, G: 0x9E, B: 0x0B, A: 0xFF},
	lookBad:     {R: 0xEF, G: 0x44, B: 0x44, A: 0xFF},
	lookWaiting: {R: 0x25, G: 0x63, B: 0xEB, A: 0xFF},
}

var (
	trayIconsMu sync.Mutex
	trayIcons   = map[trayLook]fyne.Resource{} // guarded by trayIconsMu
)

// trayIcon returns the tray icon for look, drawn once.
func trayIcon(look trayLook) fyne.Resource {
	trayIconsMu.Lock()
	defer trayIconsMu.Unlock()
	if r, ok := trayIcons[look]; ok {
		return r
	}
	r := trayIconResource
	if c, ok := badgeColors[look]; ok {
		r = fyne.NewStaticResource(trayIconNames[look], badged(assets.IconPNG(64), c, look == lookWaiting))
	}
	trayIcons[look] = r
	return r
}

var trayIconNames = map[trayLook]string{
	lookWarn:    "gatehouse-64-warn.png",
	lookBad:     "gatehouse-64-off.png",
	lookWaiting: "gatehouse-64-waiting.png",
}

// badged returns the PNG icon with a round badge of colour c in its top
// right corner, ringed in white when ring is set; the icon as it is if it
// cannot be read (it is embedded, so that is a programmer error caught by
// the tests).
func badged(icon []byte, c color.NRGBA, ring bool) []byte {
	src, err := png.Decode(bytes.NewReader(icon))
	if err != nil {
		return icon
	}
	b := src.Bounds()
	img := image.NewNRGBA(b)
	draw.Draw(img, b, src, b.Min, draw.Src)
	size := float64(b.Dx())
	r := size * 0.22
	cx, cy := float64(b.Max.X)-r-1, float64(b.Min.Y)+r+1
	white := color.NRGBA{R: 0xFF, G: 0xFF, B: 0xFF, A: 0xFF}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
			d2 := dx*dx + dy*dy
			switch {
			case d2 <= (r-3)*(r-3), !ring && d2 <= r*r:
				img.SetNRGBA(x, y, c)
			case d2 <= r*r:
				img.SetNRGBA(x, y, white)
			}
		}
	}
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		return icon
	}
	return out.Bytes()
}
