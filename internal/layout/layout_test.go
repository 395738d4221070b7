package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// root is the module's root: a test runs in its package's folder.
const root = "../.."

// readGraph builds the module's import graph from its source: every .go file
// in every package folder, whatever its build constraints. It reads the files
// itself (rather than asking go list), so the test's cached result is
// invalidated by any change to any of them.
func readGraph(tb testing.TB) *Graph {
	tb.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		tb.Fatal(err)
	}
	g := &Graph{Module: modfile.ModulePath(mod), Packages: map[string]*Package{}}
	if g.Module == "" {
		tb.Fatal("go.mod names no module")
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			// The folders the go command ignores.
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := g.Packages[dir]
		if pkg == nil {
			pkg = &Package{Dir: dir}
			g.Packages[dir] = pkg
		}
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if local, ok := strings.CutPrefix(imp, g.Module+"/"); ok {
				imp = local
			}
			if strings.HasSuffix(name, "_test.go") {
				pkg.TestImports = append(pkg.TestImports, imp)
			} else {
				pkg.Imports = append(pkg.Imports, imp)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range g.Packages {
		slices.Sort(p.Imports)
		p.Imports = slices.Compact(p.Imports)
	}
	return g
}

func TestImportsFollowTheLayout(t *testing.T) {
	g := readGraph(t)
	// The graph is the module's: a walk that found nothing would pass.
	for _, dir := range []string{"gateway", "gateway/gate", "receipts/verify", "vault", "app", "cmd/gatehouse", "internal/filelock"} {
		if g.Packages[dir] == nil {
			t.Fatalf("package %s not found under %s", dir, root)
		}
	}
	for _, bad := range Check(g) {
		t.Error(bad)
	}
}

func TestTopLevelIsTheCards(t *testing.T) {
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	gitignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, bad := range CheckTopLevel(names, IgnoredAtTop(string(gitignore))) {
		t.Error(bad)
	}
}

// Each rule can fail: the real graph, broken one import at a time, breaks the
// rule that import is about.
func TestEachRuleCatchesAForbiddenImport(t *testing.T) {
	cases := []struct {
		from, imp string
		want      string // in the sentence that reports it
	}{
		{"gateway", "gateway/gate", "gateway (the relay) imports"},
		{"gateway", "internal/store", "gateway (the relay) imports"},
		{"gateway/policy", "fyne.io/fyne/v2", "only app/... and cmd/gatehouse-app may import Fyne"},
		{"receipts", "github.com/go-gl/gl/v2.1/gl", "only app/... and cmd/gatehouse-app may import Fyne"},
		{"cmd/gatehouse", "app", "depends on Fyne through app"},
		{"gateway/gate", "app/install", "the arrows point down"},
		{"vault", "receipts", "vault imports receipts: it is a leaf"},
		{"vault", "internal/filelock", "vault imports internal/filelock: it is a leaf"},
		{"internal/filelock", "internal/store", "it is a leaf"},
		{"receipts/verify", "receipts", "the offline verifier needs only"},
		{"receipts/verify", "github.com/segmentio/encoding/json", "the offline verifier needs only"},
		{"receipts/entry", "internal/store", "receipts/verify imports internal/store (through receipts/entry)"},
		{"receipts/entry", "encoding/json/v2", ""}, // the standard library: allowed
		{"receipts", "gateway/approval", "the evidence log knows nothing of MCP"},
		{"receipts", "github.com/modelcontextprotocol/go-sdk/mcp", "the evidence log knows nothing of MCP"},
		{"app", "cmd/gatehouse/internal/demo", "nothing outside cmd/ imports cmd/..."},
		{"gateway/downstream", "internal/mcptest", "imports the test helper internal/mcptest"},
	}
	for _, c := range cases {
		t.Run(c.from+" imports "+c.imp, func(t *testing.T) {
			g := readGraph(t)
			p := g.Packages[c.from]
			if p == nil {
				t.Fatalf("no package %s", c.from)
			}
			p.Imports = append(p.Imports, c.imp)
			bad := Check(g)
			if c.want == "" {
				if len(bad) > 0 {
					t.Fatalf("Check = %q, want no complaint", bad)
				}
				return
			}
			if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, c.want) }) {
				t.Fatalf("Check = %q, want a sentence containing %q", bad, c.want)
			}
		})
	}
}

func TestTopLevelCatchesANewEntry(t *testing.T) {
	ignored := IgnoredAtTop("# build\n/bin/\n*.test\n/gatehouse\n/app/testdata/failed/\n!keep\n")
	if want := []string{"bin", "*.test", "gatehouse"}; !slices.Equal(ignored, want) {
		t.Fatalf("IgnoredAtTop = %q, want %q", ignored, want)
	}
	if bad := CheckTopLevel([]string{"cmd", "bin", "x.test", "gatehouse", ".gitignore"}, ignored); len(bad) != 0 {
		t.Fatalf("CheckTopLevel of allowed and ignored entries = %q", bad)
	}
	for _, extra := range []string{"scripts", "testdata", "store", "app.go", "failed"} {
		if bad := CheckTopLevel([]string{"cmd", extra}, ignored); len(bad) != 1 || !strings.Contains(bad[0], "the top level holds "+extra) {
			t.Errorf("CheckTopLevel with %s = %q, want it named", extra, bad)
		}
	}
}

// core lists the module's packages but the GUI's, as go list names them.
func core(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-C", root, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderrOf(err))
	}
	g := readGraph(t)
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		local := strings.TrimPrefix(p, g.Module+"/")
		if !withinAny(local, GUI) {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %q", pkgs)
	}
	return pkgs
}

// The core (everything but the GUI) stays pure Go: the proxy is what MCP
// clients start, on every platform, from a plain `go build`; a GUI or cgo
// dependency would make it need a C toolchain and a display library, and
// slow its start. Nor does a binary link the testing package.
func TestCoreLinksNoGUIAndNoTesting(t *testing.T) {
	pkgs := core(t)
	out, err := exec.Command("go", append([]string{"list", "-C", root, "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderrOf(err))
	}
	gui := regexp.MustCompile(`^(fyne\.io/|github\.com/go-gl/|github\.com/fyne-io/|testing$)`)
	for _, dep := range strings.Fields(string(out)) {
		if gui.MatchString(dep) {
			t.Errorf("the core depends on %s", dep)
		}
	}
}

func TestCoreBuildsWithoutCgo(t *testing.T) {
	cmd := exec.Command("go", append([]string{"build", "-C", root, "-o", os.DevNull}, core(t)...)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
}

// stderrOf returns what a command that failed printed on stderr.
func stderrOf(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// The README names the Go version go.mod asks for.
func TestREADMENamesTheGoVersion(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", mod, nil)
	if err != nil || f.Go == nil {
		t.Fatalf("go.mod: no go line (%v)", err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "Go " + f.Go.Version + " or later"
	if !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q, the go line of go.mod", want)
	}
}
