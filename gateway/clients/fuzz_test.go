package clients

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

func addFixtures(f *testing.F, ext string) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*"+ext))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// The JSON scanner agrees with encoding/json on what strict JSON is and
// what it means, and every span it records holds the value it says.
func FuzzJSONC(f *testing.F) {
	addFixtures(f, ".json")
	f.Add([]byte(`{"a": [1, 2.5e3, -0, true, false, null, "\u00e9\ud83d\ude00\n"], "b": {}}`))
	f.Add([]byte("{\"a\": 1, // c\n /* d */ \"b\": [1,],}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, serr := parseJSON(data, false)
		if !bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
			if valid := json.Valid(data); valid != (serr == nil) {
				t.Fatalf("strict parse error %v, encoding/json valid %v", serr, valid)
			}
		}
		loose, lerr := parseJSON(data, true)
		if serr == nil && lerr != nil {
			t.Fatalf("JSONC refuses what strict JSON accepts: %v", lerr)
		}
		for _, err := range []error{serr, lerr} {
			if se, ok := err.(*SyntaxError); ok {
				if se.Line < 1 || se.Column < 1 || se.Offset < 0 || se.Offset > len(data) {
					t.Fatalf("error position %+v", se)
				}
			}
		}
		if serr == nil && utf8.Valid(data) {
			var want any
			var tooBig *json.UnmarshalTypeError // a number beyond float64: encoding/json cannot say
			switch err := json.Unmarshal(data, &want); {
			case errors.As(err, &tooBig):
			case err != nil:
				t.Fatal(err)
			default:
				if got := strict.plain(data); !reflect.DeepEqual(got, want) {
					t.Fatalf("plain() = %v, encoding/json = %v", got, want)
				}
			}
		}
		if lerr == nil {
			checkSpans(t, data, loose)
		}
	})
}

// checkSpans: each value's bytes parse alone to the same value, and each
// key's bytes to its name.
func checkSpans(t *testing.T, data []byte, n *jnode) {
	t.Helper()
	if n.start < 0 || n.end > len(data) || n.start >= n.end {
		t.Fatalf("span [%d, %d) of %d bytes", n.start, n.end, len(data))
	}
	alone, err := parseJSON(data[n.start:n.end], true)
	if err != nil {
		t.Fatalf("span %q does not parse alone: %v", data[n.start:n.end], err)
	}
	if !reflect.DeepEqual(alone.plain(data[n.start:n.end]), n.plain(data)) {
		t.Fatalf("span %q means something else alone", data[n.start:n.end])
	}
	for _, m := range n.members {
		k, err := parseJSON(data[m.keyStart:m.keyEnd], false)
		if err != nil || k.kind != jsonString || k.str != m.key {
			t.Fatalf("key span %q is not %q", data[m.keyStart:m.keyEnd], m.key)
		}
		checkSpans(t, data, m.val)
	}
	for _, e := range n.elems {
		checkSpans(t, data, e)
	}
}

// The TOML scanner finds every table and key of what the TOML parser
// accepts, with the same string values, and each [mcp_servers.NAME]
// entry's bytes decode alone to that entry.
func FuzzTOMLTables(f *testing.F) {
	addFixtures(f, ".toml")
	f.Add([]byte("a = 1\n[mcp_servers.x]\ncommand = \"c\"\nargs = [\n 'a', # c\n \"\"\"b\nc\"\"\",\n]\n[mcp_servers.x.env]\nK = '''v'''\n"))
	f.Add([]byte("[mcp_servers.\"a b\"]\nurl = \"u\"\nhttp_headers = { \"X-Key\" = \"\\u00e9\\t\" }\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]any
		_, terr := toml.Decode(string(data), &want)
		doc, err := scanTOML(data)
		if terr != nil || !utf8.Valid(data) {
			// Only valid files are scanned for real; it must not panic on
			// the rest. TOML is UTF-8: the parser takes a lone UTF-16 byte
			// order mark (\xff\xfe) for an empty file, the scanner refuses it.
			return
		}
		if err != nil {
			t.Fatalf("the TOML parser accepts it, the scanner does not: %v", err)
		}
		for _, tb := range doc.tables {
			if tb.array || tb.start > tb.headerEnd || tb.headerEnd > tb.end || tb.end > len(data) {
				continue
			}
			table, ok := lookupTOML(want, tb.path)
			if !ok {
				continue // under an array of tables
			}
			count := map[string]int{}
			for _, kv := range tb.kvs {
				count[strings.Join(kv.key, "\x00")]++
			}
			for _, kv := range tb.kvs {
				if kv.val.kind != tomlString || count[strings.Join(kv.key, "\x00")] > 1 {
					continue // a key given twice is not TOML, whatever a parser makes of it
				}
				got, ok := lookupTOML(table, kv.key)
				if !ok {
					t.Fatalf("key %v of table %v not found in %v", kv.key, tb.path, table)
				}
				if got != kv.val.str {
					t.Fatalf("%v.%v = %q, the TOML parser says %q", tb.path, kv.key, kv.val.str, got)
				}
				if kv.start > kv.val.start || kv.val.end > kv.end {
					t.Fatalf("value span outside its line")
				}
			}
		}
		p := &parsed{spec: specs[Codex], data: data, toml: doc}
		servers, _ := want["mcp_servers"].(map[string]any)
		for _, s := range p.tomlEntries() {
			if s.state != "" {
				continue
			}
			var alone map[string]any
			if _, err := toml.Decode(string(data[s.span[0]:s.span[1]]), &alone); err != nil {
				t.Fatalf("entry %s's bytes %q do not decode alone: %v", s.name, data[s.span[0]:s.span[1]], err)
			}
			got, _ := lookupTOML(alone, []string{"mcp_servers", s.name})
			if !reflect.DeepEqual(got, servers[s.name]) {
				t.Fatalf("entry %s alone = %v, in the file = %v", s.name, got, servers[s.name])
			}
			if !bytes.HasPrefix(bytes.TrimLeft(data[s.span[0]:s.span[1]], " \t\xef\xbb\xbf"), []byte("[")) {
				t.Fatalf("entry %s does not start at its header", s.name)
			}
		}
	})
}

func lookupTOML(v any, path []string) (any, bool) {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// The YAML locator never panics, and every entry it offers to govern can
// be rewritten and put back: the rewritten file reads back with the entry
// where it was and nothing else changed, and putting the original lines
// back gives the file byte for byte.
func FuzzYAMLEntries(f *testing.F) {
	addFixtures(f, ".yaml")
	f.Add([]byte("mcpServers:\n- name: a\n  command: x\n  args: [\"-y\", 'b c']\n  env: {K: v}\n"))
	f.Add([]byte("extensions:\n  x:\n    type: stdio\n    cmd: npx\n    envs:\n      T: |\n        multi\n    enabled: true # c\n"))
	f.Add([]byte("extensions:\r\n  a: &x\r\n    cmd: y\r\n  b: *x\r\n---\r\nother: 1\r\n"))
	m := &Manager{exe: "/usr/local/bin/gatehouse"}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, sp := range []*spec{specs[Continue], specs[Goose]} {
			p, err := parseFile(sp, "config.yaml", data)
			if err != nil {
				if _, ok := err.(*SyntaxError); !ok {
					t.Fatalf("error %T %v, want a *SyntaxError", err, err)
				}
				continue
			}
			srcs, err := p.yamlEntries()
			if err != nil {
				continue
			}
			for _, s := range srcs {
				if s.state != "" || s.byHand != "" {
					continue
				}
				written := renderYAML(p, s, m.jsonFields(sp, p, s, "server", nil))
				nb, err := applyEdits(data, []edit{{start: s.span[0], end: s.span[1], text: written}})
				if err != nil {
					t.Fatal(err)
				}
				np, err := parseFile(sp, "config.yaml", nb)
				if err != nil {
					t.Fatalf("entry %s rewritten does not parse: %v\n%s", s.name, err, nb)
				}
				got, err := locate(np, s.locator)
				if err != nil || got == nil {
					t.Fatalf("entry %s not found after rewriting: %v\n%s", s.name, err, nb)
				}
				if !bytes.Equal(nb[got.span[0]:got.span[1]], written) {
					t.Fatalf("entry %s reads back as %q, written %q", s.name, nb[got.span[0]:got.span[1]], written)
				}
				a, aerr := yamlRest(sp, data, [][]string{s.locator})
				if aerr != nil {
					continue // governing checks this too, and writes nothing
				}
				b, berr := yamlRest(sp, nb, [][]string{s.locator})
				if berr != nil || !reflect.DeepEqual(a, b) {
					t.Fatalf("rewriting %s changed the rest of the file:\n%s", s.name, nb)
				}
				back, err := applyEdits(nb, []edit{{start: got.span[0], end: got.span[1], text: data[s.span[0]:s.span[1]]}})
				if err != nil || !bytes.Equal(back, data) {
					t.Fatalf("undoing %s does not give the file back", s.name)
				}
			}
		}
	})
}
