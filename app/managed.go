package app

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/clients"
)

// managedNotice says what managed (enterprise) configuration a client
// reads: it may make the client ignore or refuse its entries, governed or
// not, and those entries are then not protected (their rows say which).
func managedNotice(c clients.Client) []fyne.CanvasObject {
	var out []fyne.CanvasObject
	for _, n := range c.Managed {
		t := text("Managed configuration: "+n+".", widget.RichTextStyle{ColorName: theme.ColorNameWarning, SizeName: theme.SizeNameCaptionText})
		t.Wrapping = fyne.TextWrapWord
		out = append(out, t)
	}
	return out
}
