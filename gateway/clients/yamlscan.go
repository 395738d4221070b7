package clients

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// This file finds the server entries of a YAML file (Continue's and
// Goose's config.yaml) and the exact bytes of each, so that governing
// rewrites the lines of one entry and leaves every other byte alone. The
// file is read by a full YAML parser, whose nodes say where each value
// starts; where an entry ends is found here, on lines, and checked: an
// entry's bytes must read alone as what the whole file says of it, or the
// entry is not governed. So are entries that use what cannot be edited in
// place: anchors, aliases, merge keys, tags, flow style.

// A yamlDoc is a parsed YAML file.
type yamlDoc struct {
	root  *yaml.Node // the top mapping; nil for a file without content
	lines []int      // the offset where each line starts
}

// parseYAML parses data, which must hold one YAML document whose top is
// a mapping. Line breaks other than LF and CRLF, and more than one
// document, are refused: Gatehouse would place its edits by a different
// count of lines than the client's parser.
func parseYAML(data []byte) (*yamlDoc, error) {
	d := &yamlDoc{}
	bom := 0
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		bom = 3
	}
	d.lines = []int{bom}
	for i := bom; i < len(data); i++ {
		switch data[i] {
		case '\n':
			d.lines = append(d.lines, i+1)
		case '\r':
			if i+1 >= len(data) || data[i+1] != '\n' {
				return nil, d.errorf(data, i, "a carriage return without a line feed: Gatehouse edits YAML files whose lines end in LF or CRLF")
			}
		}
	}
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return nil, d.errorf(data, i, "not UTF-8")
	}
	for _, sep := range []string{"\u0085", "\u2028", "\u2029"} {
		if i := bytes.Index(data, []byte(sep)); i >= 0 {
			return nil, d.errorf(data, i, "a Unicode line separator (%U), which YAML counts as a line break", []rune(sep)[0])
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return d, nil
		}
		return nil, d.yamlError(data, err)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, d.errorf(data, len(data), "more than one YAML document: Gatehouse edits files that hold one")
	}
	if len(doc.Content) == 0 {
		return d, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return d, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, d.errorf(data, d.offset(data, root), "want a YAML mapping at the top")
	}
	if err := d.checkKeys(data, root, 0); err != nil {
		return nil, err
	}
	d.root = root
	return d, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns the parser's error into a *SyntaxError where it names
// a line.
func (d *yamlDoc) yamlError(data []byte, err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		off := len(data)
		if line >= 1 && line <= len(d.lines) {
			off = d.lines[line-1]
		}
		return d.errorf(data, off, "%s", m[2])
	}
	return d.errorf(data, 0, "%s", strings.TrimPrefix(msg, "yaml: "))
}

func (d *yamlDoc) errorf(data []byte, offset int, format string, args ...any) error {
	line, col := position(data, offset)
	return &SyntaxError{Line: line, Column: col, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

// checkKeys refuses a mapping with the same key twice: clients disagree
// on which one counts, so Gatehouse edits neither.
func (d *yamlDoc) checkKeys(data []byte, n *yaml.Node, depth int) error {
	if depth > maxJSONDepth {
		return d.errorf(data, d.offset(data, n), "nested more than %d deep", maxJSONDepth)
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if seen[k.Value] {
				return d.errorf(data, d.offset(data, k), "%q is given twice in the same mapping", k.Value)
			}
			seen[k.Value] = true
		}
	}
	for _, c := range n.Content {
		if err := d.checkKeys(data, c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// offset is where node n starts in data: the parser counts lines and
// columns (in characters, from 1).
func (d *yamlDoc) offset(data []byte, n *yaml.Node) int {
	if n.Line < 1 || n.Line > len(d.lines) {
		return len(data)
	}
	off := d.lines[n.Line-1]
	for c := 1; c < n.Column && off < len(data); c++ {
		_, size := utf8.DecodeRune(data[off:])
		off += size
	}
	return off
}

// lineStart is the offset of the start of the line holding offset.
func lineStart(data []byte, offset int) int {
	return bytes.LastIndexByte(data[:offset], '\n') + 1
}

// onlySpaces reports whether data[from:to] is spaces.
func onlySpaces(data []byte, from, to int) bool {
	for i := from; i < to; i++ {
		if data[i] != ' ' {
			return false
		}
	}
	return true
}

// blockEnd returns where the block that starts on the line at start and
// holds whatever is indented more than indent ends: after its last line
// of content (trimmed), and before the next line of content indented
// indent or less (loose). Blank lines and comment lines between the two
// may belong to either.
func blockEnd(data []byte, start, indent int) (trimmed, loose int) {
	i := bytes.IndexByte(data[start:], '\n')
	if i < 0 {
		return len(data), len(data)
	}
	trimmed = start + i + 1
	for pos := trimmed; pos < len(data); {
		end := len(data)
		if j := bytes.IndexByte(data[pos:], '\n'); j >= 0 {
			end = pos + j + 1
		}
		sp := pos
		for sp < end && data[sp] == ' ' {
			sp++
		}
		rest := bytes.TrimRight(data[sp:end], " \t\r\n")
		switch {
		case len(rest) == 0 || rest[0] == '#':
		case sp-pos <= indent:
			return trimmed, pos
		default:
			trimmed = end
		}
		pos = end
	}
	return trimmed, len(data)
}

// A yamlEntry is where one entry sits.
type yamlEntry struct {
	start, end int // whole lines
	header     int // where the entry's own mapping starts: after "- " or the key's line
	column     int // the column (from 0) of the mapping's keys
	dash       bool
}

// entrySpan finds the lines of a list item (dash) or of a key and its
// value, and checks that they read alone as want.
func (d *yamlDoc) entrySpan(data []byte, key, val *yaml.Node, want any) (*yamlEntry, error) {
	e := &yamlEntry{header: d.offset(data, val)}
	e.column = e.header - lineStart(data, e.header)
	var first int
	if key == nil {
		e.dash = true
		q := e.header - 1
		for q >= 0 && (data[q] == ' ' || data[q] == '\n' || data[q] == '\r') {
			q--
		}
		if q < 0 || data[q] != '-' || !onlySpaces(data, lineStart(data, q), q) {
			return nil, errors.New("its list item does not start its own line")
		}
		first = q
	} else {
		first = d.offset(data, key)
		if !onlySpaces(data, lineStart(data, first), first) {
			return nil, errors.New("its key does not start its own line")
		}
		if lineStart(data, e.header) == lineStart(data, first) {
			return nil, errors.New("it is not a block mapping under its key")
		}
		e.header = lineStart(data, e.header)
	}
	e.start = lineStart(data, first)
	trimmed, loose := blockEnd(data, e.start, first-e.start)
	for _, end := range []int{trimmed, loose} {
		var got any
		if err := yaml.Unmarshal(data[e.start:end], &got); err == nil && reflect.DeepEqual(got, want) {
			e.end = end
			return e, nil
		}
	}
	return nil, errors.New("its exact lines in the file cannot be found")
}

// memberSpan returns the bytes of the member whose key starts at from and
// that ends before the line at next (the next member's, or the entry's
// end), without its final line break: what a governed entry keeps as it
// was. They must read alone as {key: want}.
func memberSpan(data []byte, from, next int, key string, want any) ([2]int, bool) {
	trimmed, _ := blockEnd(data, lineStart(data, from), from-lineStart(data, from))
	for _, end := range []int{min(trimmed, next), next} {
		e := end
		for e > from && (data[e-1] == '\n' || data[e-1] == '\r') {
			e--
		}
		var got map[string]any
		if err := yaml.Unmarshal(data[from:e], &got); err == nil && len(got) == 1 && reflect.DeepEqual(got[key], want) {
			return [2]int{from, e}, true
		}
	}
	return [2]int{}, false
}

// scalarEnd returns the end of the scalar token that starts at start,
// when it is on one line (or quoted), and reads alone as n's value.
func scalarEnd(data []byte, start int, n *yaml.Node, flow bool) (int, bool) {
	if start >= len(data) {
		return 0, false
	}
	end := -1
	switch n.Style &^ yaml.TaggedStyle {
	case yaml.DoubleQuotedStyle:
		for i := start + 1; i < len(data); i++ {
			if data[i] == '\\' {
				i++
				continue
			}
			if data[i] == '"' {
				end = i + 1
				break
			}
		}
	case yaml.SingleQuotedStyle:
		for i := start + 1; i < len(data); i++ {
			if data[i] == '\'' {
				if i+1 < len(data) && data[i+1] == '\'' {
					i++
					continue
				}
				end = i + 1
				break
			}
		}
	case 0:
		i := start
		for i < len(data) && data[i] != '\n' && data[i] != '\r' {
			if (data[i] == '#') && i > start && (data[i-1] == ' ' || data[i-1] == '\t') {
				break
			}
			if flow && (data[i] == ',' || data[i] == ']' || data[i] == '}') {
				break
			}
			if data[i] == ':' && (i+1 == len(data) || strings.IndexByte(" \t\r\n", data[i+1]) >= 0 || flow && strings.IndexByte(",]}", data[i+1]) >= 0) {
				break
			}
			i++
		}
		for i > start && (data[i-1] == ' ' || data[i-1] == '\t') {
			i--
		}
		end = i
	}
	if end <= start {
		return 0, false
	}
	var alone yaml.Node
	if err := yaml.Unmarshal(data[start:end], &alone); err != nil || len(alone.Content) != 1 {
		return 0, false
	}
	if c := alone.Content[0]; c.Kind != yaml.ScalarNode || c.Value != n.Value || c.Tag != n.Tag {
		return 0, false
	}
	return end, true
}

// plainYAML reports what in n a governed entry cannot carry over exactly,
// or "".
func plainYAML(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.AliasNode:
		return "it uses a YAML alias (*name)"
	case n.Anchor != "":
		return "it uses a YAML anchor (&name)"
	case n.Style&yaml.TaggedStyle != 0:
		return "it uses a YAML tag (" + n.Tag + ")"
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Tag == "!!merge" {
				return "it uses a YAML merge key (<<)"
			}
		}
	}
	for _, c := range n.Content {
		if why := plainYAML(c); why != "" {
			return why
		}
	}
	return ""
}

// aliasesInto reports whether an alias anywhere in the file points at a
// node within n.
func aliasesInto(root, n *yaml.Node) bool {
	inside := map[*yaml.Node]bool{}
	var mark func(*yaml.Node)
	mark = func(x *yaml.Node) {
		inside[x] = true
		for _, c := range x.Content {
			mark(c)
		}
	}
	mark(n)
	var find func(*yaml.Node) bool
	find = func(x *yaml.Node) bool {
		if x.Kind == yaml.AliasNode && inside[x.Alias] {
			return true
		}
		for _, c := range x.Content {
			if find(c) {
				return true
			}
		}
		return false
	}
	return find(root)
}

// yamlValue is what a node means, as a YAML parser reading it alone would
// say.
func yamlValue(n *yaml.Node) any {
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	return v
}

// A yamlConv turns an entry's YAML nodes into the JSON nodes the entry
// reader takes, with the byte spans of each value's token (kept keys: of
// the whole member), renamed where the client's keys differ.
type yamlConv struct {
	data   []byte
	doc    *yamlDoc
	keep   map[string]bool
	rename map[string]string
}

func (c *yamlConv) node(n *yaml.Node, flow bool) *jnode {
	start := c.doc.offset(c.data, n)
	flow = flow || n.Style&yaml.FlowStyle != 0
	switch n.Kind {
	case yaml.MappingNode:
		j := &jnode{kind: jsonObject, start: start, end: start}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ks := c.doc.offset(c.data, k)
			ke, _ := scalarEnd(c.data, ks, k, flow)
			j.members = append(j.members, jmember{key: k.Value, keyStart: ks, keyEnd: max(ke, ks), val: c.node(v, flow)})
		}
		return j
	case yaml.SequenceNode:
		j := &jnode{kind: jsonArray, start: start, end: start}
		for _, e := range n.Content {
			j.elems = append(j.elems, c.node(e, flow))
		}
		return j
	}
	j := &jnode{start: start, end: start}
	switch n.Tag {
	case "!!bool":
		j.kind = jsonBool
	case "!!null":
		j.kind = jsonNull
	case "!!int", "!!float":
		j.kind = jsonNumber
	default:
		j.kind, j.str = jsonString, n.Value
	}
	if end, ok := scalarEnd(c.data, start, n, flow); ok {
		j.end = end
	}
	return j
}

// entry converts the block mapping n, whose lines are at e, into the
// member of an object, as the JSON reader sees an entry.
func (c *yamlConv) entry(name string, n *yaml.Node, e *yamlEntry) (*jmember, error) {
	obj := &jnode{kind: jsonObject, start: e.start, end: e.end}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, errors.New("it has a key that is not a string")
		}
		ks := c.doc.offset(c.data, k)
		ke, ok := scalarEnd(c.data, ks, k, false)
		if !ok {
			ke = ks
		}
		key := k.Value
		if r, ok := c.rename[key]; ok {
			key = r
		}
		var val *jnode
		if c.keep[key] {
			next := e.end
			if i+2 < len(n.Content) {
				next = lineStart(c.data, c.doc.offset(c.data, n.Content[i+2]))
			}
			span, ok := memberSpan(c.data, ks, next, k.Value, yamlValue(v))
			if !ok {
				return nil, fmt.Errorf("the exact lines of its %s cannot be found", k.Value)
			}
			val = c.node(v, false)
			val.start, val.end = span[0], span[1]
		} else {
			val = c.node(v, false)
		}
		obj.members = append(obj.members, jmember{key: key, keyStart: ks, keyEnd: ke, val: val})
	}
	return &jmember{key: name, keyStart: e.start, keyEnd: e.start, val: obj}, nil
}

// yamlEntries returns the servers of a YAML file: Continue's list under
// top (each named by its "name"), or Goose's mapping of ids.
func (p *parsed) yamlEntries() ([]*source, error) {
	d := p.yaml
	if d == nil || d.root == nil {
		return nil, nil
	}
	sp := p.spec
	var list *yaml.Node
	for i := 0; i+1 < len(d.root.Content); i += 2 {
		if d.root.Content[i].Value == sp.top {
			list = d.root.Content[i+1]
		}
	}
	if list == nil || list.Kind == yaml.ScalarNode && list.Tag == "!!null" {
		return nil, nil
	}
	if why := plainYAML(&yaml.Node{Kind: list.Kind, Anchor: list.Anchor, Style: list.Style, Tag: list.Tag}); why != "" || list.Kind == yaml.AliasNode {
		if list.Kind == yaml.AliasNode {
			why = "it uses a YAML alias (*name)"
		}
		return nil, d.errorf(p.data, d.offset(p.data, list), "%s: %s, which Gatehouse does not edit", sp.top, strings.TrimPrefix(why, "it uses "))
	}
	type item struct {
		name     string
		key, val *yaml.Node
	}
	var items []item
	switch {
	case sp.yamlList && list.Kind == yaml.SequenceNode:
		for i, v := range list.Content {
			name := ""
			if v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					if v.Content[j].Value == "name" && v.Content[j+1].Kind == yaml.ScalarNode && v.Content[j+1].Tag == "!!str" {
						name = v.Content[j+1].Value
					}
				}
			}
			if name == "" {
				name = fmt.Sprintf("#%d", i+1)
			}
			items = append(items, item{name: name, val: v})
		}
	case !sp.yamlList && list.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(list.Content); i += 2 {
			items = append(items, item{name: list.Content[i].Value, key: list.Content[i], val: list.Content[i+1]})
		}
	default:
		want := "a mapping"
		if sp.yamlList {
			want = "a list"
		}
		return nil, d.errorf(p.data, d.offset(p.data, list), "%s is not %s", sp.top, want)
	}
	count := map[string]int{}
	for _, it := range items {
		count[it.name]++
	}
	keep := map[string]bool{}
	for _, k := range sp.keep {
		keep[k] = true
	}
	conv := &yamlConv{data: p.data, doc: d, keep: keep, rename: sp.yamlRename}
	var out []*source
	for _, it := range items {
		s := &source{name: it.name, locator: []string{sp.top, it.name}}
		out = append(out, s)
		switch {
		case list.Style&yaml.FlowStyle != 0:
			s.unsupported("%s is written in flow style ([...] or {...}), which Gatehouse does not edit", sp.top)
			continue
		case strings.HasPrefix(it.name, "#") && sp.yamlList:
			s.unsupported("it has no name")
			continue
		case count[it.name] > 1:
			s.unsupported("two entries are called %q", it.name)
			continue
		}
		if why := plainYAML(it.val); why != "" {
			s.unsupported("%s, which Gatehouse does not edit", why)
			continue
		}
		switch {
		case it.val.Kind != yaml.MappingNode:
			s.unsupported("the entry is not a mapping")
			continue
		case it.val.Style&yaml.FlowStyle != 0:
			s.unsupported("it is written in flow style ({...}), which Gatehouse does not edit")
			continue
		}
		if it.key != nil {
			if why := plainYAML(it.key); why != "" {
				s.unsupported("%s, which Gatehouse does not edit", why)
				continue
			}
		}
		if aliasesInto(d.root, it.val) {
			s.unsupported("another part of the file refers to it (a YAML alias)")
			continue
		}
		var want any
		if it.key != nil {
			want = map[string]any{it.name: yamlValue(it.val)}
		} else {
			want = []any{yamlValue(it.val)}
		}
		e, err := d.entrySpan(p.data, it.key, it.val, want)
		if err != nil {
			s.unsupported("%v", err)
			continue
		}
		m, err := conv.entry(it.name, it.val, e)
		if err != nil {
			s.unsupported("%v", err)
			continue
		}
		if sp.yamlEntry != nil {
			if state, why := sp.yamlEntry(m); state != "" {
				s.state, s.reason = state, why
				continue
			}
		}
		*s = *p.jsonEntry(m, s.locator).checkReferences()
		s.yaml = e
		if s.state == "" && s.byHand == "" {
			if err := s.exactSpans(); err != nil {
				s.unsupported("%v", err)
			}
		}
	}
	return out, nil
}

// exactSpans checks that every value that may move to the keychain has
// its token found in the file: else the record would keep it.
func (s *source) exactSpans() error {
	bad := func(sp [2]int) bool { return sp[1] <= sp[0] }
	for _, sp := range s.argSpans {
		if bad(sp) {
			return errors.New("an argument is written over several lines (a block or folded scalar), which Gatehouse does not edit")
		}
	}
	for _, v := range append(append([]kv(nil), s.env...), s.headers...) {
		if bad(v.span) {
			return fmt.Errorf("%s is written over several lines (a block or folded scalar), which Gatehouse does not edit", v.k)
		}
	}
	if s.transport == "http" && s.wrapper == "" && bad(s.urlSpan) {
		return errors.New("its URL is written over several lines, which Gatehouse does not edit")
	}
	return nil
}

// yamlRest is what a YAML file means without the entries at locators.
func yamlRest(sp *spec, data []byte, locators [][]string) (any, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	drop := map[string]bool{}
	for _, l := range locators {
		drop[l[len(l)-1]] = true
	}
	rest := func(servers any) any {
		switch list := servers.(type) {
		case []any:
			var kept []any
			for _, it := range list {
				var name any
				switch m := it.(type) {
				case map[string]any:
					name = m["name"]
				case map[any]any:
					name = m["name"]
				}
				if n, ok := name.(string); ok && drop[n] {
					continue
				}
				kept = append(kept, it)
			}
			return kept
		case map[string]any:
			for k := range drop {
				delete(list, k)
			}
		case map[any]any:
			for k := range drop {
				delete(list, k)
			}
		}
		return servers
	}
	switch v := doc.(type) {
	case map[string]any:
		v[sp.top] = rest(v[sp.top])
	case map[any]any:
		v[sp.top] = rest(v[sp.top])
	}
	return doc, nil
}

// sameYAML reports whether two YAML texts mean the same.
func sameYAML(a, b []byte) bool {
	var x, y any
	if yaml.Unmarshal(a, &x) != nil || yaml.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// yamlScalar writes s as a YAML scalar: plain where that reads back as the
// same string, else double-quoted.
func yamlScalar(s string) string {
	if yamlPlainRE.MatchString(s) && s != "-" {
		var v any
		if yaml.Unmarshal([]byte(s), &v) == nil && v == s {
			return s
		}
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0xfeff || r == 0xfffe || r == 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

var yamlPlainRE = regexp.MustCompile(`^[A-Za-z0-9_./~+][A-Za-z0-9_./~+@=-]*$|^-[A-Za-z0-9_][A-Za-z0-9_./~+@=-]*$|^--[A-Za-z0-9_][A-Za-z0-9_./~+@=-]*$`)

// renderYAML writes the governed entry that replaces src: its header (the
// list item's dash, or the key's line) as it was, then fields at the
// column of the entry's keys.
func renderYAML(p *parsed, src *source, fields []jfield) []byte {
	e := src.yaml
	nl := newline(p.data)
	rev := map[string]string{}
	for k, v := range p.spec.yamlRename {
		rev[v] = k
	}
	if e.dash {
		// A list item starts with its name.
		if i := slices.IndexFunc(fields, func(f jfield) bool { return f.key == "name" && f.raw != nil }); i > 0 {
			fields = append(append([]jfield{fields[i]}, fields[:i]...), fields[i+1:]...)
		}
	}
	pad := strings.Repeat(" ", e.column)
	var b strings.Builder
	b.Write(p.data[e.start:e.header])
	for i, f := range fields {
		if i > 0 {
			b.WriteString(nl + pad)
		} else if !e.dash {
			b.WriteString(pad)
		}
		if f.raw != nil {
			b.Write(f.raw)
			continue
		}
		key := f.key
		if k, ok := rev[key]; ok {
			key = k
		}
		b.WriteString(yamlKey(key) + ":")
		switch {
		case f.str != nil:
			b.WriteString(" " + yamlScalar(*f.str))
		case f.list != nil:
			q := make([]string, len(f.list))
			for i, s := range f.list {
				q[i] = yamlScalar(s)
			}
			b.WriteString(" [" + strings.Join(q, ", ") + "]")
		case len(f.obj) == 0:
			b.WriteString(" {}")
		default:
			for _, v := range f.obj {
				b.WriteString(nl + pad + "  " + yamlKey(v.k) + ": " + yamlScalar(v.v))
			}
		}
	}
	if bytes.HasSuffix(p.data[e.start:e.end], []byte("\n")) {
		b.WriteString(nl)
	}
	return []byte(b.String())
}

func yamlKey(k string) string { return yamlScalar(k) }
