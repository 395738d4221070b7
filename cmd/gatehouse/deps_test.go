package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The core (everything but the GUI) stays pure Go: no Fyne, no GL, no cgo.
// The proxy is what MCP clients start, on every platform, from a plain
// `go build`; a GUI dependency would make it need a C toolchain and a display
// library, and slow its start.
func TestCoreHasNoGUIDependencies(t *testing.T) {
	core := []string{".", "../../gateway/...", "../../store/...", "../../install/...", "../../downstream/...", "../../autostart/...", "../../internal/..."}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, core...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{"fyne.io/", "github.com/go-gl/", "github.com/gatehouse-dev/gatehouse/app", "testing"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("the core depends on %s", dep)
			}
		}
	}
}

func TestCoreBuildsWithoutCgo(t *testing.T) {
	cmd := exec.Command("go", "build", "-o", os.DevNull, ".", "../../gateway/...", "../../store/...", "../../install/...", "../../downstream/...", "../../autostart/...", "../../internal/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}
