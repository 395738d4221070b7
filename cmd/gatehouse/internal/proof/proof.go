// Package proof shows, in runs anyone can repeat, that Gatehouse keeps its
// promises under attack and under faults: `gatehouse eval` runs [Eval], an
// adversarial evaluation, and `gatehouse eval --faults` runs [Faults], fault
// injection. Both exit non-zero when a promise slips, and make test runs
// both.
//
// # Real attacks on real parts
//
// Every case is an attack on the real gatehouse binary: a [Lab] is a
// temporary home folder in which servers are registered with `gatehouse
// server add`, rules set with `gatehouse policy set`, proxies run as
// `gatehouse proxy NAME` processes that a [Session] talks raw JSON-RPC to, and
// the evidence log is read back with `gatehouse export` and checked with
// `gatehouse verify`. The server behind each proxy is the adversary
// (package [adversary]), which misbehaves on request and records every call
// it runs, so that what ran can be compared with what the log says.
//
// The proxies need a keychain for the log's signing key. On Linux the
// evaluation starts one of its own ([OpenKeychain]: a private D-Bus session
// and gnome-keyring in a temporary folder), which the fault suite can also
// kill; elsewhere it uses the user's keychain under throw-away service
// names. Without either it cannot run, and says what to install.
//
// # Families
//
// The cases come in families ([Families]):
//
//   - policy bypass: names and arguments crafted to be judged as one call
//     and run as another; approvals raced, replayed or spoofed;
//   - secret leakage: a server's credential sent back raw, encoded, split,
//     in errors, notifications, requests and logs; the evidence searched for
//     it;
//   - evidence tampering: entries edited, deleted, reordered, inserted,
//     re-signed, truncated, keys swapped, in a bundle and in the database;
//   - protocol abuse: malformed and oversized messages, floods, a server
//     that forges answers, lies about its tools, changes them, stalls or
//     crashes;
//   - honest disclosure: every refusal says it is Gatehouse's, and why;
//   - containment: what a server can do beyond what it is asked
//     (confinement), servers held until reviewed (quarantine), rules that
//     only observe (shadow mode).
//
// After every case, whatever it attacked, the lab is audited ([Lab.Audit]): its
// log exports and verifies, and every call the server ran has a receipt that
// allowed it, with the arguments it ran with; and every proxy it ran wrote
// nothing but JSON-RPC to the client's stdout.
//
// # Faults
//
// [Faults] kills proxies with SIGKILL at random points across thousands of
// calls, crashes the server mid-call, locks the database, fills the disk
// (the proxy's file size limit), and makes the keychain and the approver
// disappear. After
// each: every call the server ran has its receipt, the log verifies, and
// the next call works or fails clearly, saying Gatehouse refused it.
//
// docs/security.md maps each of Gatehouse's claims to the cases that cover
// it.
package proof

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// A Family groups cases by what they attack.
type Family string

// Families.
const (
	PolicyBypass      Family = "policy bypass"
	SecretLeakage     Family = "secret leakage"
	EvidenceTampering Family = "evidence tampering"
	ProtocolAbuse     Family = "protocol abuse"
	HonestDisclosure  Family = "honest disclosure"
	Containment       Family = "containment"
	FaultInjection    Family = "faults"
)

// Families are the evaluation's families, in the order they run.
var Families = []Family{PolicyBypass, SecretLeakage, EvidenceTampering, ProtocolAbuse, HonestDisclosure, Containment}

// A Case is one attack (or fault) and what must hold against it.
type Case struct {
	Family Family
	Name   string // short and unique: "deny rule, exact name"
	Claim  string // what holding shows
	// Run attacks; nil means the claim held. An error wrapping
	// [ErrSkip] skips the case, saying why.
	Run func(ctx context.Context, t *T) error
}

// ErrSkip skips a case that cannot run here (wrap it with the reason).
var ErrSkip = errors.New("skipped")

// Status is how a case ended.
type Status string

// Statuses.
const (
	Held    Status = "held"
	Slipped Status = "SLIPPED"
	Skipped Status = "skipped"
)

// A Result is one case's outcome.
type Result struct {
	Family   Family        `json:"family"`
	Name     string        `json:"name"`
	Claim    string        `json:"claim"`
	Status   Status        `json:"status"`
	Detail   string        `json:"detail,omitempty"` // why it slipped or was skipped
	Note     string        `json:"note,omitempty"`   // what a case that held did
	Duration time.Duration `json:"duration_ns"`
}

// A Report is the results of a run.
type Report struct {
	Title    string   `json:"title"`
	Keychain string   `json:"keychain"`
	Results  []Result `json:"results"`
}

// OK reports whether no case slipped.
func (r *Report) OK() bool {
	for _, res := range r.Results {
		if res.Status == Slipped {
			return false
		}
	}
	return true
}

// Count returns how many cases ended with status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, res := range r.Results {
		if res.Status == s {
			n++
		}
	}
	return n
}

// WriteText writes the report as a table, families in order, with the
// reason of every slip and skip below it.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	nameW := len("case")
	famW := len("family")
	for _, res := range r.Results {
		nameW = max(nameW, len([]rune(res.Name)))
		famW = max(famW, len(res.Family))
	}
	fmt.Fprintf(&b, "%-*s  %-*s  %-7s  %s\n", famW, "family", nameW, "case", "result", "time")
	fmt.Fprintf(&b, "%s  %s  %s  %s\n", strings.Repeat("─", famW), strings.Repeat("─", nameW), strings.Repeat("─", 7), strings.Repeat("─", 6))
	last := Family("")
	for _, res := range r.Results {
		fam := string(res.Family)
		if res.Family == last {
			fam = ""
		}
		last = res.Family
		pad := nameW - len([]rune(res.Name)) + len(res.Name)
		fmt.Fprintf(&b, "%-*s  %-*s  %-7s  %5.1fs\n", famW, fam, pad, res.Name, res.Status, res.Duration.Seconds())
		for _, text := range []string{res.Note, res.Detail} {
			for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
				if line == "" {
					continue
				}
				fmt.Fprintf(&b, "%-*s      %s\n", famW, "", line)
			}
		}
	}
	fmt.Fprintf(&b, "\n%d cases: %d held, %d slipped, %d skipped\n", len(r.Results), r.Count(Held), r.Count(Slipped), r.Count(Skipped))
	_, err := io.WriteString(w, b.String())
	return err
}

// Config says what a run uses.
type Config struct {
	// Gatehouse is the gatehouse binary the labs run. Required.
	Gatehouse string
	// Keychain holds the labs' signing keys and secrets. Required.
	Keychain *Keychain
	// Match selects cases by "family/name"; nil runs all.
	Match *regexp.Regexp
	// Progress, when not nil, gets a line as each case ends.
	Progress io.Writer
	// Keep leaves the labs' folders for inspection (their path is printed
	// to Progress).
	Keep bool
	// Calls is how many calls the kill -9 fault spreads its kills over;
	// zero means 3000.
	Calls int
	// Seed seeds the kill -9 fault's random kills; zero picks one (the
	// report says which).
	Seed uint64
}

// run runs cases and returns their report.
func run(ctx context.Context, cfg Config, title string, cases []Case) (*Report, error) {
	if cfg.Gatehouse == "" || cfg.Keychain == nil {
		return nil, errors.New("proof: Config needs Gatehouse and Keychain")
	}
	dir, err := os.MkdirTemp("", "gatehouse-eval-")
	if err != nil {
		return nil, err
	}
	if cfg.Keep {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "labs in %s (kept)\n", dir)
		}
	} else {
		defer os.RemoveAll(dir)
	}
	rep := &Report{Title: title, Keychain: cfg.Keychain.Describe}
	for _, c := range cases {
		if cfg.Match != nil && !cfg.Match.MatchString(string(c.Family)+"/"+c.Name) {
			continue
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		t := &T{cfg: cfg, dir: dir, name: c.Name}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		err := t.guard(cctx, c.Run)
		cancel()
		res := Result{Family: c.Family, Name: c.Name, Claim: c.Claim, Duration: time.Since(start), Status: Held, Note: t.note}
		switch {
		case errors.Is(err, ErrSkip):
			res.Status, res.Detail = Skipped, err.Error()
		case err != nil:
			res.Status, res.Detail = Slipped, err.Error()
		}
		rep.Results = append(rep.Results, res)
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "%-7s %s / %s (%.1fs)\n", res.Status, c.Family, c.Name, res.Duration.Seconds())
		}
	}
	return rep, nil
}

// T is a running case: it makes labs and cleans up after them.
type T struct {
	cfg      Config
	dir      string
	name     string
	labs     []*Lab
	note     string
	cleanups []func()
}

// Cleanup registers f to run when the case and its audit are done.
func (t *T) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

// Note records what a case did, for the report.
func (t *T) Note(format string, args ...any) { t.note = fmt.Sprintf(format, args...) }

// guard runs f, then closes the case's labs, and fails the case if any of
// its proxies wrote anything but JSON-RPC to stdout.
func (t *T) guard(ctx context.Context, f func(context.Context, *T) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the case panicked: %v", r)
		}
		var impure []string
		for _, l := range t.labs {
			l.stopProxies()
			if err == nil && !l.NoAudit {
				if aerr := l.Audit(ctx); aerr != nil {
					err = fmt.Errorf("after the attack: %w", aerr)
				}
			}
			l.Close()
			l.mu.Lock()
			for _, s := range l.sessions {
				impure = append(impure, s.Impure()...)
			}
			l.mu.Unlock()
		}
		if len(impure) > 0 && err == nil {
			err = fmt.Errorf("a proxy wrote %d lines that are not JSON-RPC to stdout, the first: %.200q", len(impure), impure[0])
		}
		for i := len(t.cleanups) - 1; i >= 0; i-- {
			t.cleanups[i]()
		}
	}()
	return f(ctx, t)
}

// Lab makes a new lab for the case.
func (t *T) Lab() (*Lab, error) {
	l, err := NewLab(t.cfg.Gatehouse, t.dir, t.cfg.Keychain)
	if err != nil {
		return nil, err
	}
	t.labs = append(t.labs, l)
	return l, nil
}

// Keychain is the run's keychain.
func (t *T) Keychain() *Keychain { return t.cfg.Keychain }

// Server names the labs use.
const (
	serverName = "adv" // the adversary, read as JSON.parse reads
)

// stdLab makes a lab with the adversary registered as "adv" (with
// serverFlags) and the standard rules: read_file and echo allowed,
// delete_file denied; write_file asks (the default for its risk).
func (t *T) stdLab(ctx context.Context, serverFlags ...string) (*Lab, error) {
	l, err := t.Lab()
	if err != nil {
		return nil, err
	}
	if err := l.AddServer(ctx, serverName, "", nil, serverFlags...); err != nil {
		return nil, err
	}
	if _, _, err := l.Gatehouse(ctx, stdPolicy, "policy", "import", "-"); err != nil {
		return nil, err
	}
	return l, nil
}

// stdSession is stdLab with an MCP session through a proxy of its server.
func (t *T) stdSession(ctx context.Context) (*Lab, *Session, error) {
	l, err := t.stdLab(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := l.Connect(ctx, serverName)
	if err != nil {
		return nil, nil, err
	}
	return l, s, nil
}

// stdPolicy is the standard lab's policy: the built-in defaults, and three
// rules.
const stdPolicy = `default = "APPROVAL_REQUIRED"

[defaults]
low = "ALLOW"
medium = "APPROVAL_REQUIRED"
high = "APPROVAL_REQUIRED"
critical = "APPROVAL_REQUIRED"

[[rule]]
id = "adv-read"
capability = "mcp.adv.read_file"
decision = "ALLOW"

[[rule]]
id = "adv-echo"
capability = "mcp.adv.echo"
decision = "ALLOW"

[[rule]]
id = "adv-delete"
capability = "mcp.adv.delete_file"
decision = "DENY"
`

// refusal checks that res is a refusal as the model must read it: an
// isError result that names Gatehouse, and holds each of want.
func refusal(what string, res ToolResult, want ...string) error {
	if !res.IsError {
		return fmt.Errorf("%s: the answer is not an error result: %.300s", what, res.Raw)
	}
	if !strings.Contains(res.Text, "Gatehouse") {
		return fmt.Errorf("%s: the refusal does not say it is Gatehouse's: %q", what, res.Text)
	}
	for _, w := range want {
		if !strings.Contains(res.Text, w) {
			return fmt.Errorf("%s: the refusal does not say %q: %q", what, w, res.Text)
		}
	}
	return nil
}

// receiptIn returns the receipt id a refusal names.
var receiptRE = regexp.MustCompile(`\br-[a-z2-7]{19}\b`)

// notRun fails if the adversary ran tool with marker in its arguments.
func notRun(l *Lab, tool, marker string) error {
	ran, err := l.RanWith(tool, marker)
	if err != nil {
		return err
	}
	if ran {
		return fmt.Errorf("the server ran %s with %q: the call got through", tool, marker)
	}
	return nil
}

// wasRun fails unless the adversary ran tool with marker in its arguments.
func wasRun(l *Lab, tool, marker string) error {
	ran, err := l.RanWith(tool, marker)
	if err != nil {
		return err
	}
	if !ran {
		return fmt.Errorf("the server never ran %s with %q, which should have run", tool, marker)
	}
	return nil
}

// mustJSON encodes v.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
