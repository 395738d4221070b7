package app

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// Servers as a user would register them.
var (
	everything = store.Server{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}}
	filesystem = store.Server{Name: "filesystem", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/projects"}}
	memory     = store.Server{Name: "memory", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-memory"}}
)

// MustStore opens a store in a temporary folder holding servers.
func MustStore(tb testing.TB, servers ...store.Server) *store.Store {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, tb.TempDir(), nil)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	for _, s := range servers {
		if err := st.AddServer(ctx, s); err != nil {
			tb.Fatalf("add server: %v", err)
		}
	}
	return st
}

// harness is the UI on a test app and a temporary store.
type harness struct {
	t         *testing.T
	app       fyne.App
	st        *store.Store
	ui        *UI
	refreshed chan struct{}
	status    chan struct{}
	kc        *fakeKeychain
	clock     *fakeClock // the UI's, once useClock gave it one
	// agentsHome is the user home folder where the UI looks for MCP
	// clients' configs.
	agentsHome string
	mu         sync.Mutex // held while a callback of the UI runs: the "main thread"
}

// serialized runs f holding h.mu: the UI's callbacks from its reads run one
// at a time, as on the real driver's main thread.
func (h *harness) serialized(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

// locked runs f as the main thread would: with no callback of the UI
// running meanwhile.
func (h *harness) locked(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

// newHarness builds the UI on a, or on a new test app when a is nil, and
// opens the main window on a store holding servers.
func newHarness(t *testing.T, a fyne.App, servers ...store.Server) *harness {
	t.Helper()
	if a == nil {
		a = test.NewTempApp(t)
	}
	h := &harness{t: t, app: a, st: MustStore(t, servers...), refreshed: make(chan struct{}, 1), status: make(chan struct{}, 8), kc: newFakeKeychain()}
	h.ui = New(a, h.st, &Options{Version: "1.2.3", Keychain: h.kc, Poll: -1})
	h.ui.doFn = h.serialized
	t.Cleanup(h.ui.Close)
	h.ui.refreshed = h.signal(h.refreshed)
	h.ui.statusShown = h.signal(h.status)
	h.agentsHome = quietMachine(t, h.ui)
	h.ui.ShowMain()
	h.waitRefresh()
	h.waitStatus()
	h.settle()
	return h
}

// quietMachine points the UI's look at MCP clients to a user home folder
// of the test's own, with no client in it until the test writes one, and
// returns that folder.
func quietMachine(t *testing.T, u *UI) string {
	t.Helper()
	home := t.TempDir()
	u.agents.env = &clients.Env{GOOS: "linux", Home: home, Cwd: home, Path: "/usr/bin:/bin",
		Running: func(clients.ID) (bool, time.Time, error) { return false, time.Time{}, nil },
		Tracked: func(string) bool { return false }}
	u.agents.proxy = "/opt/gatehouse/gatehouse"
	return home
}

// signal returns a callback that signals on ch, dropping the signal when
// one is already pending: a test waits for a refresh, not for each one.
func (h *harness) signal(ch chan struct{}) func() {
	return func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// waitStatus waits until a status read has reached the sidebar and the
// tray.
func (h *harness) waitStatus() {
	h.t.Helper()
	select {
	case <-h.status:
	case <-time.After(10 * time.Second):
		h.t.Fatal("the status did not refresh within 10s")
	}
}

// waitRefresh waits until a refresh has reached the window.
func (h *harness) waitRefresh() {
	h.t.Helper()
	select {
	case <-h.refreshed:
	case <-time.After(10 * time.Second):
		h.t.Fatal("the window did not refresh within 10s")
	}
}

// tapRefresh presses the Refresh button and waits for the new list.
func (h *harness) tapRefresh() {
	h.t.Helper()
	b := findButton(h.ui.Window().Canvas().Content(), "Refresh")
	if b == nil {
		h.t.Fatal("no Refresh button on screen")
	}
	test.Tap(b)
	h.waitRefresh()
	h.settle()
}

// screen returns the text visible in the main window, one drawn line of
// text per line, dialogs included.
func (h *harness) screen() string {
	return windowText(h.ui.Window())
}

// page returns the text the Servers view shows, without the sidebar.
func (h *harness) page() string {
	return objectText(h.ui.view.content)
}

// objectText returns the text visible in o, one drawn line per line.
func objectText(o fyne.CanvasObject) string {
	var lines []string
	walkVisible(o, func(o fyne.CanvasObject) {
		if t, ok := o.(*canvas.Text); ok && t.Text != "" {
			lines = append(lines, t.Text)
		}
	})
	return strings.Join(lines, "\n")
}

// windowText returns the text visible in w, one drawn line of text per
// line, dialogs and pop-ups included.
func windowText(w fyne.Window) string {
	c := w.Canvas()
	var lines []string
	walkVisible(c.Content(), func(o fyne.CanvasObject) {
		if t, ok := o.(*canvas.Text); ok && t.Text != "" {
			lines = append(lines, t.Text)
		}
	})
	for _, o := range c.Overlays().List() {
		walkVisible(o, func(o fyne.CanvasObject) {
			if t, ok := o.(*canvas.Text); ok && t.Text != "" {
				lines = append(lines, t.Text)
			}
		})
	}
	return strings.Join(lines, "\n")
}

// walkVisible calls f for o and everything drawn inside it, skipping what
// is hidden.
func walkVisible(o fyne.CanvasObject, f func(fyne.CanvasObject)) {
	if o == nil || !o.Visible() {
		return
	}
	f(o)
	switch o := o.(type) {
	case fyne.Widget:
		for _, c := range test.WidgetRenderer(o).Objects() {
			walkVisible(c, f)
		}
	case *fyne.Container:
		for _, c := range o.Objects {
			walkVisible(c, f)
		}
	}
}

// rows returns the server names the list shows, top to bottom, and the
// whole command line each row holds (it may be drawn cut short).
func (h *harness) rows() (names, commands []string) {
	type row struct {
		y             float32
		name, command string
	}
	var rows []row
	walkVisible(h.ui.Window().Canvas().Content(), func(o fyne.CanvasObject) {
		if r, ok := o.(*serverRow); ok {
			pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(r)
			rows = append(rows, row{pos.Y, r.name.String(), r.command.full})
		}
	})
	slices.SortFunc(rows, func(a, b row) int { return int(a.y - b.y) })
	for _, r := range rows {
		names = append(names, r.name)
		commands = append(commands, r.command)
	}
	return names, commands
}

func findButton(root fyne.CanvasObject, label string) *widget.Button {
	var found *widget.Button
	walkVisible(root, func(o fyne.CanvasObject) {
		if b, ok := o.(*widget.Button); ok && b.Text == label && found == nil {
			found = b
		}
	})
	return found
}

// assertShows checks that the window's text has each of want, whitespace
// aside: a label may wrap a line between any two words.
func assertShows(t *testing.T, screen string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(oneLine(screen), oneLine(w)) {
			t.Errorf("window does not show %q; it shows:\n%s", w, screen)
		}
	}
}

// oneLine turns every run of whitespace in s into one space.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func assertHides(t *testing.T, screen string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(oneLine(screen), oneLine(w)) {
			t.Errorf("window shows %q; it should not. It shows:\n%s", w, screen)
		}
	}
}

func TestMainWindow(t *testing.T) {
	spaced := store.Server{Name: "shell", Command: "sh", Args: []string{"-c", "echo 'hi there'"}}
	tests := []struct {
		name     string
		servers  []store.Server
		want     []string // shown
		order    []string // shown in this order, top to bottom
		commands []string // the rows' command lines, top to bottom
		hidden   []string
	}{
		{
			name:   "no servers",
			want:   []string{"No servers yet", AddServerCommand, "Add a server"},
			hidden: []string{"0 servers"},
		},
		{
			name:    "one server",
			servers: []store.Server{everything},
			want: []string{
				"MCP servers", "1 server",
				"everything", "stdio", "npx -y @modelcontextprotocol/server-everything", addedOn(time.Now()),
				"Test connection", "gatehouse proxy everything",
			},
			hidden: []string{"No servers yet", AddServerCommand},
		},
		{
			name:    "servers in name order",
			servers: []store.Server{memory, everything, filesystem},
			want: []string{
				"3 servers",
				"npx -y @modelcontextprotocol/server-everything", // the first, selected, in full on the right
			},
			commands: []string{
				"npx -y @modelcontextprotocol/server-everything",
				"npx -y @modelcontextprotocol/server-filesystem /home/me/projects",
				"npx -y @modelcontextprotocol/server-memory",
			},
			order:  []string{"everything", "filesystem", "memory"},
			hidden: []string{"No servers yet"},
		},
		{
			name:     "arguments quoted as in a shell",
			servers:  []store.Server{spaced},
			want:     []string{"shell", `sh -c 'echo '\''hi there'\'''`},
			commands: []string{`sh -c 'echo '\''hi there'\'''`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, tt.servers...)
			if got := h.ui.Window().Title(); got != Title {
				t.Errorf("window title = %q, want %q", got, Title)
			}
			page := h.page()
			assertShows(t, page, tt.want...)
			assertHides(t, page, tt.hidden...)
			names, commands := h.rows()
			if len(tt.servers) == 0 && len(names) > 0 {
				t.Errorf("rows = %q, want none", names)
			}
			if len(tt.order) > 0 && !slices.Equal(names, tt.order) {
				t.Errorf("rows top to bottom = %q, want %q", names, tt.order)
			}
			if len(tt.commands) > 0 && !slices.Equal(commands, tt.commands) {
				t.Errorf("rows' commands = %q, want %q", commands, tt.commands)
			}
			assertShows(t, h.screen(), "Gatehouse 1.2.3", "Servers", "Policy", "History", "Export", "Settings")
			if got, want := h.ui.shell.homeText.full, tildePath(h.st.Dir(), userHome()); got != want {
				t.Errorf("sidebar's home folder = %q, want %q", got, want)
			}
		})
	}
}

func TestRefresh(t *testing.T) {
	tests := []struct {
		name   string
		before []store.Server
		change func(context.Context, *store.Store) error
		want   []string
		hidden []string
	}{
		{
			name: "shows a server added after the window opened",
			change: func(ctx context.Context, st *store.Store) error {
				return st.AddServer(ctx, memory)
			},
			want:   []string{"memory", "npx -y @modelcontextprotocol/server-memory", "1 server"},
			hidden: []string{"No servers yet"},
		},
		{
			name:   "adds to a list already shown",
			before: []store.Server{everything},
			change: func(ctx context.Context, st *store.Store) error {
				return st.AddServer(ctx, filesystem)
			},
			want: []string{"everything", "filesystem", "2 servers"},
		},
		{
			name:   "shows the empty state once the last server is removed",
			before: []store.Server{everything},
			change: func(ctx context.Context, st *store.Store) error {
				return st.RemoveServer(ctx, everything.Name)
			},
			want:   []string{"No servers yet", AddServerCommand},
			hidden: []string{"everything", "1 server"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, tt.before...)
			if err := tt.change(context.Background(), h.st); err != nil {
				t.Fatalf("change store: %v", err)
			}
			h.tapRefresh()
			page := h.page()
			assertShows(t, page, tt.want...)
			assertHides(t, page, tt.hidden...)
		})
	}
}

func TestStoreErrorShownInWindow(t *testing.T) {
	h := newHarness(t, nil, everything)
	h.st.Close() // every read now fails
	h.tapRefresh()
	screen := h.screen()
	assertShows(t, screen, "Could not read the server list", "List servers: sql: database is closed.", "Retry", "everything")

	// The banner pushes the list down instead of covering it.
	d := fyne.CurrentApp().Driver()
	banner, list := h.ui.view.banner.content, h.ui.view.listBox
	if bottom, top := d.AbsolutePositionForObject(banner).Y+banner.Size().Height, d.AbsolutePositionForObject(list).Y; bottom > top {
		t.Errorf("error banner ends at y=%v, below the top of the list at y=%v: it covers the list", bottom, top)
	}

	// The window still works: the next refresh tries again.
	h.tapRefresh()
	assertShows(t, h.screen(), "Could not read the server list")
}

func TestEmptyStateCopiesCommand(t *testing.T) {
	h := newHarness(t, nil)
	assertHides(t, h.screen(), "Copied")
	test.Tap(h.ui.view.copy)
	if got := h.app.Clipboard().Content(); got != AddServerCommand {
		t.Errorf("clipboard = %q, want %q", got, AddServerCommand)
	}
	assertShows(t, h.screen(), "Copied")
}

func TestServerDetails(t *testing.T) {
	withEnv := store.Server{
		Name:    "github",
		Command: "github-mcp-server",
		Args:    []string{"stdio"},
		Env:     map[string]string{"GITHUB_TOKEN": "ghp_secretvalue", "GITHUB_HOST": "github.com"},
		Cwd:     "/srv/mcp",
	}
	h := newHarness(t, nil, everything, withEnv)
	assertHides(t, h.screen(), "gatehouse proxy github")

	h.ui.view.list.Select(1) // the second row, by name order: github
	screen := h.screen()
	assertShows(t, screen, "github-mcp-server stdio", "/srv/mcp", "GITHUB_HOST", "GITHUB_TOKEN", "Environment values are not shown.", "gatehouse proxy github")
	assertHides(t, screen, "ghp_secretvalue")
}

// trayApp is a test app whose driver has a system tray.
type trayApp struct {
	fyne.App
	menu  *fyne.Menu
	icon  fyne.Resource
	win   fyne.Window
	quit  chan struct{}        // receives each Quit
	notes []*fyne.Notification // sent, in order
}

var _ desktop.App = (*trayApp)(nil)

func (a *trayApp) SetSystemTrayMenu(m *fyne.Menu)    { a.menu = m }
func (a *trayApp) SetSystemTrayIcon(r fyne.Resource) { a.icon = r }
func (a *trayApp) SetSystemTrayWindow(w fyne.Window) { a.win = w }
func (a *trayApp) Quit()                             { a.quit <- struct{}{} }
func (a *trayApp) SendNotification(n *fyne.Notification) {
	a.notes = append(a.notes, n)
}

func TestTray(t *testing.T) {
	a := &trayApp{App: test.NewTempApp(t), quit: make(chan struct{}, 2)}
	h := newHarness(t, a, everything)
	h.ui.trayHost = func() bool { return true }
	if !h.ui.HasTray() {
		t.Fatal("HasTray() = false with a tray-capable driver, want true")
	}
	if a.menu == nil {
		t.Fatal("no tray menu set")
	}
	var labels []string
	quits := 0
	for _, it := range a.menu.Items {
		if it.IsSeparator {
			labels = append(labels, "---")
			continue
		}
		labels = append(labels, it.Label)
		if it.IsQuit {
			quits++
		}
	}
	// everything is registered, but no agent's config runs it through
	// Gatehouse: it is not protected.
	if want := []string{"Not protecting: no agent runs your servers through Gatehouse", "Protect my agents…", "0 calls today", "---", "Pause all tool calls", "---",
		"Open Gatehouse", "Open history", "Open settings", "---", "Quit"}; !slices.Equal(labels, want) {
		t.Errorf("tray menu = %q, want %q", labels, want)
	}
	if !a.menu.Items[0].Disabled || !a.menu.Items[2].Disabled {
		t.Error("the status lines of the tray menu can be clicked")
	}
	if quits != 1 || !a.menu.Items[len(a.menu.Items)-1].IsQuit {
		t.Errorf("tray menu has %d items marked IsQuit, want only the last (or Fyne adds another Quit)", quits)
	}
	if a.win != h.ui.Window() {
		t.Error("a click on the tray icon does not open the main window")
	}
	if a.icon == nil {
		t.Fatal("no tray icon set")
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(a.icon.Content())); err != nil || cfg.Width < 32 {
		t.Errorf("tray icon is not a PNG of at least 32 px (tray hosts want a bitmap): %v, %+v", err, cfg)
	}

	// Open Gatehouse reads the store again.
	if err := h.st.AddServer(context.Background(), memory); err != nil {
		t.Fatal(err)
	}
	menuItem(t, a.menu, "Open Gatehouse").Action()
	h.waitRefresh()
	assertShows(t, h.screen(), "memory")

	// Open history and Open settings show those views.
	menuItem(t, a.menu, "Open history").Action()
	if h.ui.shell.current.id != pageHistory {
		t.Errorf("Open history shows the %s view", h.ui.shell.current.id)
	}
	menuItem(t, a.menu, "Open settings").Action()
	if h.ui.shell.current.id != pageSettings {
		t.Errorf("Open settings shows the %s view", h.ui.shell.current.id)
	}

	// Quit stops the app once (after hiding the window, which the test
	// driver does not record).
	menuItem(t, a.menu, "Quit").Action()
	select {
	case <-a.quit:
	case <-time.After(10 * time.Second):
		t.Fatal("Quit in the tray menu did not stop the app within 10s")
	}
	select {
	case <-a.quit:
		t.Error("Quit in the tray menu stopped the app twice")
	case <-time.After(2 * quitDrain):
	}
}

// menuItem returns the item of m labelled label.
func menuItem(t *testing.T, m *fyne.Menu, label string) *fyne.MenuItem {
	t.Helper()
	for _, it := range m.Items {
		if it.Label == label {
			return it
		}
	}
	t.Fatalf("no %q in the menu %q", label, menuLabels(m))
	return nil
}

func TestNoTray(t *testing.T) {
	h := newHarness(t, nil)
	if h.ui.HasTray() {
		t.Error("HasTray() = true with the test driver, which has no tray")
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		args    []string
		want    string
	}{
		{"no arguments", "mcp-server", nil, "mcp-server"},
		{"plain arguments", "npx", []string{"-y", "@scope/pkg@1.2.3"}, "npx -y @scope/pkg@1.2.3"},
		{"path and equals", "/usr/bin/node", []string{"--port=8080", "./dist/index.js"}, "/usr/bin/node --port=8080 ./dist/index.js"},
		{"space", "python", []string{"my server.py"}, "python 'my server.py'"},
		{"empty argument", "run", []string{""}, "run ''"},
		{"single quote", "echo", []string{"it's"}, `echo 'it'\''s'`},
		{"shell characters", "sh", []string{"-c", "a && b $HOME"}, "sh -c 'a && b $HOME'"},
		{"non-ASCII", "echo", []string{"café"}, "echo 'café'"},
		{"command with space", "/Applications/My App/server", nil, "'/Applications/My App/server'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := commandLine(tt.command, tt.args); got != tt.want {
				t.Errorf("commandLine(%q, %q) = %q, want %q", tt.command, tt.args, got, tt.want)
			}
		})
	}
}

// TestNoOpenGL keeps the package free of fyne.io/fyne/v2/app, which brings
// in the OpenGL driver and cgo: the app is injected.
func TestNoOpenGL(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("find the go command: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "fyne.io/fyne/v2/app",
			strings.HasPrefix(dep, "github.com/go-gl/"),
			strings.HasPrefix(dep, "fyne.io/fyne/v2/internal/driver/glfw"):
			t.Errorf("package app depends on %s; take the fyne.App as an argument instead", dep)
		}
	}
}

func TestTildePath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, home, want string
	}{
		{"inside home", "/home/me/.config/gatehouse", "/home/me", "~/.config/gatehouse"},
		{"home itself", "/home/me", "/home/me", "~"},
		{"outside home", "/srv/gatehouse", "/home/me", "/srv/gatehouse"},
		{"sibling with a common prefix", "/home/mel/gatehouse", "/home/me", "/home/mel/gatehouse"},
		{"unknown home", "/home/me/gatehouse", "", "/home/me/gatehouse"},
		{"root as home", "/gatehouse", "/", "/gatehouse"},
		{"dot-dot folder name", "/home/me/..gatehouse", "/home/me", "~/..gatehouse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tildePath(tt.path, tt.home); got != tt.want {
				t.Errorf("tildePath(%q, %q) = %q, want %q", tt.path, tt.home, got, tt.want)
			}
		})
	}
}

func TestElideCommand(t *testing.T) {
	args := []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/projects"}
	full := commandLine("npx", args)
	tests := []struct {
		n    int
		want string
	}{
		{n: 100, want: full},
		{n: 41, want: "npx … server-filesystem /home/me/projects"},
		{n: 30, want: "npx … server-filesystem /h…cts"},
		{n: 22, want: "… server-filesystem"},
		{n: 10, want: "serv…ystem"},
	}
	for _, tt := range tests {
		if got := elideCommand("npx", args)(full, tt.n); got != tt.want {
			t.Errorf("elideCommand(%q, %d) = %q, want %q", full, tt.n, got, tt.want)
		}
	}
	if got, want := elideCommand("npx", []string{"-y", "@acme/github"})("npx -y @acme/github", 15), "npx … github"; got != want {
		t.Errorf("elideCommand of a package alone = %q, want %q", got, want)
	}
}

// TestGlossaryInDocs: every term the app explains has its section in
// docs/glossary.md.
func TestGlossaryInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/glossary.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, term := range glossary {
		if !strings.Contains(string(doc), "\n## "+term.word+"\n") {
			t.Errorf("docs/glossary.md has no section %q", term.word)
		}
	}
}
