// Package layout states the shape of the repository as rules a test can hold:
// the top-level entries the design card fixes, and which package may import
// which.
//
// The rules read a [Graph] of the module's packages, built from the source
// itself (every .go file, whatever its build constraints, so an import in a
// Windows-only file counts as much as one in a Linux file). [Check] returns
// each broken rule as a sentence; the package's test builds the real graph
// and fails on any, and also breaks the graph on purpose to show that each
// rule can fail.
//
// # The rules
//
//   - The top level holds only [TopLevel] (and what the root .gitignore
//     ignores, such as build output).
//   - Only app/... and cmd/gatehouse-app import Fyne or GL, directly or
//     through another package of the module.
//   - gateway, the relay, imports no other package of the module.
//   - receipts/verify needs only receipts/entry, the standard library,
//     sumdb's tlog and note, and jcs.
//   - receipts/... knows nothing of MCP: no gateway, app or cmd package, no
//     MCP SDK.
//   - vault and internal/filelock are leaves: they import no package of the
//     module.
//   - The arrows point down [Layers]: a package never imports one of an
//     earlier layer, and nothing outside cmd/ imports cmd/....
//   - [TestHelpers] are imported only by tests, never linked into a binary.
package layout

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// TopLevel is the set of top-level entries the design card fixes, with the
// four it allows beside them (internal, docs, Makefile, .ci) and the
// repository's dotfiles.
var TopLevel = []string{
	"cmd", "app", "gateway", "vault", "receipts", "assets", "packaging",
	"go.mod", "go.sum", "FyneApp.toml", "README.md", "LICENSE",
	"internal", "docs", "Makefile", ".ci",
	".git", ".gitignore", ".gitattributes",
}

// Layers orders the module's top-level packages: a package may import its own
// layer and the layers after it, never one before. internal/... is shared by
// all of them and comes last.
var Layers = []string{"cmd", "app", "gateway", "receipts", "vault", "internal"}

// TestHelpers are packages for tests alone.
var TestHelpers = []string{"internal/seed", "internal/mcptest"}

// GUI lists the packages that may import Fyne.
var GUI = []string{"app", "cmd/gatehouse-app"}

// guiImport reports whether an external import path is Fyne's or GL's.
func guiImport(p string) bool {
	for _, prefix := range []string{"fyne.io/", "github.com/go-gl/", "github.com/fyne-io/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// verifyMayImport lists what receipts/verify and what it imports of the
// module may import from outside the standard library.
var verifyMayImport = []string{
	"golang.org/x/mod/sumdb/tlog",
	"golang.org/x/mod/sumdb/note",
	"github.com/gowebpki/jcs",
}

// A Package is one package of the module: its path relative to the module
// root ("gateway/gate", "cmd/gatehouse") and its imports.
type Package struct {
	Dir string
	// Imports are the import paths of the package's non-test files: the
	// module's own packages relative to its root, others as written.
	Imports []string
	// TestImports are those of its _test.go files alone.
	TestImports []string
}

// A Graph is the module's packages by Dir, and the module's path.
type Graph struct {
	Module   string
	Packages map[string]*Package
}

// Local reports whether imp (as stored in a Package) is one of the module's
// packages.
func (g *Graph) Local(imp string) bool {
	_, ok := g.Packages[imp]
	return ok
}

// within reports whether dir is root or below it.
func within(dir, root string) bool {
	return dir == root || strings.HasPrefix(dir, root+"/")
}

func withinAny(dir string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool { return within(dir, r) })
}

// closure returns the module's packages dir imports, directly or through
// others (non-test imports only), dir itself excluded, sorted.
func (g *Graph) closure(dir string) []string {
	seen := map[string]bool{dir: true}
	stack := []string{dir}
	var out []string
	for len(stack) > 0 {
		p := g.Packages[stack[len(stack)-1]]
		stack = stack[:len(stack)-1]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if g.Local(imp) && !seen[imp] {
				seen[imp] = true
				out = append(out, imp)
				stack = append(stack, imp)
			}
		}
	}
	slices.Sort(out)
	return out
}

// via names the package through which dir reaches target, for messages.
func (g *Graph) via(dir, target string) string {
	if slices.Contains(g.Packages[dir].Imports, target) {
		return ""
	}
	for _, imp := range g.Packages[dir].Imports {
		if g.Local(imp) && (imp == target || slices.Contains(g.closure(imp), target)) {
			return " (through " + imp + ")"
		}
	}
	return ""
}

func layer(dir string) int {
	top, _, _ := strings.Cut(dir, "/")
	return slices.Index(Layers, top)
}

// Check returns every rule the graph breaks, one sentence each, sorted. The
// top level is checked by [CheckTopLevel].
func Check(g *Graph) []string {
	var bad []string
	add := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	dirs := make([]string, 0, len(g.Packages))
	for d := range g.Packages {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)

	// Who imports Fyne directly.
	fyne := map[string]bool{}
	for _, d := range dirs {
		if slices.ContainsFunc(g.Packages[d].Imports, guiImport) {
			fyne[d] = true
		}
	}

	for _, d := range dirs {
		p := g.Packages[d]
		deps := g.closure(d)

		if !withinAny(d, GUI) {
			for _, imp := range p.Imports {
				if guiImport(imp) {
					add("%s imports %s: only app/... and cmd/gatehouse-app may import Fyne", d, imp)
				}
			}
			for _, dep := range deps {
				if fyne[dep] {
					add("%s depends on Fyne through %s%s: only app/... and cmd/gatehouse-app may", d, dep, g.via(d, dep))
				}
			}
		}

		if d == "gateway" {
			for _, dep := range deps {
				add("gateway (the relay) imports %s: it imports no other package of the module", dep)
			}
		}

		if d == "vault" || d == "internal/filelock" {
			for _, dep := range deps {
				add("%s imports %s: it is a leaf and imports no package of the module", d, dep)
			}
		}

		if within(d, "receipts/verify") {
			for _, dep := range deps {
				if !within(dep, "receipts/verify") && dep != "receipts/entry" {
					add("%s imports %s%s: the offline verifier needs only receipts/entry, the standard library, tlog, note and jcs", d, dep, g.via(d, dep))
				}
			}
			for _, q := range append([]string{d}, deps...) {
				for _, imp := range g.Packages[q].Imports {
					if !g.Local(imp) && !standard(imp) && !slices.Contains(verifyMayImport, imp) {
						add("%s imports %s%s: the offline verifier needs only receipts/entry, the standard library, tlog, note and jcs", d, imp, viaName(d, q))
					}
				}
			}
		}

		if within(d, "receipts") {
			for _, dep := range deps {
				if withinAny(dep, []string{"gateway", "app", "cmd"}) {
					add("%s imports %s%s: the evidence log knows nothing of MCP", d, dep, g.via(d, dep))
				}
			}
			for _, q := range append([]string{d}, deps...) {
				for _, imp := range g.Packages[q].Imports {
					if strings.HasPrefix(imp, "github.com/modelcontextprotocol/") {
						add("%s imports %s%s: the evidence log knows nothing of MCP", d, imp, viaName(d, q))
					}
				}
			}
		}

		for _, imp := range p.Imports {
			if !g.Local(imp) {
				continue
			}
			if within(imp, "cmd") && !within(d, "cmd") {
				add("%s imports %s: nothing outside cmd/ imports cmd/...", d, imp)
			}
			if li, ld := layer(imp), layer(d); li >= 0 && ld >= 0 && li < ld && !withinAny(d, TestHelpers) {
				add("%s imports %s: the arrows point down %s", d, imp, strings.Join(Layers, " > "))
			}
			if withinAny(imp, TestHelpers) && !withinAny(d, TestHelpers) {
				add("%s imports the test helper %s outside its tests", d, imp)
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

func viaName(d, q string) string {
	if d == q {
		return ""
	}
	return " (through " + q + ")"
}

// standard reports whether an import path is the standard library's: its
// first element has no dot.
func standard(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// CheckTopLevel returns a sentence for each top-level entry that is neither
// in [TopLevel] nor matched by one of ignored (the root .gitignore's
// patterns that name a top-level entry).
func CheckTopLevel(entries, ignored []string) []string {
	var bad []string
	for _, e := range entries {
		if slices.Contains(TopLevel, e) {
			continue
		}
		if slices.ContainsFunc(ignored, func(pat string) bool { ok, _ := path.Match(pat, e); return ok }) {
			continue
		}
		bad = append(bad, fmt.Sprintf("the top level holds %s: the design card allows only %s", e, strings.Join(TopLevel, ", ")))
	}
	return bad
}

// IgnoredAtTop returns the patterns of a .gitignore file that can match a
// top-level entry: "/bin/", "*.test", "/gatehouse" give "bin", "*.test",
// "gatehouse"; a pattern with a slash inside ("/app/testdata/") names
// something deeper and is left out, as are negations and comments.
func IgnoredAtTop(gitignore string) []string {
	var out []string
	for line := range strings.Lines(gitignore) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		line = strings.TrimSuffix(strings.TrimPrefix(line, "/"), "/")
		if line == "" || strings.Contains(line, "/") {
			continue
		}
		out = append(out, line)
	}
	return out
}
