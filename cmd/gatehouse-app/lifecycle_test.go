package main

import (
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitGone waits until no visible window's name matches pattern.
func (r *running) waitGone(pattern string) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := r.xdo("search", "--onlyvisible", "--name", pattern)
		if err != nil || out == "" {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("a window matching %s is still shown after 20s", pattern)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snap returns what the window id shows now.
func (r *running) snap(id string) image.Image {
	r.t.Helper()
	importCmd := need(r.t, "import", "imagemagick")
	tmp := filepath.Join(r.t.TempDir(), "snap.png")
	c := exec.Command(importCmd, "-window", id, tmp)
	c.Env = []string{"DISPLAY=" + r.display, "PATH=" + os.Getenv("PATH")}
	if out, err := c.CombinedOutput(); err != nil {
		r.t.Fatalf("import -window %s: %v\n%s", id, err, out)
	}
	img, err := decodePNGFile(tmp)
	if err != nil {
		r.t.Fatal(err)
	}
	return img
}

// settled returns what the window id shows once two looks in a row agree.
func (r *running) settled(id string) image.Image {
	r.t.Helper()
	last := r.snap(id)
	deadline := time.Now().Add(30 * time.Second)
	for {
		img := r.snap(id)
		if samePixels(last, img) && !uniform(img) {
			return img
		}
		if time.Now().After(deadline) {
			r.t.Fatal("the window did not settle within 30s")
		}
		last = img
	}
}

// redrawn waits until the window id shows something other than before,
// and has settled.
func (r *running) redrawn(id string, before image.Image) image.Image {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for samePixels(before, r.snap(id)) {
		if time.Now().After(deadline) {
			r.t.Fatal("the window did not change within 20s")
		}
	}
	return r.settled(id)
}

// key focuses the window id and types keys into it, as a person at the
// keyboard does.
func (r *running) key(id string, keys ...string) {
	r.t.Helper()
	if _, err := r.xdo("windowfocus", "--sync", id); err != nil {
		r.t.Fatalf("xdotool windowfocus: %v", err)
	}
	if _, err := r.xdo(append([]string{"key", "--clearmodifiers"}, keys...)...); err != nil {
		r.t.Fatalf("xdotool key %v: %v", keys, err)
	}
}

// TestSecondLaunchUnderXvfb: on a desktop without a tray host (Xvfb has
// none), closing the window asks; Return keeps Gatehouse running without
// a window. Starting Gatehouse again for the same home folder then brings
// that window back and ends at once, saying so, instead of starting a
// second approver that blames the first.
func TestSecondLaunchUnderXvfb(t *testing.T) {
	dbusDaemon := need(t, "dbus-daemon", "dbus")
	var importCmd string
	if *screenshots != "" {
		importCmd = need(t, "import", "imagemagick")
	}
	bus := startDBus(t, dbusDaemon)
	userHome, err := os.MkdirTemp("", "gha")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(userHome) })
	home := filepath.Join(userHome, ".config", "gatehouse")
	r := startApp(t, userHome, home, bus, "^Gatehouse$")
	before := r.settled(r.id)

	// Close the window (Ctrl+W, as its close button does): it asks.
	r.key(r.id, "ctrl+w")
	r.redrawn(r.id, before)
	if *screenshots != "" {
		capture(t, importCmd, r.display, r.id, filepath.Join(*screenshots, "close-without-tray.png"))
	}
	if out, _ := r.xdo("search", "--onlyvisible", "--name", "^Gatehouse$"); out == "" {
		t.Fatal("Ctrl+W hid the window without asking, on a desktop with no tray to bring it back from")
	}
	// Return keeps it running, without a window.
	r.key(r.id, "Return")
	r.waitGone("^Gatehouse$")
	select {
	case err := <-r.exited:
		r.waited = true
		t.Fatalf("Keep running ended the app: %v\nstderr:\n%s", err, r.stderr)
	default:
	}

	// The second start.
	env := append(baseEnv(t, userHome, home), "DISPLAY="+r.display, "DBUS_SESSION_BUS_ADDRESS="+bus, "LIBGL_ALWAYS_SOFTWARE=1")
	start := time.Now()
	second := runApp(t, env)
	if second.code != 0 {
		t.Errorf("second start: exit code %d, want 0\nstderr:\n%s", second.code, second.stderr)
	}
	want := "Gatehouse app already runs for this home folder (pid " + strconv.Itoa(r.cmd.Process.Pid) + "): its window is brought forward"
	if !strings.Contains(second.stderr, want) {
		t.Errorf("second start's stderr = %q, want it to say %q", second.stderr, want)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the second start took %v to end", d)
	}
	id := waitWindow(t, r.xdo, "^Gatehouse$", r.exited, &r.waited, r.stderr)
	if id != r.id {
		t.Errorf("the window that came back is %s, want the first app's %s", id, r.id)
	}
	if out, _ := r.xdo("search", "--name", "^Gatehouse$"); len(strings.Fields(out)) != 1 {
		t.Errorf("windows named Gatehouse: %q, want the first app's alone", out)
	}
	r.stop()
	if s := r.stderr.String(); strings.Contains(s, "another approver is running") {
		t.Errorf("the first app met another approver:\n%s", s)
	}
}
