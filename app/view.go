package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/approval"
	"github.com/gatehouse-dev/gatehouse/store"
)

// exampleAddCommand shows AddServerCommand filled in, under it in the empty
// window.
const exampleAddCommand = "gatehouse server add memory -- npx -y @modelcontextprotocol/server-memory"

// mainView is the content of the main window: a header with the Refresh
// button, an error banner, the server list or the empty state, and a footer
// with the home folder.
type mainView struct {
	content *fyne.Container

	banner  fyne.CanvasObject // shown while the last read failed
	errText *widget.Label
	count   *widget.RichText // "3 servers" above the list
	list    *widget.List
	listBox fyne.CanvasObject // the list with its heading
	empty   fyne.CanvasObject // shown when the store holds no server
	copy    *widget.Button    // copies AddServerCommand
	copied  *widget.RichText  // "Copied" after the copy button is pressed

	waiting     fyne.CanvasObject // shown while approval requests wait
	waitingText *widget.Label
	approver    fyne.CanvasObject // shown when Gatehouse cannot answer approvals
	apTitle     *widget.RichText
	apText      *widget.Label

	servers []store.Server // what the list shows
}

func newMainView(u *UI, home, version string) *mainView {
	v := &mainView{}

	// Header: icon, name, tagline, Refresh.
	icon := canvas.NewImageFromResource(iconResource)
	icon.FillMode = canvas.ImageFillContain
	icon.SetMinSize(fyne.NewSize(48, 48))
	title := text(Title, widget.RichTextStyle{SizeName: theme.SizeNameHeadingText, TextStyle: fyne.TextStyle{Bold: true}})
	tagline := text("The governed gate in front of your MCP servers", secondary)
	refresh := widget.NewButtonWithIcon("Refresh", theme.ViewRefreshIcon(), u.Refresh)
	header := container.NewBorder(nil, nil,
		container.NewHBox(container.NewCenter(icon), container.NewVBox(layout.NewSpacer(), compact(title, pullUp(tagline)), layout.NewSpacer())),
		container.NewVBox(layout.NewSpacer(), refresh, layout.NewSpacer()))

	// Error banner.
	v.errText = widget.NewLabel("")
	v.errText.Wrapping = fyne.TextWrapWord
	errTitle := text("Could not read the server list", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameError})
	v.banner = newPanel(theme.ColorNameError, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewErrorThemedResource(theme.ErrorIcon()))), nil,
		compact(errTitle, v.errText)))
	v.banner.Hide()

	// Approvals waiting, and why Gatehouse cannot answer them.
	v.waitingText = widget.NewLabel("")
	v.waitingText.TextStyle.Bold = true
	review := widget.NewButton("Review", u.ShowApprovals)
	review.Importance = widget.HighImportance
	v.waiting = newPanel(theme.ColorNamePrimary, 0x22, container.NewBorder(nil, nil,
		container.NewCenter(widget.NewIcon(theme.NewPrimaryThemedResource(theme.QuestionIcon()))),
		container.NewCenter(review), v.waitingText))
	v.waiting.Hide()
	v.apText = widget.NewLabel("")
	v.apText.Wrapping = fyne.TextWrapWord
	v.apTitle = text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameWarning})
	v.approver = newPanel(theme.ColorNameWarning, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), nil,
		compact(v.apTitle, v.apText)))
	v.approver.Hide()

	// Server list.
	v.list = widget.NewList(
		func() int { return len(v.servers) },
		func() fyne.CanvasObject { return newServerRow() },
		func(id widget.ListItemID, o fyne.CanvasObject) { o.(*serverRow).set(v.servers[id]) },
	)
	v.list.OnSelected = func(id widget.ListItemID) {
		v.list.UnselectAll()
		if id >= 0 && id < len(v.servers) {
			detailsDialog(v.servers[id], u.win).Show()
		}
	}
	v.count = text("", secondary)
	listHeading := container.NewBorder(nil, nil,
		text("MCP servers", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}}), v.count)
	v.listBox = container.NewBorder(listHeading, nil, nil, nil,
		newPanel(theme.ColorNameInputBackground, 0, v.list))
	v.listBox.Hide()

	// Empty state.
	v.copied = text("", secondary)
	v.copy = widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() {
		u.app.Clipboard().SetContent(AddServerCommand)
		setText(v.copied, "Copied")
	})
	v.copy.Importance = widget.LowImportance
	emptyIcon := canvas.NewImageFromResource(iconResource)
	emptyIcon.FillMode = canvas.ImageFillContain
	emptyIcon.SetMinSize(fyne.NewSize(72, 72))
	command := newPanel(theme.ColorNameInputBackground, 0, container.NewBorder(nil, nil, nil, v.copy,
		container.New(layout.NewCustomPaddedLayout(0, 0, theme.Padding(), 0),
			container.NewCenter(text(AddServerCommand, mono)))))
	v.empty = container.NewCenter(container.NewVBox(
		container.NewCenter(emptyIcon),
		text("No servers yet", widget.RichTextStyle{Alignment: fyne.TextAlignCenter, SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}}),
		text("Register an MCP server from a terminal, and it appears here:", widget.RichTextStyle{Alignment: fyne.TextAlignCenter, ColorName: secondary.ColorName}),
		command,
		text("For example:", widget.RichTextStyle{Alignment: fyne.TextAlignCenter, ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText}),
		pullUp(text(exampleAddCommand, widget.RichTextStyle{Alignment: fyne.TextAlignCenter, ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText, TextStyle: fyne.TextStyle{Monospace: true}})),
		container.NewCenter(v.copied),
	))
	v.empty.Hide()

	// Footer: home folder and version.
	homeText := text(tildePath(home, userHome()), widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}, SizeName: theme.SizeNameCaptionText})
	homeText.Truncation = fyne.TextTruncateEllipsis
	var versionText fyne.CanvasObject = layout.NewSpacer()
	if version != "" {
		versionText = text("Gatehouse "+version, caption)
	}
	footer := container.NewBorder(nil, nil,
		container.NewHBox(widget.NewIcon(theme.NewColoredResource(theme.FolderIcon(), theme.ColorNamePlaceHolder)), text("Home folder", caption)),
		versionText,
		homeText)

	pad := theme.Padding()
	body := container.NewStack(v.listBox, v.empty)
	v.content = container.NewBorder(
		container.NewVBox(
			container.New(layout.NewCustomPaddedLayout(pad*2, pad, pad*3, pad*3), header),
			widget.NewSeparator(),
			container.New(layout.NewCustomPaddedLayout(0, 0, pad*3, pad*3), container.NewVBox(v.waiting, v.approver, v.banner)),
		),
		container.NewVBox(
			widget.NewSeparator(),
			container.New(layout.NewCustomPaddedLayout(0, 0, pad*3, pad*3), footer),
		),
		nil, nil,
		container.New(layout.NewCustomPaddedLayout(pad*2, pad, pad*3, pad*3), body),
	)
	return v
}

// show puts the result of a read on screen. When err is set, the list keeps
// the servers of the last good read (none if there was none), and the banner
// says what went wrong.
func (v *mainView) show(servers []store.Server, err error) {
	if err == nil {
		v.servers = servers
	}
	servers = v.servers
	setText(v.copied, "")
	if err != nil {
		v.errText.SetText(err.Error())
		v.banner.Show()
	} else {
		v.banner.Hide()
	}
	setText(v.count, countServers(len(servers)))
	switch {
	case len(servers) > 0:
		v.empty.Hide()
		v.listBox.Show()
	case err == nil:
		v.listBox.Hide()
		v.empty.Show()
	default: // nothing read yet: say only what failed
		v.listBox.Hide()
		v.empty.Hide()
	}
	// Showing or hiding an object neither lays out its parent again nor
	// repaints a container: refresh the whole content, list rows included.
	v.content.Refresh()
}

// showWaiting says how many approval requests wait, if any.
func (v *mainView) showWaiting(n int) {
	switch n {
	case 0:
		v.waiting.Hide()
	case 1:
		v.waitingText.SetText("A tool call is waiting for your approval")
		v.waiting.Show()
	default:
		v.waitingText.SetText(fmt.Sprintf("%d tool calls are waiting for your approval", n))
		v.waiting.Show()
	}
	v.content.Refresh()
}

// showApprover says why Gatehouse cannot answer approval requests, or
// nothing when err is nil.
func (v *mainView) showApprover(err error) {
	switch {
	case err == nil:
		v.approver.Hide()
	case errors.Is(err, approval.ErrApproverRunning):
		setText(v.apTitle, "Approval requests go to another approver")
		v.apText.SetText(sentence(err) + " To answer them here, stop it (it may be gatehouse approvals in a terminal), then start Gatehouse again.")
		v.approver.Show()
	default:
		setText(v.apTitle, "Gatehouse cannot answer approval requests")
		v.apText.SetText(sentence(err) + " Until an approver runs, tool calls that need approval are denied. Fix this, then start Gatehouse again.")
		v.approver.Show()
	}
	v.content.Refresh()
}

// sentence writes an error as a sentence: a capital, a full stop.
func sentence(err error) string {
	s := err.Error()
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:] + "."
}

// countServers says how many servers there are, as the list heading shows it.
func countServers(n int) string {
	if n == 1 {
		return "1 server"
	}
	return fmt.Sprintf("%d servers", n)
}

// userHome returns the user's home folder where paths are commonly written
// with a tilde, or "" elsewhere (Windows) or when it is unknown.
func userHome() string {
	if runtime.GOOS == "windows" {
		return ""
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
}

// tildePath writes path, when it lies inside home, as "~/" and the rest, the
// way shells and file managers show it.
func tildePath(path, home string) string {
	if home == "" || home == "/" {
		return path
	}
	rel, err := filepath.Rel(home, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return path
	}
	if rel == "." {
		return "~"
	}
	return "~" + string(filepath.Separator) + rel
}
