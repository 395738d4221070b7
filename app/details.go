package app

import (
	"maps"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/store"
)

// detailsDialog describes one server in full: what the list row shortens,
// plus its working folder, the names of its environment variables (never
// their values, which often hold secrets) and the command an MCP client runs
// to reach it through Gatehouse.
func detailsDialog(s store.Server, parent fyne.Window) dialog.Dialog {
	value := func(v string, mono bool) *widget.Label {
		l := widget.NewLabel(v)
		l.TextStyle.Monospace = mono
		l.Wrapping = fyne.TextWrapWord
		l.Selectable = true
		return l
	}
	key := func(k string) fyne.CanvasObject {
		return text(k, widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Alignment: fyne.TextAlignTrailing})
	}

	cwd := s.Cwd
	if cwd == "" {
		cwd = "the folder the proxy starts in"
	}
	var env fyne.CanvasObject = value("none", false)
	if len(s.Env) > 0 {
		env = compact(
			value(strings.Join(slices.Sorted(maps.Keys(s.Env)), "\n"), true),
			pullUp(text("Values are not shown.", caption)))
	}
	updated := "never"
	if !s.UpdatedAt.IsZero() && !s.UpdatedAt.Equal(s.CreatedAt) {
		updated = s.UpdatedAt.Local().Format(timeLayout)
	}

	grid := container.New(layout.NewFormLayout(),
		key("Transport"), value(s.Transport, false),
		key("Command"), value(commandLine(s.Command, s.Args), true),
		key("Working folder"), value(cwd, cwd == s.Cwd),
		key("Environment"), env,
		key("Added"), value(s.CreatedAt.Local().Format(timeLayout), false),
		key("Changed"), value(updated, false),
		key("Clients run"), value(ProxyCommand(s.Name), true),
	)
	d := dialog.NewCustom(s.Name, "Close", grid, parent)
	d.Resize(fyne.NewSize(600, 0))
	return d
}

// timeLayout is how the details dialog shows a moment.
const timeLayout = "Jan 2, 2006 at 15:04"

// ProxyCommand returns the command an MCP client runs to reach the server
// called name through Gatehouse.
func ProxyCommand(name string) string {
	return "gatehouse proxy " + shellQuote(name)
}
