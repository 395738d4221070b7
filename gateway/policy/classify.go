package policy

import (
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// A verb is a word of a tool name that says what the tool does.
type verb struct {
	risk Risk
	does string
}

// verbs maps the words Classify knows to their risk class.
var verbs = func() map[string]verb {
	m := make(map[string]verb)
	for _, c := range []struct {
		risk  Risk
		does  string
		words string
	}{
		{Low, "reads", "get list read search fetch find describe query show view lookup count inspect browse retrieve"},
		{High, "creates, changes or sends", "create update send write edit add set post move put patch insert upload push merge rename replace modify publish deploy transfer invite grant revoke approve"},
		{Critical, "deletes", "delete remove drop destroy rm del purge erase wipe truncate unlink rmdir"},
		{Critical, "runs code or commands", "exec execute run shell eval bash sh cmd powershell spawn"},
	} {
		for w := range strings.FieldsSeq(c.words) {
			m[w] = verb{c.risk, c.does}
		}
	}
	return m
}()

// connectors join two actions in one name: get_and_delete, read_then_exec.
var connectors = map[string]bool{"and": true, "then": true, "or": true, "also": true, "plus": true}

// Classify returns the risk class of a tool and the reasons for it, in the
// order they were weighed.
//
// The name decides first. Its action (after the last ".", "/" or ":", so
// "files.read" reads) is split into words (snake_case, kebab-case, camelCase);
// the first word of each action ("get_and_delete_all" has two) gives its
// class: get_, list_, read_, search_, fetch_, find_, describe_ ... low;
// create_, update_, send_, write_, edit_, add_, set_, post_, move_ ... high;
// delete_, remove_, drop_, destroy_ ... and exec_, run_, execute_, shell,
// eval ... critical; any other word medium. A word that creates, changes,
// deletes or runs raises the class wherever it appears in the name. A name
// with non-ASCII characters is never low, and is also read with look-alike
// letters mapped to ASCII ("dеlete" with a Cyrillic е reads as delete).
//
// Annotations are hints from the server: they raise the class freely
// (destructiveHint true, unless readOnlyHint is true: at least high;
// readOnlyHint false: at least medium, high unless destructiveHint is false;
// openWorldHint true: at least medium), but lower it only when the server is
// trusted (readOnlyHint true: low). An absent hint is no evidence either way.
func Classify(tool string, ann *Annotations, trusted bool) (Risk, []string) {
	return ClassifyIn(nil, tool, ann, trusted)
}

// ClassifyIn is [Classify] for a tool of a server that matches capability
// pack p (nil: none). A tool the pack names takes the pack's class instead
// of its name's; a tool it does not name is classified by its name.
// Annotations weigh as in Classify either way.
func ClassifyIn(p *Pack, tool string, ann *Annotations, trusted bool) (Risk, []string) {
	var (
		risk    Risk
		reasons []string
		known   bool
	)
	if p != nil {
		var why string
		if risk, why, known = p.classify(tool); known {
			reasons = []string{why}
		}
	}
	if !known {
		risk, reasons = nameRisk(tool)
		if p != nil {
			reasons = append([]string{fmt.Sprintf("pack %s does not name this tool: classified by its name", p.Ref())}, reasons...)
		}
	}
	ascii := isASCII(tool)
	if !ascii && !known {
		if plain := skeleton(tool); plain != tool {
			r, why := nameRisk(plain)
			if r.rank() > risk.rank() {
				risk = r
				reasons = append(reasons, fmt.Sprintf("read with look-alike letters as ASCII, the name is %q: %s", plain, strings.Join(why, "; ")))
			}
		}
	}
	raise := func(min Risk, why string) {
		reasons = append(reasons, fmt.Sprintf("%s: at least %s", why, min))
		if min.rank() > risk.rank() {
			risk = min
		}
	}
	if ann != nil {
		readOnly, destructive, openWorld := ann.ReadOnly, ann.Destructive, ann.OpenWorld
		switch {
		case isTrue(readOnly) && trusted:
			risk = Low
			reasons = append(reasons, "readOnlyHint true from a trusted server: low")
		case isTrue(readOnly):
			reasons = append(reasons, "readOnlyHint true not used: hints from a server you have not trusted only raise risk")
		case isFalse(readOnly) && !isFalse(destructive):
			raise(High, "readOnlyHint false, destructiveHint "+hint(destructive, "absent (MCP default true)"))
		case isFalse(readOnly):
			raise(Medium, "readOnlyHint false, destructiveHint false")
		case isTrue(destructive):
			raise(High, "destructiveHint true")
		}
		if isTrue(openWorld) {
			raise(Medium, "openWorldHint true")
		}
	}
	if !ascii {
		raise(Medium, "the name holds non-ASCII characters")
	}
	return risk, reasons
}

func isTrue(b *bool) bool  { return b != nil && *b }
func isFalse(b *bool) bool { return b != nil && !*b }

func hint(b *bool, absent string) string {
	if b == nil {
		return absent
	}
	return fmt.Sprint(*b)
}

// nameRisk classifies a name by its words alone.
func nameRisk(name string) (Risk, []string) {
	segs := strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '/' || r == ':' })
	var (
		risk    Risk
		reasons []string
		seen    = make(map[string]bool)
	)
	take := func(w string, v verb) {
		if seen[w] {
			return
		}
		seen[w] = true
		reasons = append(reasons, fmt.Sprintf("%q %s: %s", w, v.does, v.risk))
		if v.risk.rank() > risk.rank() {
			risk = v.risk
		}
	}
	if len(segs) > 0 {
		// The first word of each action in the last segment.
		first := true
		for _, w := range splitWords(segs[len(segs)-1]) {
			if connectors[w] {
				first = true
				continue
			}
			if !first {
				continue
			}
			first = false
			if v, ok := verbs[w]; ok {
				take(w, v)
			} else {
				take(w, verb{Medium, "is not a verb Gatehouse knows"})
			}
		}
		// A word that changes or runs anything, anywhere.
		for _, seg := range segs {
			for _, w := range splitWords(seg) {
				if v, ok := verbs[w]; ok && v.risk.rank() >= High.rank() {
					take(w, v)
				}
			}
		}
	}
	if risk == "" {
		risk = Medium
		reasons = append(reasons, "the name has no words: medium")
	}
	return risk, reasons
}

// splitWords splits a name into lower-case words at anything that is not a
// letter or digit, between letters and digits, and at camelCase humps
// ("getHTTPResponse" is get, http, response).
func splitWords(s string) []string {
	rs := []rune(s)
	var words []string
	start := -1
	flush := func(end int) {
		if start >= 0 {
			words = append(words, strings.ToLower(string(rs[start:end])))
			start = -1
		}
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		switch {
		case unicode.IsDigit(r) != unicode.IsDigit(prev),
			unicode.IsUpper(r) && unicode.IsLower(prev),
			unicode.IsUpper(r) && unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return words
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// skeleton maps a name to the ASCII it looks like: compatibility forms
// decomposed (fullwidth letters, ligatures), accents and invisible
// characters dropped, and common Cyrillic and Greek look-alikes replaced.
// It is used only to raise risk, so it may map too much but not too little.
func skeleton(s string) string {
	var b strings.Builder
	for _, r := range norm.NFKD.String(s) {
		if unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf) {
			continue
		}
		if l, ok := confusables[r]; ok {
			r = l
		}
		b.WriteRune(r)
	}
	return b.String()
}

// confusables are letters that look like ASCII ones in common fonts.
var confusables = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c',
	'т': 't', 'у': 'y', 'х': 'x', 'ѕ': 's', 'і': 'i', 'ї': 'i', 'ј': 'j', 'ԁ': 'd', 'ӏ': 'l', 'ԛ': 'q',
	'ԝ': 'w', 'ү': 'y', 'һ': 'h', 'ɡ': 'g', 'ı': 'i',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T',
	'Х': 'X', 'Ү': 'Y', 'Ѕ': 'S', 'І': 'I', 'Ј': 'J', 'Ԁ': 'D', 'Ӏ': 'l',
	// Greek
	'α': 'a', 'ε': 'e', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O',
	'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
}
