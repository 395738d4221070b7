package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
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
			case !samePath(real, s):
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

// windowsPaths is true where paths are read as Windows reads them: drive
// letters, and backslashes as separators.
var windowsPaths = runtime.GOOS == "windows"

// under checks that value is a path inside dir, on the string alone, as
// this machine's OS reads paths.
func under(value, dir string) (verdict, string) {
	return underOn(value, dir, windowsPaths)
}

// underOn is under as Windows reads paths (where absolute paths start with
// a drive letter, "/..." is relative to the current drive, and a backslash
// is a separator) or as Linux and macOS do.
//
// It holds only when the value, byte for byte once cleaned, is the folder or
// a path inside it (a drive letter in any case), and fails only when the
// value is outside it however a file system reads names. A value that is
// inside only when case or Unicode normalization is ignored (the default
// file systems of macOS and Windows do; Linux's, and case-sensitive volumes
// and folders, do not) cannot be checked, nor can any form that a file
// system or a server's path parser may read differently from the string
// (see checkablePath).
func underOn(value, dir string, windows bool) (verdict, string) {
	p, why := checkablePath(value, windows)
	if why != "" {
		return unsure, fmt.Sprintf("cannot be checked against %s: %s", dir, why)
	}
	d, err := cleanUnder(dir)
	if err != nil {
		return unsure, fmt.Sprintf("cannot be checked against %s: the folder %v", dir, err)
	}
	if windows {
		p, d = upperDrive(p), upperDrive(d)
	}
	switch {
	case within(p, d):
		return holds, fmt.Sprintf("%q is under %s", p, dir)
	case within(caseless(p), caseless(d)):
		return unsure, fmt.Sprintf("cannot be checked against %s: %q is inside it only if case and Unicode normalization are ignored, "+
			"which some file systems do and others do not", dir, p)
	}
	return fails, fmt.Sprintf("%q is not under %s", p, dir)
}

// samePath reports whether two paths are one once cleaned, as this
// machine's OS separates them.
func samePath(a, b string) bool {
	if windowsPaths {
		a, b = strings.ReplaceAll(a, `\`, "/"), strings.ReplaceAll(b, `\`, "/")
	}
	return path.Clean(a) == path.Clean(b)
}

// within reports whether the clean path p is the clean folder d or inside it.
func within(p, d string) bool {
	return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
}

// caseless folds what some file system ignores in names: Unicode
// normalization (macOS) and case, in each way a file system folds it
// (upper-casing, as Windows does, maps "ı" and "ſ" to "I" and "S"; full case
// folding maps "ß" to "ss"). Names that differ in it may be one name or two.
func caseless(s string) string {
	s = strings.ToLower(strings.ToUpper(norm.NFC.String(s)))
	return norm.NFC.String(cases.Fold().String(s))
}

// upperDrive puts the drive letter of an absolute Windows path in upper
// case: drive letters are the same in either case.
func upperDrive(p string) string {
	if len(p) >= 2 && p[1] == ':' {
		return strings.ToUpper(p[:1]) + p[1:]
	}
	return p
}

// percentEncoded finds an escape that a server decoding URLs reads as ".",
// "/" or "\".
var percentEncoded = regexp.MustCompile(`(?i)%(2e|2f|5c)`)

// shortName finds what a Windows 8.3 short name ("PROGRA~1") holds.
var shortName = regexp.MustCompile(`~[0-9]`)

// windowsDevices are the names Windows opens as devices, in any folder and
// with any extension.
var windowsDevices = map[string]bool{
	"CON": true, "PRN": true, "AUX": true, "NUL": true, "CONIN$": true, "CONOUT$": true,
	"COM0": true, "COM1": true, "COM2": true, "COM3": true, "COM4": true, "COM5": true, "COM6": true, "COM7": true, "COM8": true, "COM9": true,
	"COM¹": true, "COM²": true, "COM³": true,
	"LPT0": true, "LPT1": true, "LPT2": true, "LPT3": true, "LPT4": true, "LPT5": true, "LPT6": true, "LPT7": true, "LPT8": true, "LPT9": true,
	"LPT¹": true, "LPT²": true, "LPT³": true,
}

// bestFit are characters that Windows turns into a separator when a program
// passes a path through a code page ("best fit"), beyond those whose
// compatibility form is one (checked with NFKC).
var bestFit = map[rune]bool{
	'\u2215': true, // ∕ division slash
	'\u2044': true, // ⁄ fraction slash
	'\u29f5': true, // ⧵ reverse solidus operator
	'\u00a5': true, // ¥, a backslash in Japanese code pages
	'\u20a9': true, // ₩, a backslash in Korean code pages
}

// checkablePath returns value as a clean, slash-separated path, or why it
// cannot be checked as a string: a form the server may read as another
// path than the one the string names.
//
// Everywhere: a ".." element, a NUL byte, a leading "~" (a shell or server
// may expand it), a network or device path ("//..."), a path that is not
// absolute, and "%2e", "%2f" or "%5c" (a server that decodes URLs reads
// ".", "/" or "\").
//
// On Linux and macOS, a backslash: part of a name to the local file system,
// but a separator to a server that parses Windows paths, or runs on
// Windows.
//
// On Windows, where both slashes separate: a name ending in a dot or a
// space (Windows drops them: "proj." is "proj"), a colon after the drive
// (an alternate data stream: "proj::$INDEX_ALLOCATION" is the folder
// "proj"), a "~" and a digit (a short name: "PROGRA~1" is "Program Files"),
// a device name ("NUL", "COM1.txt"), and characters that become a slash, a
// backslash, a dot or a colon when a program passes the path through a code
// page ("／", "＼", "¥").
func checkablePath(value string, windows bool) (string, string) {
	s := value
	if windows {
		s = strings.ReplaceAll(s, `\`, "/")
	} else if strings.Contains(s, `\`) {
		return "", "it holds a backslash, part of a name here but a separator to Windows and to servers that read Windows paths"
	}
	segs := strings.Split(s, "/")
	if slices.Contains(segs, "..") {
		return "", `it has a ".." element`
	}
	switch {
	case strings.ContainsRune(s, 0):
		return "", "it holds a NUL byte"
	case strings.HasPrefix(s, "~"):
		return "", "it starts with ~, which the server may expand"
	case strings.HasPrefix(s, "//"):
		return "", "it is a network or device path"
	case windows && (!isAbs(s) || strings.HasPrefix(s, "/")), !windows && !strings.HasPrefix(s, "/"):
		return "", "it is not an absolute path"
	}
	if esc := percentEncoded.FindString(s); esc != "" {
		return "", fmt.Sprintf("it holds %s, which a server that decodes URLs reads as %q", esc, decodeEscape(esc))
	}
	if !windows {
		return path.Clean(s), ""
	}
	for _, seg := range segs[1:] { // segs[0] is the drive
		if seg == "" || seg == "." {
			continue
		}
		base, _, _ := strings.Cut(strings.ToUpper(seg), ".")
		switch {
		case strings.TrimRight(seg, ". ") != seg:
			return "", fmt.Sprintf("its name %q ends in a dot or a space, which Windows drops", seg)
		case strings.Contains(seg, ":"):
			return "", fmt.Sprintf("its name %q holds a colon, which names a stream of a file or folder", seg)
		case shortName.MatchString(seg):
			return "", fmt.Sprintf("its name %q may be a short name, another name of a file or folder", seg)
		case windowsDevices[strings.TrimRight(base, " ")]:
			return "", fmt.Sprintf("its name %q names a device", seg)
		}
	}
	for _, r := range s {
		if r >= utf8.RuneSelf && (bestFit[r] || strings.ContainsAny(norm.NFKC.String(string(r)), `/\.:`)) {
			return "", fmt.Sprintf("it holds %q, which Windows may read as a separator, a dot or a colon", r)
		}
	}
	return path.Clean(s), ""
}

// decodeEscape returns what a percent escape found by percentEncoded stands
// for.
func decodeEscape(esc string) string {
	switch strings.ToLower(esc) {
	case "%2e":
		return "."
	case "%2f":
		return "/"
	}
	return `\`
}
