package app

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
)

// gatehouseTheme is the base theme (light or dark, as the system asks) with
// the indigo of the Gatehouse icon as its accent.
type gatehouseTheme struct {
	fyne.Theme
}

var _ fyne.Theme = gatehouseTheme{}

// newTheme wraps base, unless it already is a Gatehouse theme.
func newTheme(base fyne.Theme) fyne.Theme {
	if t, ok := base.(gatehouseTheme); ok {
		return t
	}
	if base == nil {
		base = theme.DefaultTheme()
	}
	return gatehouseTheme{Theme: base}
}

// The colours of the words that changed in a diff: removed and added.
const (
	colorNameDiffRemoved fyne.ThemeColorName = "gatehouse.diffRemoved"
	colorNameDiffAdded   fyne.ThemeColorName = "gatehouse.diffAdded"
)

var (
	indigo600 = color.NRGBA{R: 0x4F, G: 0x46, B: 0xE5, A: 0xFF}
	indigo400 = color.NRGBA{R: 0x81, G: 0x8C, B: 0xF8, A: 0xFF}
	red700    = color.NRGBA{R: 0xB9, G: 0x1C, B: 0x1C, A: 0xFF}
	red400    = color.NRGBA{R: 0xF8, G: 0x71, B: 0x71, A: 0xFF}
	green700  = color.NRGBA{R: 0x15, G: 0x80, B: 0x3D, A: 0xFF}
	green400  = color.NRGBA{R: 0x4A, G: 0xDE, B: 0x80, A: 0xFF}
)

func (t gatehouseTheme) Color(n fyne.ThemeColorName, v fyne.ThemeVariant) color.Color {
	dark := v == theme.VariantDark
	accent := indigo600
	if dark {
		accent = indigo400
	}
	switch n {
	case theme.ColorNamePrimary, theme.ColorNameHyperlink:
		return accent
	case colorNameDiffRemoved:
		if dark {
			return red400
		}
		return red700
	case colorNameDiffAdded:
		if dark {
			return green400
		}
		return green700
	case theme.ColorNameFocus:
		return withAlpha(accent, 0x7F)
	case theme.ColorNameSelection:
		return withAlpha(accent, 0x40)
	}
	return t.Theme.Color(n, v)
}

func withAlpha(c color.NRGBA, a uint8) color.NRGBA {
	c.A = a
	return c
}
