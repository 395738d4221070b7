package confine_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/confine"
)

func needABI(t *testing.T) {
	t.Helper()
	if v, err := confine.ABI(); err != nil || v < confine.NetABI {
		t.Skipf("no Landlock ABI %d here (%d, %v)", confine.NetABI, v, err)
	}
}

func TestPrepare(t *testing.T) {
	needABI(t)
	dir := t.TempDir()
	nm := filepath.Join(dir, "proj", "node_modules")
	script := filepath.Join(nm, "@scope", "server", "dist", "index.js")
	os.MkdirAll(filepath.Dir(script), 0o755)
	os.WriteFile(script, nil, 0o644)
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o755)
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o700)
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skip(err)
	}
	cmd := gateway.Command{Path: "/bin/sh", Args: []string{script, data, filepath.Join(dir, "gone")}}

	p, err := confine.Prepare("/usr/bin/gatehouse", cmd, confine.Request{Net: []string{"443"}, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Cleanup()
	for _, want := range []string{nm, filepath.Dir(sh), "/usr"} {
		if !slices.Contains(p.Plan.Read, want) {
			t.Errorf("Plan.Read = %v, want %s", p.Plan.Read, want)
		}
	}
	if !slices.Contains(p.Plan.Write, data) {
		t.Errorf("Plan.Write = %v, want the folder its arguments name, %s", p.Plan.Write, data)
	}
	for _, l := range [][]string{p.Plan.Read, p.Plan.Write} {
		for _, x := range l {
			if x == dir || x == home {
				t.Errorf("plan grants %s", x)
			}
		}
	}
	if !slices.Equal(p.Plan.Connect, []uint16{443}) || p.Plan.AnyNet || p.Plan.MinABI != confine.NetABI {
		t.Errorf("plan's network = %v any %v abi %d, want 443 only from ABI 4", p.Plan.Connect, p.Plan.AnyNet, p.Plan.MinABI)
	}
	if len(p.Notes) != 1 {
		t.Errorf("Notes = %q, want one about the missing argument", p.Notes)
	}
	if p.Command.Path != "/usr/bin/gatehouse" || p.Command.Args[0] != confine.Command || !slices.Contains(p.Command.Args, "--") {
		t.Errorf("Command = %v", p.Command)
	}

	for _, tt := range []struct {
		name string
		req  confine.Request
	}{
		{"a declared folder missing", confine.Request{Read: []string{filepath.Join(dir, "nope")}}},
		{"the home's parent", confine.Request{Read: []string{dir}, Home: home}},
		{"inside the home", confine.Request{Write: []string{home}, Home: home}},
	} {
		_, err := confine.Prepare("/usr/bin/gatehouse", gateway.Command{Path: "/bin/sh"}, tt.req)
		var perr *confine.PathError
		if !errors.As(err, &perr) {
			t.Errorf("%s: Prepare = %v, want a PathError", tt.name, err)
		}
	}
	if _, err := confine.Prepare("/usr/bin/gatehouse", gateway.Command{Path: "/bin/sh"}, confine.Request{Net: []string{"example.com:443"}}); err == nil {
		t.Error("Prepare with a host for a port = nil error, want one: Landlock knows ports")
	}
}
