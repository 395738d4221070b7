package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

// The test binary doubles as the app itself, with a line protocol on its
// standard input and output through which TestSmallestWindowUnderXvfb
// reads what the window shows: the app's own code, on a real display,
// inspected from inside.
const (
	roleApp = "app"
	argsEnv = "GATEHOUSE_APP_MAIN_TEST_ARGS"
)

func init() {
	if os.Getenv(roleEnv) != roleApp {
		return
	}
	go inspect(os.Stdin, os.Stdout)
	os.Exit(run(strings.Fields(os.Getenv(argsEnv)), io.Discard, os.Stderr))
}

// A shown is one text the window shows, where it shows it.
type shown struct {
	Text string  `json:"text"`
	X    float32 `json:"x"`
	Y    float32 `json:"y"`
	// Whole is set when all of the text is on screen: not cut, not
	// scrolled away.
	Whole bool `json:"whole"`
}

// A report is what the main window shows, read on the Fyne thread.
type report struct {
	Width    float32  `json:"width"`
	Height   float32  `json:"height"`
	Texts    []shown  `json:"texts"`
	Problems []string `json:"problems"`
	// Needs says what the widest and tallest parts of the window ask for.
	Needs []string `json:"needs"`
}

// inspect answers each line of in ("report") with the report of the main
// window, as one line of JSON on out.
func inspect(in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var r report
		fyne.DoAndWait(func() { r = readWindow() })
		b, _ := json.Marshal(r)
		fmt.Fprintf(out, "%s\n", b)
	}
}

// readWindow reads the main window's tree of objects: the texts it shows
// and what is wrong with them.
func readWindow() report {
	var w fyne.Window
	for _, x := range fyne.CurrentApp().Driver().AllWindows() {
		if x.Title() == "Gatehouse" {
			w = x
		}
	}
	if w == nil || w.Content() == nil {
		return report{Problems: []string{"no main window"}}
	}
	size := w.Canvas().Size()
	r := report{Width: size.Width, Height: size.Height}
	win := box{0, 0, size.Width, size.Height}
	walk(&r, w.Content(), fyne.Position{}, win, win, true, true, "")
	needs(&r, w.Content(), 0)
	return r
}

// needs lists the objects, under o, that ask for more than the smallest
// window gives, to say why the window is larger.
func needs(r *report, o fyne.CanvasObject, depth int) {
	if o == nil || !o.Visible() || depth > 30 {
		return
	}
	var kids []fyne.CanvasObject
	switch o := o.(type) {
	case *fyne.Container:
		kids = o.Objects
	case fyne.Widget:
		kids = test.WidgetRenderer(o).Objects()
	}
	if m := o.MinSize(); m.Width > 560 || m.Height > 540 {
		r.Needs = append(r.Needs, fmt.Sprintf("%s%T %v", strings.Repeat(" ", depth), o, m))
	}
	for _, k := range kids {
		needs(r, k, depth+1)
	}
}

// A box is a rectangle in window coordinates.
type box struct{ x0, y0, x1, y1 float32 }

// slack absorbs rounding in the layouts' arithmetic.
const slack = 1.5

func (b box) holds(c box, xs, ys bool) bool {
	return (!xs || (c.x0 >= b.x0-slack && c.x1 <= b.x1+slack)) && (!ys || (c.y0 >= b.y0-slack && c.y1 <= b.y1+slack))
}

func (b box) meets(c box) bool {
	return c.x1 > b.x0 && c.x0 < b.x1 && c.y1 > b.y0 && c.y0 < b.y1
}

// walk visits o at its parent's origin at, within view (what of it can be
// on screen: the window, or the scroll it is in). xs and ys say whether
// leaving view along each axis cuts it (no scroll lets the user reach
// it). owner is the text of the label or rich text o belongs to.
func walk(r *report, o fyne.CanvasObject, at fyne.Position, view, win box, xs, ys bool, owner string) {
	if o == nil || !o.Visible() {
		return
	}
	p := at.Add(o.Position())
	s := o.Size()
	if t, ok := o.(*canvas.Text); ok && s.IsZero() {
		s = t.MinSize() // drawn from its position at its own size
	}
	b := box{p.X, p.Y, p.X + s.Width, p.Y + s.Height}
	if !view.meets(b) && !(xs && ys) {
		return // scrolled away
	}
	if _, ok := o.(fyne.Widget); ok && o.MinSize().Width > s.Width+slack && xs {
		r.Problems = append(r.Problems, fmt.Sprintf("%T at %v,%v is %v wide and needs %v", o, p.X, p.Y, s.Width, o.MinSize().Width))
	}
	name := describe(o)
	if s.Width > 0 && s.Height > 0 && !view.holds(b, xs, ys) && name != "" {
		r.Problems = append(r.Problems, fmt.Sprintf("%s at %v,%v size %vx%v is cut by its view %v", name, p.X, p.Y, s.Width, s.Height, view))
	}
	switch o := o.(type) {
	case *canvas.Text:
		if o.Text == "" {
			return
		}
		whole := view.holds(b, true, true) && win.holds(b, true, true) && o.MinSize().Width <= s.Width+slack
		if o.MinSize().Width > s.Width+slack {
			r.Problems = append(r.Problems, fmt.Sprintf("text %q needs %v px and has %v", o.Text, o.MinSize().Width, s.Width))
		}
		if strings.HasSuffix(o.Text, "…") && owner != "" && !strings.Contains(squeeze(owner), squeeze(strings.TrimSuffix(o.Text, "…"))+"…") {
			whole = false // cut short: a wanted text must not be
		}
		r.Texts = append(r.Texts, shown{Text: o.Text, X: p.X, Y: p.Y, Whole: whole})
	case *fyne.Container:
		for _, c := range o.Objects {
			walk(r, c, p, view, win, xs, ys, owner)
		}
	case fyne.Widget:
		switch w := o.(type) {
		case *widget.Label:
			owner = w.Text
		case *widget.RichText:
			owner = w.String()
		case *container.Scroll:
			view = b
			xs = w.Direction == container.ScrollVerticalOnly || w.Direction == container.ScrollNone
			ys = w.Direction == container.ScrollHorizontalOnly || w.Direction == container.ScrollNone
		}
		for _, c := range test.WidgetRenderer(o).Objects() {
			walk(r, c, p, view, win, xs, ys, owner)
		}
	}
}

// describe names o for a problem, or returns "" for objects whose bounds
// do not matter (backgrounds, lines, containers).
func describe(o fyne.CanvasObject) string {
	switch o := o.(type) {
	case *widget.Label:
		return fmt.Sprintf("label %q", o.Text)
	case *widget.Button:
		return fmt.Sprintf("button %q", o.Text)
	case *widget.Check:
		return fmt.Sprintf("check box %q", o.Text)
	case *widget.Hyperlink:
		return fmt.Sprintf("link %q", o.Text)
	case *widget.Select:
		return "choice list"
	case *widget.Entry:
		return fmt.Sprintf("field %q", o.PlaceHolder)
	case *canvas.Text:
		return fmt.Sprintf("text %q", o.Text)
	}
	return ""
}

// squeeze drops white space, which wrapping moves about.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// appUnderTest is the app, run by the test binary, under Xvfb.
type appUnderTest struct {
	*running
	in  io.Writer
	out *bufio.Reader
}

// report reads what the main window shows.
func (a *appUnderTest) report() report {
	a.t.Helper()
	fmt.Fprintln(a.in, "report")
	line, err := readLineFrom(a.out, 30*time.Second)
	if err != nil {
		a.t.Fatalf("read the window's report: %v\nstderr:\n%s", err, a.stderr)
	}
	var r report
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		a.t.Fatalf("report %q: %v", line, err)
	}
	return r
}

// find returns where the window shows s whole, leftmost first, if it
// does.
func (r report) find(s string) (shown, bool) {
	var found shown
	ok := false
	for _, t := range r.Texts {
		if t.Text == s && t.Whole && (!ok || t.X < found.X) {
			found, ok = t, true
		}
	}
	return found, ok
}

// shows reports whether the window shows s whole: as one text, or as the
// lines a wrapped text was broken into.
func (r report) shows(s string) bool {
	if _, ok := r.find(s); ok {
		return true
	}
	var all strings.Builder
	for _, t := range r.Texts {
		if t.Whole {
			all.WriteString(t.Text)
		}
	}
	return strings.Contains(squeeze(all.String()), squeeze(s))
}

// TestSmallestWindowUnderXvfb runs the app, shrinks its window to the
// smallest size it allows, 800x600, and visits every view by clicking in
// the sidebar. On each, what a user reads must be there whole: no text
// cut short with "…", none wider than its widget, nothing outside the
// window, and the view's main action on screen. With -screenshots DIR it
// saves History at that size.
func TestSmallestWindowUnderXvfb(t *testing.T) {
	bus := needKeychain(t)
	userHome, home := seededHome(t, 60, 0)

	xvfb := need(t, "Xvfb", "xvfb")
	r := &running{t: t, xdotool: need(t, "xdotool", "xdotool"), exited: make(chan error, 1), stderr: new(bytes.Buffer)}
	r.display = startXvfb(t, xvfb)
	r.cmd = exec.Command(os.Args[0], "-test.run=^$")
	// The app finds the proxy on PATH: it does not run from beside it.
	env := baseEnv(t, userHome, home)
	env[0] = "PATH=" + filepath.Dir(proxyBinary(t)) + string(os.PathListSeparator) + os.Getenv("PATH")
	r.cmd.Env = append(env, "DISPLAY="+r.display, "DBUS_SESSION_BUS_ADDRESS="+bus, "LIBGL_ALWAYS_SOFTWARE=1",
		"XDG_RUNTIME_DIR="+os.Getenv("XDG_RUNTIME_DIR"), roleEnv+"="+roleApp, argsEnv+"=--open servers")
	r.cmd.Stderr = r.stderr
	in, _ := r.cmd.StdinPipe()
	out, _ := r.cmd.StdoutPipe()
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start the app: %v", err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		in.Close()
		if !r.waited {
			r.cmd.Process.Kill()
			<-r.exited
		}
	})
	r.id = waitWindow(t, r.xdo, "^Gatehouse$", r.exited, &r.waited, r.stderr)
	a := &appUnderTest{running: r, in: in, out: bufio.NewReader(out)}

	// The smallest size: the window asks the desktop for no less than
	// 800x600 (Xvfb has no window manager to hold it to that), and takes
	// 800x600 whole.
	xprop := need(t, "xprop", "x11-utils")
	c := exec.Command(xprop, "-id", r.id, "WM_NORMAL_HINTS")
	c.Env = []string{"DISPLAY=" + r.display}
	hints, err := c.Output()
	if err != nil {
		t.Fatalf("xprop: %v", err)
	}
	if !strings.Contains(string(hints), "minimum size: 800 by 600") {
		t.Errorf("the window's size hints are\n%s\nwant a minimum size of 800 by 600", hints)
	}
	var rep report
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := r.xdo("windowsize", r.id, "800", "600"); err != nil {
			t.Fatal(err)
		}
		rep = a.report()
		if rep.Width == 800 && rep.Height == 600 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("asked for 800x600, the window is %vx%v; it shows:\n%s\nwhat asks for room:\n%s", rep.Width, rep.Height, texts(rep), strings.Join(rep.Needs, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, v := range []struct {
		nav  string   // the sidebar entry
		want []string // texts a user must be able to read whole
	}{
		{nav: "Servers", want: []string{"Servers", "filesystem", "server-filesystem", "server-github", "Add server", "list_directory", "Test connection"}},
		{nav: "Protect my agents", want: []string{"Protect my agents", "Protect all", "Undo all"}},
		{nav: "Policy", want: []string{"Policy"}},
		{nav: "History", want: []string{"History", "Every entry", "Allowed", "Awaiting approval", "Denied"}},
		{nav: "Export", want: []string{"Export for an auditor", "Include arguments and results", "Export and verify"}},
		{nav: "Settings", want: []string{"Settings", "Signing keys"}},
	} {
		t.Run(v.nav, func(t *testing.T) {
			a.t = t
			defer func() { a.t = r.t }()
			item, ok := a.report().find(v.nav)
			if !ok {
				t.Fatalf("the sidebar does not show %q", v.nav)
			}
			r.click(r.id, int(item.X)+4, int(item.Y)+4)
			var rep report
			deadline := time.Now().Add(30 * time.Second)
			for {
				rep = a.report()
				missing := ""
				for _, s := range v.want {
					if !rep.shows(s) {
						missing = s
					}
				}
				if missing == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("at 800x600, the %s view does not show %q whole; it shows:\n%s", v.nav, missing, texts(rep))
				}
				time.Sleep(200 * time.Millisecond)
			}
			if *screenshots != "" && v.nav == "History" {
				capture(t, need(t, "import", "imagemagick"), r.display, r.id, filepath.Join(*screenshots, "history-800x600.png"))
			}
			if rep.Width != 800 || rep.Height != 600 {
				t.Errorf("with %s on screen the window is %vx%v, want 800x600", v.nav, rep.Width, rep.Height)
			}
			for _, p := range rep.Problems {
				t.Errorf("at 800x600, %s: %s", v.nav, p)
			}
		})
	}
	r.stop()
}

// texts lists what a report shows, one text a line.
func texts(r report) string {
	var b strings.Builder
	for _, t := range r.Texts {
		fmt.Fprintf(&b, "  %q at %v,%v whole=%v\n", t.Text, t.X, t.Y, t.Whole)
	}
	return b.String()
}
