package app

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/clients"
)

// The approval window tells what a call will do in words, as a firewall's
// prompt does: who asks, what happens (a file written, overwritten, edited),
// why Gatehouse asks, and what a standing answer would cover. It reads the
// tool's kind from its arguments, never from what the server says of it.

// A callKind is what a call does, as far as its arguments tell.
type callKind int

const (
	otherCall callKind = iota // anything else: its arguments are shown as a tree
	fileWrite                 // a path and the whole content to write there
	fileEdit                  // a path and replacements of text in it
)

// An edit replaces old text with new text in a file.
type edit struct{ old, new string }

// A callStory is a request read for a person: what the call does.
type callStory struct {
	kind    callKind
	path    string // for file calls: the path, as the agent gave it
	pathArg string // the argument that holds it ("path")
	content string // for fileWrite
	edits   []edit // for fileEdit

	exists bool  // the path names a file on this computer
	size   int64 // its size, when it exists

	warnings []string // what a person should not miss, in sentences
}

// pathArgs are the names tools give the file they act on.
var pathArgs = []string{"path", "file_path", "filePath", "filename", "file"}

// contentArgs are the names tools give a file's whole new content.
var contentArgs = []string{"content", "contents", "text", "file_text"}

// readCall reads r's arguments for what the call does. stat looks a path
// up on this computer (os.Stat); nil looks nothing up.
func readCall(r approval.Request, stat func(string) (fs.FileInfo, error)) callStory {
	var s callStory
	if r.ArgsTruncated {
		return s
	}
	var args map[string]any
	if err := json.Unmarshal(r.Args, &args); err != nil {
		return s
	}
	for _, name := range pathArgs {
		if p, ok := args[name].(string); ok && p != "" {
			s.path, s.pathArg = p, name
			break
		}
	}
	if s.path == "" {
		return s
	}
	for _, name := range contentArgs {
		if c, ok := args[name].(string); ok {
			s.kind, s.content = fileWrite, c
			break
		}
	}
	if s.kind == otherCall {
		s.edits = editsOf(args)
		if len(s.edits) > 0 {
			s.kind = fileEdit
		}
	}
	if s.kind == otherCall {
		return s
	}
	if stat != nil && filepath.IsAbs(s.path) {
		if fi, err := stat(s.path); err == nil && fi.Mode().IsRegular() {
			s.exists, s.size = true, fi.Size()
		}
	}
	s.warnings = fileWarnings(s)
	return s
}

// editsOf returns the replacements of an edit call: filesystem's
// "edits": [{"oldText", "newText"}], or one "old_str"/"new_str" pair (or
// "old_string"/"new_string").
func editsOf(args map[string]any) []edit {
	if list, ok := args["edits"].([]any); ok {
		var out []edit
		for _, e := range list {
			m, ok := e.(map[string]any)
			if !ok {
				return nil
			}
			o, ok1 := m["oldText"].(string)
			n, ok2 := m["newText"].(string)
			if !ok1 || !ok2 {
				return nil
			}
			out = append(out, edit{o, n})
		}
		return out
	}
	for _, names := range [][2]string{{"old_str", "new_str"}, {"old_string", "new_string"}} {
		o, ok1 := args[names[0]].(string)
		n, ok2 := args[names[1]].(string)
		if ok1 && ok2 {
			return []edit{{o, n}}
		}
	}
	return nil
}

// secretFile matches the names of files that hold secrets.
var secretFile = regexp.MustCompile(`(?i)(^|/)(\.env(\..*)?|\.netrc|\.npmrc|\.pypirc|\.pgpass|\.git-credentials|credentials(\.json)?|id_(rsa|ed25519|ecdsa|dsa)|authorized_keys|.*\.pem|.*\.key)$|(^|/)\.(ssh|aws|kube|gnupg)/`)

// liveKey matches what looks like a key or token of a known service, or
// one Gatehouse has redacted.
var liveKey = regexp.MustCompile(`\[redacted by Gatehouse: secret [^\]]*\]|\b(sk-[A-Za-z0-9_-]{16,}|sk_live_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|glpat-[A-Za-z0-9_-]{20,})|-----BEGIN [A-Z ]*PRIVATE KEY-----|(?i)\b[a-z0-9_]*(api_?key|secret|token|password)[a-z0-9_]*\s*[=:]\s*\S{12,}`)

// fileWarnings says what a file call does that a person should not miss.
func fileWarnings(s callStory) []string {
	var w []string
	if secretFile.MatchString(filepath.ToSlash(s.path)) {
		w = append(w, fmt.Sprintf("%s is where secrets are usually kept.", filepath.Base(s.path)))
	}
	text := s.content
	for _, e := range s.edits {
		text += "\n" + e.new
	}
	if liveKey.MatchString(text) {
		w = append(w, "The new text holds what looks like a key, token or password.")
	}
	if s.kind == fileWrite && s.exists {
		w = append(w, fmt.Sprintf("The file exists (%s): its content will be replaced.", byteSize(s.size)))
	}
	return w
}

// byteSize says a size in bytes in a few characters.
func byteSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1024*1024:
		return fmt.Sprintf("%.1f KB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1024*1024))
}

// lines counts the lines of s as an editor does.
func lines(s string) int {
	if s == "" {
		return 0
	}
	return strings.Count(strings.TrimSuffix(s, "\n"), "\n") + 1
}

// what says in one sentence what the call will do.
func (s callStory) what(r approval.Request) string {
	switch s.kind {
	case fileWrite:
		n := plural(lines(s.content), "line", "lines")
		if s.exists {
			return fmt.Sprintf("Overwrite %s with %s.", plainLine(s.path), n)
		}
		return fmt.Sprintf("Create %s with %s.", plainLine(s.path), n)
	case fileEdit:
		return fmt.Sprintf("Edit %s: %s.", plainLine(s.path), plural(len(s.edits), "change", "changes"))
	}
	return fmt.Sprintf("Run the tool %s of the server %s with the arguments below.", plainLine(r.Tool), plainLine(r.Server))
}

// clientName returns the product name of the client that asks ("Claude
// Desktop" for claude-desktop), or what it calls itself.
func clientName(client string) string {
	if client == "" {
		return "An agent that gave no name"
	}
	if id, err := clients.ParseID(client); err == nil {
		return id.Name()
	}
	return plainLine(client)
}

// ruleWords says why Gatehouse asks: the rule that asked, in words.
func ruleWords(rule, risk string) string {
	switch {
	case rule == "":
		return ""
	case rule == "pin:changed":
		return "Gatehouse asks because the tool's definition changed since you accepted it."
	case rule == "quarantine:unreviewed":
		return "Gatehouse asks because you have not reviewed this server yet."
	case strings.HasPrefix(rule, "default:"):
		class := strings.TrimPrefix(rule, "default:")
		return fmt.Sprintf("Gatehouse asks because your default for %s-risk tools is “Ask me”.", plainLine(class))
	}
	return fmt.Sprintf("Gatehouse asks because your rule “%s” says to ask.", plainLine(rule))
}

// riskWhy says why a call has its risk, for the kinds Gatehouse can tell.
func (s callStory) riskWhy() string {
	switch {
	case s.kind == fileWrite && s.exists:
		return "It replaces a file on your computer."
	case s.kind == fileWrite:
		return "It writes a file on your computer."
	case s.kind == fileEdit:
		return "It changes a file on your computer."
	}
	return ""
}

// argTree shows arguments as indented "name: value" lines: strings without
// quotes or escapes, long ones cut.
func argTree(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return plain(string(raw))
	}
	var b strings.Builder
	var walk func(v any, indent string)
	walk = func(v any, indent string) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				b.WriteString(indent + plainLine(k) + ":")
				leaf(&b, x[k], indent, walk)
			}
		case []any:
			for _, e := range x {
				b.WriteString(indent + "•")
				leaf(&b, e, indent, walk)
			}
		default:
			b.WriteString(indent)
			leaf(&b, v, indent, walk)
		}
	}
	walk(v, "")
	if b.Len() == 0 {
		return "(no arguments)"
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// maxLeaf bounds a string shown in the tree.
const maxLeaf = 600

func leaf(b *strings.Builder, v any, indent string, walk func(any, string)) {
	switch x := v.(type) {
	case map[string]any, []any:
		b.WriteString("\n")
		walk(x, indent+"    ")
		return
	case string:
		s := plain(x)
		if len(s) > maxLeaf {
			cut := maxLeaf
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
			s = s[:cut] + fmt.Sprintf(" … (%s bytes in all)", thousands(len(x)))
		}
		if strings.Contains(s, "\n") {
			b.WriteString("\n")
			for _, l := range strings.Split(s, "\n") {
				b.WriteString(indent + "    " + l + "\n")
			}
			return
		}
		b.WriteString(" " + s + "\n")
	case nil:
		b.WriteString(" (none)\n")
	default:
		b.WriteString(fmt.Sprintf(" %v\n", x))
	}
}

// statFile is os.Stat: the approval window looks up the file a call writes.
var statFile = os.Stat

// toolWords writes a capability (mcp.SERVER.TOOL, with * for any part) in
// words: "tool delete_repo on github", "any tool on github", "tools
// delete_* on any server". The capability stays the term, in the glossary.
func toolWords(capability string) string {
	rest, ok := strings.CutPrefix(capability, "mcp.")
	server, tool, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || server == "" || tool == "" {
		return plainLine(capability)
	}
	on := " on " + plainLine(server)
	if server == "*" {
		on = " on any server"
	}
	switch {
	case tool == "*":
		return "any tool" + on
	case strings.Contains(tool, "*"):
		return "tools " + plainLine(tool) + on
	}
	return "tool " + plainLine(tool) + on
}

// ruleName names the rule that decided, in words: "your default for low
// risk", "rule no-deletes".
func ruleName(rule string) string {
	switch {
	case rule == "":
		return ""
	case rule == "pin:changed":
		return "a changed definition"
	case rule == "quarantine:unreviewed":
		return "a server not reviewed yet"
	case strings.HasPrefix(rule, "default:"):
		return "your default for " + plainLine(strings.TrimPrefix(rule, "default:")) + " risk"
	}
	return "rule " + plainLine(rule)
}
