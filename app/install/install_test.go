package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMain lets the tests run this test binary as if it were an installed
// program: with GATEHOUSE_INSTALL_TEST_PROXYPATH set it prints what
// ProxyPath returns and exits.
func TestMain(m *testing.M) {
	if os.Getenv("GATEHOUSE_INSTALL_TEST_PROXYPATH") != "" {
		p, err := ProxyPath()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			if errors.Is(err, ErrProxyNotFound) {
				os.Exit(3)
			}
			os.Exit(1)
		}
		fmt.Println(p)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeExe writes an executable file at path, creating its folder.
func writeExe(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		if runtime.GOOS == "windows" {
			t.Skipf("symlinks need a privilege here: %v", err)
		}
		t.Fatal(err)
	}
}

func noPath(string) (string, error) { return "", exec.ErrNotFound }

func TestProxyPath(t *testing.T) {
	name := exeName("gatehouse", runtime.GOOS)
	app := exeName("gatehouse-app", runtime.GOOS)
	tests := []struct {
		name string
		// setup lays out files under root and returns the running
		// program's path, the path PATH lookup finds (or ""), and the
		// path ProxyPath must return (or "" for ErrProxyNotFound).
		setup func(t *testing.T, root string) (exe, onPath, want string)
	}{
		{"next to the program", func(t *testing.T, root string) (string, string, string) {
			writeExe(t, filepath.Join(root, "usr/bin", app))
			writeExe(t, filepath.Join(root, "usr/bin", name))
			writeExe(t, filepath.Join(root, "elsewhere", name))
			return filepath.Join(root, "usr/bin", app), filepath.Join(root, "elsewhere", name), filepath.Join(root, "usr/bin", name)
		}},
		{"beside the link's target when only it has one", func(t *testing.T, root string) (string, string, string) {
			writeExe(t, filepath.Join(root, "opt/gatehouse", app))
			writeExe(t, filepath.Join(root, "opt/gatehouse", name))
			symlink(t, filepath.Join(root, "opt/gatehouse", app), filepath.Join(root, "home/bin", app))
			return filepath.Join(root, "home/bin", app), "", filepath.Join(root, "opt/gatehouse", name)
		}},
		{"the link's own folder first, its link kept", func(t *testing.T, root string) (string, string, string) {
			writeExe(t, filepath.Join(root, "Cellar/gatehouse/1.0/bin", app))
			writeExe(t, filepath.Join(root, "Cellar/gatehouse/1.0/bin", name))
			symlink(t, filepath.Join(root, "Cellar/gatehouse/1.0/bin", app), filepath.Join(root, "bin", app))
			symlink(t, filepath.Join(root, "Cellar/gatehouse/1.0/bin", name), filepath.Join(root, "bin", name))
			return filepath.Join(root, "bin", app), "", filepath.Join(root, "bin", name)
		}},
		{"on PATH when not beside the program", func(t *testing.T, root string) (string, string, string) {
			writeExe(t, filepath.Join(root, "tmp/go-build", app))
			writeExe(t, filepath.Join(root, "usr/local/bin", name))
			return filepath.Join(root, "tmp/go-build", app), filepath.Join(root, "usr/local/bin", name), filepath.Join(root, "usr/local/bin", name)
		}},
		{"a folder of that name is not a program", func(t *testing.T, root string) (string, string, string) {
			writeExe(t, filepath.Join(root, "bin", app))
			if err := os.MkdirAll(filepath.Join(root, "bin", name), 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "bin", app), "", ""
		}},
		{"nowhere", func(t *testing.T, root string) (string, string, string) {
			writeExe(t, filepath.Join(root, "bin", app))
			return filepath.Join(root, "bin", app), "", ""
		}},
	}
	if runtime.GOOS != "windows" {
		tests = append(tests, struct {
			name  string
			setup func(t *testing.T, root string) (exe, onPath, want string)
		}{"a file without the execute bit is not a program", func(t *testing.T, root string) (string, string, string) {
			writeExe(t, filepath.Join(root, "bin", app))
			if err := os.WriteFile(filepath.Join(root, "bin", name), []byte("not a program"), 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "bin", app), "", ""
		}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			exe, onPath, want := tt.setup(t, root)
			lookPath := noPath
			if onPath != "" {
				lookPath = func(file string) (string, error) {
					if file != name {
						t.Errorf("looked up %q on PATH, want %q", file, name)
					}
					return onPath, nil
				}
			}
			got, err := proxyPath(exe, name, lookPath)
			if want == "" {
				if !errors.Is(err, ErrProxyNotFound) {
					t.Fatalf("proxyPath(%s) = %q, %v; want ErrProxyNotFound", exe, got, err)
				}
				if !strings.Contains(err.Error(), filepath.Dir(exe)) {
					t.Errorf("error %q does not name the folder %s", err, filepath.Dir(exe))
				}
				return
			}
			if err != nil || got != want {
				t.Fatalf("proxyPath(%s) = %q, %v; want %q", exe, got, err, want)
			}
		})
	}
}

// The real thing: a program copied into a folder beside a gatehouse finds
// it through os.Executable, whatever the working folder and PATH.
func TestProxyPathOfAnInstalledProgram(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	app := filepath.Join(dir, AppName)
	copyFile(t, self, app)
	proxy := filepath.Join(dir, ProxyName)
	writeExe(t, proxy)

	run := func() (string, int) {
		t.Helper()
		cmd := exec.Command(app)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GATEHOUSE_INSTALL_TEST_PROXYPATH=1", "PATH="+t.TempDir())
		out, err := cmd.Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(exit.Stderr), exit.ExitCode()
		}
		if err != nil {
			t.Fatalf("run %s: %v", app, err)
		}
		return strings.TrimSpace(string(out)), 0
	}

	if got, code := run(); code != 0 || got != proxy {
		t.Fatalf("installed program: ProxyPath() = %q (exit %d), want %q", got, code, proxy)
	}
	if err := os.Remove(proxy); err != nil {
		t.Fatal(err)
	}
	if got, code := run(); code != 3 {
		t.Fatalf("without a gatehouse beside it: exit %d, output %q; want ErrProxyNotFound (exit 3)", code, got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNames(t *testing.T) {
	for _, tt := range []struct{ base, goos, want string }{
		{"gatehouse", "linux", "gatehouse"},
		{"gatehouse", "darwin", "gatehouse"},
		{"gatehouse-app", "windows", "gatehouse-app.exe"},
	} {
		if got := exeName(tt.base, tt.goos); got != tt.want {
			t.Errorf("exeName(%q, %q) = %q, want %q", tt.base, tt.goos, got, tt.want)
		}
	}
}
