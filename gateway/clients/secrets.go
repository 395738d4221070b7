package clients

import (
	"bytes"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// secretWords are the parts of a variable or header name that mark its value
// as a secret: GITHUB_PERSONAL_ACCESS_TOKEN, OPENAI_API_KEY, X-Api-Key,
// Authorization, DB_PASSWORD, GITLAB_PAT, ...
var secretWords = []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "PRIVATE"}

// secretParts are name parts that mark a secret only as a whole word: PAT
// is a token, PATH is not.
var secretParts = []string{"PAT", "PW"}

// notSecretNames end in a secret word but name something else.
var notSecretNames = []string{"KEY_ID", "KEYID", "PUBLIC_KEY", "PUBKEY", "TOKENIZER", "MAX_TOKENS", "TOKEN_LIMIT",
	"AUTH_URL", "AUTH_TYPE", "AUTH_METHOD", "AUTH_MODE", "AUTH_PROVIDER"}

// notSecretSuffixes end names of settings that point at a secret rather
// than hold it: KEY_PATH, CREDENTIALS_FILE, ...
var notSecretSuffixes = []string{"PATH", "FILE", "DIR", "URL", "URI", "ENDPOINT", "HOST", "PORT", "TIMEOUT", "REGION"}

// tokenPrefixes start values that are credentials whatever their name.
var tokenPrefixes = []string{
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", // GitHub
	"glpat-", "gldt-", "glptt-", // GitLab
	"sk-", "sk_live_", "sk_test_", "rk_live_", "rk_test_", // OpenAI, Anthropic, Stripe
	"xoxb-", "xoxp-", "xoxa-", "xoxs-", "xoxe-", "xapp-", // Slack
	"AIza",                 // Google API keys
	"npm_", "hf_", "pypi-", // package registries, Hugging Face
	"ntn_", "secret_", // Notion
	"lin_api_", "shpat_", // Linear, Shopify
	"dop_v1_", "figd_", "SG.", // DigitalOcean, Figma, SendGrid
}

var (
	jwtRE       = regexp.MustCompile(`^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}$`)
	awsKeyRE    = regexp.MustCompile(`^(AKIA|ASIA)[A-Z0-9]{16}$`)
	airtablePAT = regexp.MustCompile(`^pat[A-Za-z0-9]{14}\.[0-9a-f]{64}$`)
)

// looksSecret reports whether the value of variable or header name should
// live in the keychain. marked are the names the user said are secrets.
func looksSecret(name, value string, marked []string) bool {
	for _, m := range marked {
		if strings.EqualFold(m, name) {
			return true
		}
	}
	if value == "" {
		return false
	}
	if secretValue(value) {
		return true
	}
	if !secretName(name) {
		return false
	}
	// A short or boolean-like value under a secret-looking name is a
	// setting (DISABLE_AUTH=1), not a credential; and a secret that short
	// could not be told apart in what a server sends back.
	v := strings.ToLower(strings.TrimSpace(value))
	switch v {
	case "true", "false", "yes", "no", "on", "off", "none", "null", "0", "1":
		return false
	}
	// A path names where a secret is, not the secret.
	if strings.HasPrefix(v, "/") && strings.Count(v, "/") >= 2 || strings.HasPrefix(v, "~/") || len(v) > 2 && v[1] == ':' && (v[2] == '\\' || v[2] == '/') {
		return false
	}
	return len(value) >= 6
}

func secretName(name string) bool {
	n := strings.ToUpper(name)
	for _, ns := range notSecretNames {
		if n == ns || strings.HasSuffix(n, "_"+ns) || strings.HasSuffix(n, "-"+ns) {
			return false
		}
	}
	for _, suf := range notSecretSuffixes {
		if strings.HasSuffix(n, suf) {
			return false
		}
	}
	parts := strings.FieldsFunc(n, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') })
	for _, p := range parts {
		for _, w := range secretParts {
			if p == w {
				return true
			}
		}
		for _, w := range secretWords {
			if strings.Contains(p, w) && !(w == "KEY" && (p == "KEYBOARD" || p == "KEYSPACE" || p == "MONKEY")) &&
				!(w == "AUTH" && (p == "AUTHOR" || p == "AUTHORS")) {
				return true
			}
		}
	}
	return false
}

// secretValue reports whether value has the shape of a known credential.
func secretValue(value string) bool {
	v := strings.TrimSpace(value)
	if after, ok := strings.CutPrefix(v, "Bearer "); ok && len(after) >= 8 {
		return true
	}
	if after, ok := strings.CutPrefix(v, "Basic "); ok && len(after) >= 8 {
		return true
	}
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(v, p) && len(v) >= len(p)+8 && !strings.ContainsAny(v[len(p):], " \t\n/") {
			return true
		}
	}
	return jwtRE.MatchString(v) || awsKeyRE.MatchString(v) || airtablePAT.MatchString(v)
}

// argSecret reports whether a command-line argument holds what looks like a
// credential: governing moves such an argument to the keychain, and the
// proxy puts it back in the server's command line when it starts it.
func argSecret(a string) bool {
	if secretValue(a) {
		return true
	}
	// A connection string or URL with a password in it:
	// postgresql://app:pw@host/db, redis://:pw@host.
	if strings.Contains(a, "://") && urlSecret(a) {
		return true
	}
	// --token=..., API_KEY=...
	if k, v, ok := strings.Cut(a, "="); ok {
		return looksSecret(strings.TrimLeft(k, "-"), v, nil)
	}
	return false
}

// maybeSecret reports whether an argument that does not look like a
// credential by its form might be one all the same: a long word of
// letters and digits that looks random (an API key of an unknown format).
// Governing says so, and moves it only when asked.
func maybeSecret(a string) bool {
	if len(a) < 20 || strings.HasPrefix(a, "-") {
		return false
	}
	var lower, upper, digit bool
	for _, r := range a {
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		case r == '_' || r == '-' || r == '.' || r == '+' || r == '=':
		default:
			return false // a path, a URL, a sentence
		}
	}
	if !digit || !lower && !upper {
		return false
	}
	// Words and version strings repeat letters; a random key rarely does.
	seen := map[rune]bool{}
	for _, r := range a {
		seen[r] = true
	}
	return len(seen) >= 12 && !strings.Contains(a, "..")
}

// secretArgs returns the indexes of the arguments of a command line that
// hold what looks like a credential: each that does by itself (argSecret),
// and the value after a flag that names one (--password X, -p X is not
// told apart from other short flags and is not counted).
func secretArgs(args []string) []int {
	var out []int
	for i := 0; i < len(args); i++ {
		a := args[i]
		if argSecret(a) {
			out = append(out, i)
			continue
		}
		if name, ok := strings.CutPrefix(a, "--"); ok && !strings.Contains(name, "=") && i+1 < len(args) &&
			!strings.HasPrefix(args[i+1], "-") && looksSecret(name, args[i+1], nil) {
			out = append(out, i+1)
			i++
		}
	}
	return out
}

// urlSecret reports whether a URL carries a credential: a password, or a
// query parameter that looks like one.
func urlSecret(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	for k, vs := range u.Query() {
		for _, v := range vs {
			if looksSecret(k, v, nil) {
				return true
			}
		}
	}
	return false
}

// maskURL returns raw with its password and secret-looking query values
// masked.
func maskURL(raw string) string {
	if !urlSecret(raw) {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	for k, vs := range q {
		for i, v := range vs {
			if looksSecret(k, v, nil) {
				vs[i] = "xxxxx"
			}
		}
	}
	u.RawQuery = q.Encode()
	return strings.ReplaceAll(u.String(), "xxxxx", "********")
}

// unmovedSecrets lists what looks like a credential in the entries of a
// file, as the file holds them (values of environment variables and
// headers, arguments, URLs with credentials): the backup of the file masks
// them, so that a secret governing does not move (an entry it cannot
// govern, or does not) is not copied into the home folder.
func unmovedSecrets(groups []*group) []string {
	var out []string
	for _, g := range groups {
		for _, src := range g.sources {
			for _, v := range append(slices.Clone(src.env), src.headers...) {
				if looksSecret(v.k, v.v, nil) {
					out = append(out, v.v)
				}
			}
			for _, i := range secretArgs(src.args) {
				out = append(out, src.args[i])
			}
			if src.url != "" && urlSecret(src.url) {
				out = append(out, src.url)
			}
		}
	}
	return out
}

// maskValues returns data with each of values (4 bytes or more) replaced by
// a mask, longest first.
func maskValues(data []byte, values []string) []byte {
	values = slices.Clone(values)
	slices.SortFunc(values, func(a, b string) int { return len(b) - len(a) })
	for _, v := range values {
		if len(v) >= 4 && !reference(v) {
			data = bytes.ReplaceAll(data, []byte(v), []byte("********"))
		}
	}
	return data
}
