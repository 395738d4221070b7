package policy

import (
	"bytes"
	"errors"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		sample,
		string(Default().Format()),
		"",
		"default = \"DENY\"\n",
		"[[rule]]\nid = \"x\"\ncapability = \"mcp.a.*\"\nclient = \"c*\"\ndecision = \"ALLOW\"\nnote = \"a\\tb\\u0001\"\nargs = [{ arg = \"/a/~0b\", under = \"C:\\\\Users\\\\me\\\\.\" }]\n",
		"[[rule]]\nid = \"r\"\nrisk = \"high\"\nclient = \"ci\"\ndecision = \"deny\"\n",
		"rule = [{ id = \"x\", capability = \"mcp.a.b\", decision = \"DENY\" }]\n",
		"[[budget]]\nid = \"b\"\ncapability = \"mcp.gh.create_*\"\nper = \"server\"\ncalls = 20\nwindow = \"1h30m\"\nnote = \"n\"\n",
		"[[budget]]\nid = \"s\"\ncapability = \"mcp.*.*\"\nper = \"Session\"\ncalls = 0\nwindow = \"7d\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			var perr *ParseError
			if !errors.As(err, &perr) {
				t.Fatalf("Parse error %v is not a *ParseError", err)
			}
			return
		}
		text := p.Format()
		q, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(Format(p)) = %v\n%s", err, text)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("Parse(Format(p)) = %+v, want %+v\n%s", q, p, text)
		}
		if again := q.Format(); !bytes.Equal(again, text) {
			t.Fatalf("Format is not stable:\n%s\nthen\n%s", text, again)
		}
		if p.Hash() != q.Hash() {
			t.Fatalf("Hash changed across a round trip")
		}
	})
}

// fuzzPolicy builds a policy from bytes: every 5 bytes are one rule, picked
// from pools of patterns that overlap on purpose.
func fuzzPolicy(spec []byte, defaults byte) *Policy {
	caps := []string{"mcp.*.*", "mcp.s.*", "mcp.s.get_*", "mcp.s.delete_*", "mcp.s.get_x", "mcp.*.get_x", "mcp.s*.*", "mcp.s.*x", "mcp.s.GET_X", ""}
	clients := []string{"", "c", "c*", "*"}
	risks := []Risk{"", Low, Medium, High, Critical}
	args := [][]ArgConstraint{nil, {{Arg: "path", Under: "/a"}}, {{Arg: "/o/b", Equals: "x"}}, {{Arg: "path", Matches: "/a.*"}}, {{Arg: "path", Under: "/a/b"}, {Arg: "mode", Equals: "w"}}}
	decisions := []Decision{Allow, Deny, ApprovalRequired}
	p := &Policy{Default: decisions[int(defaults)%3], Defaults: map[Risk]Decision{}}
	for i, r := range Risks {
		if d := int(defaults>>(2+i)) % 4; d < 3 {
			p.Defaults[r] = decisions[d]
		}
	}
	for i := 0; i+5 <= len(spec) && i < 5*12; i += 5 {
		p.Rules = append(p.Rules, Rule{
			ID:         "r" + string(rune('a'+i/5)),
			Capability: caps[int(spec[i])%len(caps)],
			Client:     clients[int(spec[i+1])%len(clients)],
			Risk:       risks[int(spec[i+2])%len(risks)],
			Args:       args[int(spec[i+3])%len(args)],
			Decision:   decisions[int(spec[i+4])%len(decisions)],
		})
	}
	return p
}

func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 3, 0, 0, 0, 1}, byte(0xff), "s", "delete_x", "c", []byte(`{"path":"/a/b"}`), byte(0))
	f.Add([]byte{4, 1, 0, 0, 0, 5, 0, 0, 0, 1}, byte(0x00), "s", "get_x", "cx", []byte(`{"path":"/a/../b"}`), byte(1))
	f.Add([]byte{6, 2, 3, 1, 2, 9, 1, 4, 2, 1}, byte(0x15), "s1", "GET_X", "", []byte(`{"o":{"b":"x"},"mode":"w"}`), byte(3))
	f.Add([]byte{7, 3, 0, 4, 0, 2, 0, 1, 3, 1}, byte(0x40), "s", "gеt_x", "c", []byte(`{"path":"/a/b/c","mode":"w","Path":"/x"}`), byte(0xfe))
	f.Fuzz(func(t *testing.T, spec []byte, defaults byte, server, tool, client string, raw []byte, flags byte) {
		p := fuzzPolicy(spec, defaults)
		if p.Validate() != nil {
			return
		}
		var ann *Annotations
		if flags&4 != 0 {
			ann = &Annotations{ReadOnly: ptr(flags&8 != 0), Destructive: ptr(flags&16 != 0), OpenWorld: ptr(flags&32 != 0)}
		}
		call := Call{Server: server, Tool: tool, Client: client, Args: raw, Annotations: ann, Known: flags&1 != 0, Trusted: flags&2 != 0}
		res := p.Decide(call)
		if !res.Decision.Valid() || res.Rule == "" || !res.Risk.Valid() || len(res.Explanation) == 0 {
			t.Fatalf("Decide = %+v: want a valid decision, rule, risk and explanation", res)
		}
		if again := p.Decide(call); !reflect.DeepEqual(res, again) {
			t.Fatalf("Decide is not deterministic: %+v then %+v", res, again)
		}
		why := strings.Join(res.Explanation, "\n")

		// The winner's specificity, from the rule or default it names.
		risk, _ := Classify(tool, ann, call.Trusted)
		a := func() *args { return readArgs(raw) }
		var win specificity
		switch {
		case res.Rule == "default":
			win = specificity{tier: tierGlobal}
		case strings.HasPrefix(res.Rule, "default:"):
			win = specificity{tier: tierRisk}
		default:
			r := p.Rule(res.Rule)
			if r == nil {
				t.Fatalf("Decide named rule %q, which the policy does not have", res.Rule)
			}
			var ok bool
			if win, ok, _ = r.match(&call, risk, a); !ok {
				t.Fatalf("Decide chose rule %q, which does not apply:\n%s", res.Rule, why)
			}
		}

		// An unknown tool is allowed only by a rule naming it exactly.
		if !call.Known && res.Decision == Allow && win.tier != tierTool {
			t.Fatalf("unknown tool allowed by %s:\n%s", res.Rule, why)
		}
		// A rule that denies is overridden only by a more specific one.
		for i := range p.Rules {
			r := &p.Rules[i]
			if r.Decision != Deny {
				continue
			}
			if spec, ok, _ := r.match(&call, risk, a); ok && res.Decision != Deny && win.compare(spec) <= 0 {
				t.Fatalf("rule %s denies and applies, but %s (no more specific) decided %s:\n%s", r.ID, res.Rule, res.Decision, why)
			}
		}
	})
}

// FuzzUnder checks that an Under verdict does not depend on how the string
// is read: a value that holds is inside the folder however a file system or
// a server reads it (backslashes as separators, percent escapes decoded,
// trailing dots and spaces dropped on Windows, case and normalization
// ignored), and one that fails is outside it however it is read.
func FuzzUnder(f *testing.F) {
	for _, s := range [][2]string{
		{"/home/me/projects/a", "/home/me/projects"},
		{"/home/u/proj\\evil", "/home/u/proj"},
		{"/home/me/Projects/a", "/home/me/projects"},
		{"/home/me/projects/%2e%2e/x", "/home/me/projects"},
		{"C:\\Users\\me\\projects\\a", "C:/Users/me/projects"},
		{"c:/Windows./System32", "C:/Windows"},
		{"C:/W\u0131ndows/x", "C:/Windows"},
		{"/Users/me/Cafe\u0301/a", "/Users/me/Café"},
	} {
		f.Add(s[0], s[1], false)
		f.Add(s[0], s[1], true)
	}
	f.Fuzz(func(t *testing.T, value, dir string, windows bool) {
		d, err := cleanUnder(dir)
		if err != nil {
			return
		}
		v, why := underOn(value, dir, windows)
		if v == unsure {
			return
		}
		for _, r := range readings(value, windows) {
			if v == holds && slices.Contains(strings.Split(r, "/"), "..") {
				t.Fatalf("underOn(%q, %q, windows=%v) holds (%s), but read as %q it has a \"..\" element", value, dir, windows, why, r)
			}
			p, dd := path.Clean(r), d
			if windows {
				p, dd = upperDrive(p), upperDrive(dd)
			}
			switch {
			case v == holds && !within(p, dd):
				t.Fatalf("underOn(%q, %q, windows=%v) holds (%s), but read as %q it is outside", value, dir, windows, why, p)
			case v == fails && within(caseless(p), caseless(dd)):
				t.Fatalf("underOn(%q, %q, windows=%v) fails (%s), but read as %q it may be inside", value, dir, windows, why, p)
			}
		}
	})
}

// readings returns the ways a file system or a server may read a path, with
// slashes for separators.
func readings(s string, windows bool) []string {
	slashes := func(s string) string { return strings.ReplaceAll(s, `\`, "/") }
	rs := []string{s, slashes(s)} // as given; as a server that reads Windows paths does
	if u, err := url.PathUnescape(s); err == nil {
		rs = append(rs, u, slashes(u))
	}
	if !windows {
		return rs
	}
	for i, r := range rs {
		rs[i] = slashes(r)
	}
	segs := strings.Split(slashes(s), "/")
	for i, seg := range segs {
		if seg != "." && seg != ".." {
			segs[i] = strings.TrimRight(seg, ". ")
		}
	}
	return append(rs, strings.Join(segs, "/"))
}
