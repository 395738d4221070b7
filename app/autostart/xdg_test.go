//go:build linux || freebsd || openbsd || netbsd || dragonfly

package autostart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// configHome points the XDG config folder at a new temporary folder.
func configHome(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	return dir
}

func TestEnableDisable(t *testing.T) {
	cfg := configHome(t)
	e := Entry{ID: "dev.gatehouse.app", Name: "Gatehouse", Comment: "MCP gate", Icon: "dev.gatehouse.app",
		Exec: "/opt/Gate House/bin/gatehouse-app", Args: []string{"--hidden", "--home", `/home/me/100% "mine"`}}
	path := filepath.Join(cfg, "autostart", "dev.gatehouse.app.desktop")
	if p, err := e.Path(); err != nil || p != path {
		t.Fatalf("Path() = %q, %v; want %q", p, err, path)
	}
	if on, err := e.Enabled(); err != nil || on {
		t.Fatalf("Enabled() before Enable = %v, %v; want false", on, err)
	}
	if err := e.Enable(); err != nil {
		t.Fatal(err)
	}
	if on, err := e.Enabled(); err != nil || !on {
		t.Fatalf("Enabled() after Enable = %v, %v; want true", on, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `[Desktop Entry]
Type=Application
Name=Gatehouse
Comment=MCP gate
Exec="/opt/Gate House/bin/gatehouse-app" --hidden --home "/home/me/100%% \\"mine\\""
Icon=dev.gatehouse.app
Terminal=false
X-GNOME-Autostart-enabled=true
`
	if string(data) != want {
		t.Errorf("the entry reads:\n%s\nwant:\n%s", data, want)
	}
	// Enabling again replaces the entry, and leaves nothing beside it.
	e.Args = nil
	if err := e.Enable(); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(filepath.Dir(path))
	if len(files) != 1 {
		t.Errorf("the autostart folder holds %d files, want the one entry", len(files))
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), "Exec=\"/opt/Gate House/bin/gatehouse-app\"\n") {
		t.Errorf("after a second Enable the entry reads:\n%s", data)
	}

	if err := e.Disable(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the entry is still there after Disable (stat: %v)", err)
	}
	if on, err := e.Enabled(); err != nil || on {
		t.Errorf("Enabled() after Disable = %v, %v; want false", on, err)
	}
	if err := e.Disable(); err != nil {
		t.Errorf("Disable() of a disabled entry = %v, want nil", err)
	}
}

// A desktop's settings turn an entry off without deleting it.
func TestEnabledHonoursSessionSettings(t *testing.T) {
	cfg := configHome(t)
	e := Entry{ID: "dev.gatehouse.app", Name: "Gatehouse", Exec: "/usr/bin/gatehouse-app"}
	tests := []struct {
		name, extra string
		on          bool
	}{
		{"as written", "", true},
		{"hidden", "Hidden=true\n", false},
		{"gnome switch off", "X-GNOME-Autostart-enabled=false\n", false},
		{"hidden in another group", "[Desktop Action x]\nHidden=true\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(cfg, "autostart", e.ID+".desktop")
			os.MkdirAll(filepath.Dir(path), 0o755)
			body := "[Desktop Entry]\nType=Application\nExec=/usr/bin/gatehouse-app\n" + tt.extra
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			if on, err := e.Enabled(); err != nil || on != tt.on {
				t.Errorf("Enabled() = %v, %v; want %v", on, err, tt.on)
			}
		})
	}
}

func TestInvalidEntries(t *testing.T) {
	configHome(t)
	tests := []struct {
		name string
		e    Entry
	}{
		{"no id", Entry{Exec: "/usr/bin/x"}},
		{"id with a slash", Entry{ID: "../evil", Exec: "/usr/bin/x"}},
		{"relative program", Entry{ID: "x", Exec: "gatehouse-app"}},
		{"line break in an argument", Entry{ID: "x", Exec: "/usr/bin/x", Args: []string{"a\nExec=/bin/sh"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.e.Enable(); err == nil {
				t.Errorf("Enable(%+v) = nil, want an error", tt.e)
			}
		})
	}
}
