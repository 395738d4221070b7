package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/gatehouse-dev/gatehouse/gateway"
)

// A verdict is what a constraint says of a call.
type verdict int

const (
	fails  verdict = iota // the call does not satisfy it
	holds                 // the call satisfies it
	unsure                // it cannot be checked: rules that deny or ask apply, rules that allow do not
)

// args are a call's arguments, read once per decision.
type args struct {
	root    any                          // map[string]any, []any, string, json.Number, bool or nil
	err     error                        // why the arguments cannot be read
	resolve func(string) (string, error) // Call.ResolvePath
}

// readArgs reads a call's arguments with the gateway's one strict reading
// (the one the proxy read the message with): what it cannot read one way
// (duplicate or case-folded keys, invalid UTF-8, ...) cannot be checked.
func readArgs(raw json.RawMessage) *args {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return &args{root: map[string]any{}}
	}
	v, err := gateway.ReadValue(raw)
	if err != nil {
		return &args{err: fmt.Errorf("they are not JSON Gatehouse can read unambiguously: %v", err)}
	}
	return &args{root: v.Interface()}
}

// lookupResult says whether an argument was found.
type lookupResult int

const (
	found lookupResult = iota
	missing
	ambiguous
)

// lookup finds the argument named by arg (a top-level name or a JSON
// pointer). A key found only in another case, or in more than one case, is
// ambiguous: servers written in Go match keys regardless of case.
func (a *args) lookup(arg string) (any, lookupResult, string) {
	segs := []string{arg}
	if strings.HasPrefix(arg, "/") {
		var err error
		if segs, err = splitPointer(arg); err != nil {
			return nil, ambiguous, err.Error()
		}
	}
	v := a.root
	for _, seg := range segs {
		switch node := v.(type) {
		case map[string]any:
			exact, ok := node[seg]
			n := 0
			for k := range node {
				if strings.EqualFold(k, seg) {
					n++
				}
			}
			switch {
			case ok && n == 1:
				v = exact
			case n == 0:
				return nil, missing, ""
			default:
				return nil, ambiguous, fmt.Sprintf("the arguments name %q in another case", seg)
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) || strconv.Itoa(i) != seg {
				return nil, missing, ""
			}
			v = node[i]
		default:
			return nil, missing, ""
		}
	}
	return v, found, ""
}

// splitPointer splits a JSON pointer (RFC 6901) into its unescaped tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" || p[0] != '/' {
		return nil, fmt.Errorf("a JSON pointer starts with /")
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, fmt.Errorf("invalid JSON pointer: ~ must be followed by 0 or 1")
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// check evaluates the constraint on a call's arguments, with a reason.
func (c *ArgConstraint) check(a *args) (verdict, string) {
	if a.err != nil {
		return unsure, fmt.Sprintf("the arguments cannot be checked: %v", a.err)
	}
	v, res, why := a.lookup(c.Arg)
	switch res {
	case missing:
		return fails, fmt.Sprintf("argument %s is missing", c.Arg)
	case ambiguous:
		return unsure, fmt.Sprintf("argument %s cannot be checked: %s", c.Arg, why)
	}
	s, ok := v.(string)
	if !ok {
		return unsure, fmt.Sprintf("argument %s is not a string", c.Arg)
	}
	result, reasons := holds, []string(nil)
	note := func(v verdict, why string) {
		reasons = append(reasons, why)
		switch {
		case v == fails:
			result = fails
		case v == unsure && result == holds:
			result = unsure
		}
	}
	if c.Under != "" {
		v, why := under(s, c.Under)
		if v == holds && a.resolve != nil {
			// The server follows symbolic links; so does the check.
			switch real, err := a.resolve(s); {
			case err != nil:
				v, why = unsure, fmt.Sprintf("%q cannot be checked against %s: %v", s, c.Under, err)
			case real != path.Clean(strings.ReplaceAll(s, `\`, "/")):
				if rv, rwhy := under(real, c.Under); rv != holds {
					v, why = rv, fmt.Sprintf("%q leads to %s", s, rwhy)
				} else {
					why += fmt.Sprintf(", and so is where it leads, %q", real)
				}
			}
		}
		note(v, why)
	}
	if c.Equals != "" {
		if s == c.Equals {
			note(holds, fmt.Sprintf("equals %q", c.Equals))
		} else {
			note(fails, fmt.Sprintf("does not equal %q", c.Equals))
		}
	}
	if c.Matches != "" {
		re, err := regexp.Compile(anchor(c.Matches))
		switch {
		case err != nil:
			note(unsure, fmt.Sprintf("the pattern %q is invalid", c.Matches))
		case re.MatchString(s):
			note(holds, fmt.Sprintf("matches %q", c.Matches))
		default:
			note(fails, fmt.Sprintf("does not match %q", c.Matches))
		}
	}
	return result, fmt.Sprintf("argument %s %s", c.Arg, strings.Join(reasons, ", "))
}

// foldPaths is true where file systems ignore case (and Unicode
// normalization) by default.
var foldPaths = runtime.GOOS == "darwin" || runtime.GOOS == "windows"

// windowsPaths is true where absolute paths start with a drive letter.
var windowsPaths = runtime.GOOS == "windows"

// under checks that value is a path inside dir, on the string alone.
func under(value, dir string) (verdict, string) {
	return underOn(value, dir, windowsPaths, foldPaths)
}

// underOn is under on Windows (where absolute paths start with a drive
// letter, and "/..." is relative to the current drive) or elsewhere, with
// or without ignoring case.
func underOn(value, dir string, windows, fold bool) (verdict, string) {
	s := strings.ReplaceAll(value, `\`, "/")
	for seg := range strings.SplitSeq(s, "/") {
		if seg == ".." {
			return unsure, fmt.Sprintf(`cannot be checked against %s: it has a ".." element`, dir)
		}
	}
	switch {
	case strings.ContainsRune(s, 0):
		return unsure, fmt.Sprintf("cannot be checked against %s: it holds a NUL byte", dir)
	case strings.HasPrefix(s, "~"):
		return unsure, fmt.Sprintf("cannot be checked against %s: it starts with ~, which the server may expand", dir)
	case strings.HasPrefix(s, "//"):
		return unsure, fmt.Sprintf("cannot be checked against %s: it is a network or device path", dir)
	case windows && (!isAbs(s) || strings.HasPrefix(s, "/")), !windows && !strings.HasPrefix(s, "/"):
		return unsure, fmt.Sprintf("cannot be checked against %s: it is not an absolute path", dir)
	}
	d, err := cleanUnder(dir)
	if err != nil {
		return unsure, fmt.Sprintf("cannot be checked against %s: the folder %v", dir, err)
	}
	p := path.Clean(s)
	if fold {
		p, d = strings.ToLower(norm.NFC.String(p)), strings.ToLower(norm.NFC.String(d))
	}
	if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
		return holds, fmt.Sprintf("%q is under %s", p, dir)
	}
	return fails, fmt.Sprintf("%q is not under %s", p, dir)
}
