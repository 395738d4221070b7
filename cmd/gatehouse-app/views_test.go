package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/app"
	"github.com/gatehouse-dev/gatehouse/internal/mcptest"
	"github.com/gatehouse-dev/gatehouse/internal/seed"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// The test binary doubles as a small MCP server over stdio, for the
// governed call of TestApprovalThroughProxyUnderXvfb: delete_notes answers
// "deleted".
const roleEnv = "GATEHOUSE_APP_MAIN_TEST_ROLE"

func init() {
	if os.Getenv(roleEnv) == "server" {
		serveMCP()
		os.Exit(0)
	}
}

func serveMCP() {
	mcptest.Serve(os.Stdin, os.Stdout, map[string]string{
		"initialize": `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"notes","version":"1.0"}}`,
		"tools/list": `{"tools":[{"name":"delete_notes","description":"Delete every note in a folder.","inputSchema":{"type":"object","properties":{"folder":{"type":"string"}}}}]}`,
		"tools/call": `{"content":[{"type":"text","text":"deleted"}]}`,
	})
}

var (
	proxyOnce sync.Once
	proxyPath string
	proxyErr  error
)

// proxyBinary builds the gatehouse CLI beside gatehouse-app, where the
// app looks for the proxy that client configs name.
func proxyBinary(t *testing.T) string {
	t.Helper()
	app := appBinary(t)
	proxyOnce.Do(func() {
		proxyPath = filepath.Join(filepath.Dir(app), "gatehouse")
		cmd := exec.Command("go", "build", "-o", proxyPath, "../gatehouse")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			proxyErr = fmt.Errorf("go build gatehouse: %v\n%s", err, out)
		}
	})
	if proxyErr != nil {
		t.Fatal(proxyErr)
	}
	return proxyPath
}

// needKeychain fails the test unless it runs in a keychain session: the
// app signs and reads the evidence log with the keychain's key.
func needKeychain(t *testing.T) string {
	t.Helper()
	bus := os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	if os.Getenv("GATEHOUSE_TEST_KEYRING") != "1" || bus == "" {
		t.Fatal("this test needs the OS keychain: run it inside .ci/keyring-session.sh (make test does)")
	}
	return bus
}

// seededHome makes a user's home folder with a Gatehouse home in it,
// seeded with servers, rules, tools and calls (spread over spread, in real
// time), and the config files of three MCP clients.
func seededHome(t *testing.T, calls int, spread time.Duration) (userHome, home string) {
	t.Helper()
	userHome, err := os.MkdirTemp("", "gha")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(userHome) })
	home = filepath.Join(userHome, ".config", "gatehouse")
	ctx := context.Background()
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := vault.New(&vault.Options{Service: st.KeychainService()})
	t.Cleanup(func() { v.Purge() })
	key, err := v.SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := receipts.Open(ctx, st, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := seed.Home(ctx, st, l, &seed.Options{Calls: calls, Over: spread, Secrets: v, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	writeClientConfigs(t, userHome)
	return userHome, home
}

// writeClientConfigs writes the config files of three MCP clients, with
// servers (and secrets) of their own, into the user's home userHome.
func writeClientConfigs(t *testing.T, userHome string) {
	t.Helper()
	files := map[string]string{
		".claude.json": `{
  "numStartups": 41,
  "mcpServers": {
    "linear": {"type": "stdio", "command": "npx", "args": ["-y", "@acme/linear-mcp"], "env": {"LINEAR_API_KEY": "lin_api_0123456789abcdef0123456789"}},
    "sentry": {"type": "http", "url": "https://mcp.sentry.example.com/mcp", "headers": {"Authorization": "Bearer sntrys_0123456789abcdef"}}
  }
}
`,
		"config/Claude/claude_desktop_config.json": `{
  "mcpServers": {
    "puppeteer": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-puppeteer"]},
    "brave-search": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-brave-search"], "env": {"BRAVE_API_KEY": "BSA0123456789abcdef0123456789"}}
  }
}
`,
		".cursor/mcp.json": `{
  "mcpServers": {
    "docs": {"command": "npx", "args": ["-y", "@acme/docs-mcp", "--root", "/home/me/projects"]}
  }
}
`,
	}
	for name, body := range files {
		p := filepath.Join(userHome, name)
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// A running app under Xvfb.
type running struct {
	t       *testing.T
	display string
	id      string // its main window
	cmd     *exec.Cmd
	exited  chan error
	waited  bool
	stderr  *bytes.Buffer
	xdotool string
}

func (r *running) xdo(args ...string) (string, error) {
	c := exec.Command(r.xdotool, args...)
	c.Env = []string{"DISPLAY=" + r.display}
	out, err := c.Output()
	return strings.TrimSpace(string(out)), err
}

// click clicks at (x, y) of the window id.
func (r *running) click(id string, x, y int) {
	r.t.Helper()
	if _, err := r.xdo("mousemove", "--window", id, strconv.Itoa(x), strconv.Itoa(y), "click", "1"); err != nil {
		r.t.Fatalf("xdotool click: %v", err)
	}
}

// stop ends the app as a logout does, and checks it ended cleanly.
func (r *running) stop() {
	r.t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		r.t.Fatal(err)
	}
	select {
	case err := <-r.exited:
		r.waited = true
		if err != nil {
			r.t.Errorf("gatehouse-app after SIGTERM: %v\nstderr:\n%s", err, r.stderr.String())
		}
	case <-time.After(20 * time.Second):
		r.t.Fatalf("gatehouse-app still running 20s after SIGTERM")
	}
}

// startApp starts gatehouse-app with args on a new virtual display, with
// the keychain's bus, and waits for its window titled title.
func startApp(t *testing.T, userHome, home, bus, title string, args ...string) *running {
	t.Helper()
	xvfb := need(t, "Xvfb", "xvfb")
	r := &running{t: t, xdotool: need(t, "xdotool", "xdotool"), exited: make(chan error, 1), stderr: new(bytes.Buffer)}
	r.display = startXvfb(t, xvfb)
	r.cmd = exec.Command(appBinary(t), args...)
	r.cmd.Env = append(baseEnv(t, userHome, home), "DISPLAY="+r.display, "DBUS_SESSION_BUS_ADDRESS="+bus, "LIBGL_ALWAYS_SOFTWARE=1",
		"XDG_RUNTIME_DIR="+os.Getenv("XDG_RUNTIME_DIR"))
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("start gatehouse-app: %v", err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if !r.waited {
			r.cmd.Process.Kill()
			<-r.exited
		}
	})
	r.id = waitWindow(t, r.xdo, title, r.exited, &r.waited, r.stderr)
	return r
}

// TestViewsUnderXvfb starts the real app on each view, over a home with a
// few hundred calls, and acts where a person would: it opens an entry of
// the history, and exports a bundle (which must appear on disk). With
// -screenshots DIR it saves each view.
func TestViewsUnderXvfb(t *testing.T) {
	bus := needKeychain(t)
	proxyBinary(t)
	var importCmd string
	calls, spread := 120, time.Duration(0)
	if *screenshots != "" {
		importCmd = need(t, "import", "imagemagick")
		calls, spread = 300, 150*time.Second // a chart with a shape
	}
	userHome, home := seededHome(t, calls, spread)
	exportDir := filepath.Join(userHome, "Documents")
	os.MkdirAll(exportDir, 0o700)
	// The app serves over HTTP on a port of its own.
	if st, err := store.Open(context.Background(), home, nil); err != nil {
		t.Fatal(err)
	} else {
		ctx := context.Background()
		err := errors.Join(st.SetServeEnabled(ctx, true), st.SetServeListen(ctx, "127.0.0.1:0"))
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		view, shot string
		act        func(t *testing.T, r *running)
	}{
		{view: "servers", shot: "servers.png", act: func(t *testing.T, r *running) {
			r.click(r.id, 390, 250) // github, the second server
		}},
		{view: "agents", shot: "protect-my-agents.png"},
		{view: "agents", shot: "protect-my-agents-plan.png", act: func(t *testing.T, r *running) {
			r.click(r.id, 1047, 74) // Protect all: the plan comes first
		}},
		{view: "policy", shot: "policy.png"},
		{view: "history", shot: "history.png", act: func(t *testing.T, r *running) {
			r.click(r.id, 420, 470) // the second call in the list
		}},
		{view: "export", shot: "export.png", act: func(t *testing.T, r *running) {
			r.click(r.id, 1040, 690) // Export and verify, at the foot of the view
			deadline := time.Now().Add(60 * time.Second)
			for {
				files, _ := os.ReadDir(exportDir)
				if len(files) == 1 && strings.HasPrefix(files[0].Name(), "gatehouse-evidence-") {
					if _, err := os.Stat(filepath.Join(exportDir, files[0].Name(), "report.html")); err == nil {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no bundle in %s 60s after a click on Export and verify (it holds %v)\nstderr:\n%s", exportDir, files, r.stderr)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}},
		{view: "settings", shot: "settings.png"},
		{view: "settings", shot: "settings-serve.png", act: func(t *testing.T, r *running) {
			// Scroll down to Serve over HTTP and Evidence out.
			if _, err := r.xdo("mousemove", "--window", r.id, "700", "450", "click", "--repeat", "40", "5"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.view, func(t *testing.T) {
			r := startApp(t, userHome, home, bus, "^Gatehouse$", "--open", tt.view)
			geom, err := r.xdo("getwindowgeometry", "--shell", r.id)
			if err != nil {
				t.Fatal(err)
			}
			if w, h := shellVar(geom, "WIDTH"), shellVar(geom, "HEIGHT"); w < 1100 || h < 700 {
				t.Errorf("window is %dx%d, want 1120x720", w, h)
			}
			time.Sleep(3 * time.Second) // the view's reads land (the first opens the log, with the keychain)
			if tt.act != nil {
				tt.act(t, r)
				time.Sleep(3 * time.Second) // what the act reads lands
			}
			if *screenshots != "" {
				capture(t, importCmd, r.display, r.id, filepath.Join(*screenshots, tt.shot))
			}
			r.stop()
			if s := r.stderr.String(); strings.Contains(s, "level=ERROR") {
				t.Errorf("the app logged errors:\n%s", s)
			}
		})
	}
}

// TestApprovalThroughProxyUnderXvfb makes a governed tool call the way an
// MCP client does, through the real gatehouse proxy, to a real server: the
// policy holds it for approval, the app's window comes up, a click answers,
// and the client gets the server's result (Allow once) or Gatehouse's
// refusal (Deny).
func TestApprovalThroughProxyUnderXvfb(t *testing.T) {
	bus := needKeychain(t)
	gatehouse := proxyBinary(t)
	var importCmd string
	if *screenshots != "" {
		importCmd = need(t, "import", "imagemagick")
	}
	for _, tt := range []struct {
		button string
		dx, dy int // from the window's bottom right corner
		want   string
		denied bool
	}{
		{button: "Allow once", dx: 60, dy: 30, want: "deleted"},
		{button: "Deny", dx: 138, dy: 30, want: "Gatehouse", denied: true},
	} {
		t.Run(tt.button, func(t *testing.T) {
			userHome, err := os.MkdirTemp("", "gha")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(userHome) })
			home := filepath.Join(userHome, ".config", "gatehouse")
			st, err := store.Open(context.Background(), home, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.AddServer(context.Background(), store.Server{Name: "notes", Transport: store.TransportStdio,
				Command: os.Args[0], Env: map[string]string{roleEnv: "server"}}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { vault.New(&vault.Options{Service: st.KeychainService()}).Purge() })
			st.Close()

			r := startApp(t, userHome, home, bus, "^Gatehouse$")

			// The client: the proxy on a pipe, as an MCP client starts it.
			proxy := exec.Command(gatehouse, "--home", home, "proxy", "notes")
			proxy.Env = append(baseEnv(t, userHome, home), "DBUS_SESSION_BUS_ADDRESS="+bus, "XDG_RUNTIME_DIR="+os.Getenv("XDG_RUNTIME_DIR"))
			stdin, _ := proxy.StdinPipe()
			stdout, _ := proxy.StdoutPipe()
			var perr bytes.Buffer
			proxy.Stderr = &perr
			if err := proxy.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); proxy.Wait() }()
			out := bufio.NewReader(stdout)
			rpc := func(id int, method, params string) {
				fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
			}
			read := func() string {
				line, err := readLineFrom(out, 60*time.Second)
				if err != nil {
					t.Fatalf("read from the proxy: %v\nstderr:\n%s", err, perr.String())
				}
				return line
			}
			rpc(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1"}}`)
			read()
			fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			rpc(2, "tools/list", `{}`)
			read()
			rpc(3, "tools/call", `{"name":"delete_notes","arguments":{"folder":"/home/me/notes"}}`)

			_, title, _ := strings.Cut(app.ApprovalTitle, " — ")
			id := waitWindow(t, r.xdo, title+"$", r.exited, &r.waited, r.stderr)
			time.Sleep(time.Second) // the answers take clicks once the window has been up a moment
			if *screenshots != "" && !tt.denied {
				capture(t, importCmd, r.display, id, filepath.Join(*screenshots, "approval-through-proxy.png"))
			}
			geom, _ := r.xdo("getwindowgeometry", "--shell", id)
			w, h := shellVar(geom, "WIDTH"), shellVar(geom, "HEIGHT")
			r.click(id, w-tt.dx, h-tt.dy)

			var res struct {
				ID     int `json:"id"`
				Result struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
					IsError bool `json:"isError"`
				} `json:"result"`
			}
			for res.ID != 3 {
				line := read()
				if err := json.Unmarshal([]byte(line), &res); err != nil {
					t.Fatalf("proxy sent %q: %v", line, err)
				}
			}
			text := ""
			for _, c := range res.Result.Content {
				text += c.Text
			}
			if res.Result.IsError != tt.denied || !strings.Contains(text, tt.want) {
				t.Errorf("the call's result = %q (isError %v), want %q (isError %v)", text, res.Result.IsError, tt.want, tt.denied)
			}
			r.stop()
		})
	}
}

// readLineFrom reads a line from r, or fails after timeout.
func readLineFrom(r *bufio.Reader, timeout time.Duration) (string, error) {
	ch := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		line, err := r.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			errc <- err
			return
		}
		ch <- strings.TrimSpace(line)
	}()
	select {
	case l := <-ch:
		return l, nil
	case err := <-errc:
		return "", err
	case <-time.After(timeout):
		return "", fmt.Errorf("nothing after %v", timeout)
	}
}
