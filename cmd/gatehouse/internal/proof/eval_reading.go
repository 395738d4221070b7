package proof

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// The cases of this file hold the proxy to one strict reading of every
// message, in both directions: what it cannot read unambiguously it refuses
// (and says so), what it did not decide it never lets through, and no
// message, however deep, large or late, stops it.

// answerWithin bounds the wait for one answer in these cases: longer than
// any wait of the gate's own, short enough that a case whose answer never
// comes ends soon and says so.
const answerWithin = 15 * time.Second

// roundTripWithin is RoundTrip, waiting at most answerWithin.
func (s *Session) roundTripWithin(ctx context.Context, id, line string) (Message, error) {
	ctx, cancel := context.WithTimeout(ctx, answerWithin)
	defer cancel()
	return s.RoundTrip(ctx, id, line)
}

// dropStray forgets the answers to no known request received so far, so
// that the next awaitStray waits for a new one.
func (s *Session) dropStray() {
	s.mu.Lock()
	s.stray = nil
	s.mu.Unlock()
}

// crashRE finds the lines in which the Go runtime says why a process died.
var crashRE = regexp.MustCompile(`(?m)^(panic: |fatal error: |runtime: goroutine stack exceeds).*$`)

// alive fails if the proxy has exited (or closed its output, and exits
// within 5s), quoting why it died when it says.
func alive(s *Session, after string) error {
	select {
	case <-s.done:
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
	default:
		return nil
	}
	stderr := s.Stderr()
	if why := crashRE.FindAllString(stderr, 2); len(why) > 0 {
		return fmt.Errorf("the proxy died after %s: %s", after, strings.Join(why, "; "))
	}
	return fmt.Errorf("the proxy exited after %s; its stderr ends:\n%s", after, tail(stderr, 1500))
}

// answerOrNull sends line, a request with id ("" for none), and waits for
// its answer: to id, or with id null from a proxy that could not read the
// id.
func (s *Session) answerOrNull(ctx context.Context, id, line string) (Message, error) {
	s.dropStray()
	if err := s.Send(line); err != nil {
		return Message{}, fmt.Errorf("write to the proxy: %w", err)
	}
	key := idKey(json.RawMessage(id))
	var got Message
	found := eventually(ctx, answerWithin, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, m := range s.stray {
			if k := idKey(m.ID); k == "null" || id != "" && k == key {
				got = m
				return true
			}
		}
		return false
	})
	if !found {
		return Message{}, fmt.Errorf("no answer to it (to id %s or null) within %s", cmp.Or(id, "none"), answerWithin)
	}
	return got, nil
}

// reconnect returns s, or, when its proxy has gone, a new session of the
// lab's server in its place, so that each variant meets a live proxy.
func reconnect(ctx context.Context, l *Lab, s *Session) (*Session, error) {
	select {
	case <-s.done:
		return l.Connect(ctx, serverName)
	default:
		return s, nil
	}
}

// variants collects what slipped among the variants of one case.
type variants struct {
	n    int
	errs []error
}

// check counts one variant, and keeps err (when not nil) under its name.
func (v *variants) check(name string, err error) {
	v.n++
	if err != nil {
		v.errs = append(v.errs, fmt.Errorf("%s: %w", name, err))
	}
}

// err says which variants slipped, one a line; nil when none did.
func (v *variants) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d variants slipped:\n%w", len(v.errs), v.n, errors.Join(v.errs...))
}

// isError reports whether m answers a request with an error: a JSON-RPC
// error, or a tool result with isError set.
func isError(m Message) bool { return m.Error != nil || m.Tool().IsError }

// mark puts the variant's marker and the request id into a line template.
func mark(template, marker, id string) string {
	return strings.ReplaceAll(strings.ReplaceAll(template, "MARK", marker), "ID", id)
}

// refusedProbe sends a request (template with ID and MARK), which must be
// answered with an error, and must not make tool run with marker.
func refusedProbe(ctx context.Context, l *Lab, s *Session, template, tool, marker string) error {
	id := fmt.Sprintf("%q", marker)
	m, err := s.roundTripWithin(ctx, id, mark(template, marker, id))
	if err != nil {
		return err
	}
	if err := notRun(l, tool, marker); err != nil {
		return fmt.Errorf("%w (answer: %.200s)", err, m.Raw)
	}
	if !isError(m) {
		return fmt.Errorf("it was not refused: %.200s", m.Raw)
	}
	return nil
}

// idlessCase: a tools/call that names no id is a call all the same.
func idlessCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "a tools/call without an id (lenient server)",
		Claim: "a tools/call sent as a notification is refused with an error (id null) and never runs, on a server that would run it",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx, "--lenient")
			if err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			probes := []struct{ name, line, tool, marker string }{
				{"a denied tool", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/idless-denied"}}}`, "delete_file", "idless-denied"},
				{"an allowed tool", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"message":"idless-allowed"}}}`, "echo", "idless-allowed"},
				{"members in another order", `{"params":{"arguments":{"path":"/eval/idless-order"},"name":"delete_file"},"method":"tools/call","jsonrpc":"2.0"}`, "delete_file", "idless-order"},
				{"id null", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/idless-null"}}}`, "delete_file", "idless-null"},
			}
			var v variants
			for _, p := range probes {
				v.check(p.name, func() error {
					s.dropStray()
					if err := s.Send(p.line); err != nil {
						return err
					}
					m, aerr := s.awaitStray(ctx)
					// The server reads in order: after the next call's answer,
					// it has run the notification if it was given it.
					if err := goesOn(ctx, s, p.name); err != nil {
						return err
					}
					if err := notRun(l, p.tool, p.marker); err != nil {
						return err
					}
					if aerr != nil {
						return errors.New("the client got no error for it")
					}
					if !isError(m) || string(m.ID) != "null" {
						return fmt.Errorf("the client got %.200s, want an error with id null", m.Raw)
					}
					return nil
				}())
			}
			v.check("beside a ping in a batch", func() error {
				wait := s.Expect(`"idless-ping"`)
				if err := s.Send(`[{"jsonrpc":"2.0","id":"idless-ping","method":"ping"},{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/idless-batch"}}}]`); err != nil {
					return err
				}
				wctx, cancel := context.WithTimeout(ctx, answerWithin)
				defer cancel()
				_, perr := wait(wctx)
				if err := goesOn(ctx, s, "an id-less call in a batch"); err != nil {
					return err
				}
				if err := notRun(l, "delete_file", "idless-batch"); err != nil {
					return err
				}
				if perr != nil {
					return fmt.Errorf("the ping beside it: %w", perr)
				}
				return nil
			}())
			return v.err()
		},
	}
}

// invalidMembers are batch members of every invalid kind; MARK is the
// variant's marker. Most carry a tools/call of delete_file, which a server
// that reads them anyway runs.
var invalidMembers = []struct{ name, member string }{
	{"no jsonrpc member", `{"id":"MARK-bad","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
	{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"MARK-bad","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
	{"jsonrpc a number", `{"jsonrpc":2.0,"id":"MARK-bad","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
	{"id true", `{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
	{"id an object", `{"jsonrpc":"2.0","id":{"n":1},"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
	{"id an array", `{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
	{"method with a result", `{"jsonrpc":"2.0","id":"MARK-bad","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}},"result":{}}`},
	{"method with an error", `{"jsonrpc":"2.0","id":"MARK-bad","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}},"error":{"code":-1,"message":"x"}}`},
	{"a batch in the batch", `[{"jsonrpc":"2.0","id":"MARK-bad","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}]`},
	{"a number", `42`},
	{"a string", `"tools/call"`},
	{"null", `null`},
}

// batchCase sends, for each kind of invalid member, a batch of it and the
// requests of others (templates with MARK): every request must be
// answered with an error, and nothing may run.
func batchCase(name, claim string, others ...string) Case {
	return Case{
		Family: ProtocolAbuse, Name: name, Claim: claim,
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx, "--lenient")
			if err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			var v variants
			for i, bad := range invalidMembers {
				marker := fmt.Sprintf("batch-%02d", i)
				v.check(bad.name, func() error {
					members := []string{mark(bad.member, marker, "")}
					var ids []string
					for j, o := range others {
						id := fmt.Sprintf(`"%s-%d"`, marker, j)
						ids = append(ids, id)
						members = append(members, mark(o, marker, id))
					}
					waits := make([]func(context.Context) (Message, error), len(ids))
					for j, id := range ids {
						waits[j] = s.Expect(id)
					}
					if err := s.Send("[" + strings.Join(members, ",") + "]"); err != nil {
						return err
					}
					wctx, cancel := context.WithTimeout(ctx, answerWithin)
					defer cancel()
					var problems []string
					for j, wait := range waits {
						m, err := wait(wctx)
						switch {
						case err != nil:
							problems = append(problems, fmt.Sprintf("request %s got no answer", ids[j]))
						case !isError(m):
							problems = append(problems, fmt.Sprintf("request %s was not refused: %.120s", ids[j], m.Raw))
						}
					}
					// The server reads in order: after the next call's answer,
					// it has run whatever of the batch it was given.
					if err := goesOn(ctx, s, "the batch"); err != nil {
						return err
					}
					runs, err := l.Runs()
					if err != nil {
						return err
					}
					for _, r := range runs {
						if strings.Contains(string(r.Args), marker) {
							problems = append([]string{fmt.Sprintf("the server ran %s(%.80s)", r.Tool, r.Args)}, problems...)
						}
					}
					if len(problems) > 0 {
						return errors.New(strings.Join(problems, "; "))
					}
					return nil
				}())
			}
			return v.err()
		},
	}
}

// methodProbe is a tools/call of delete_file under another method name.
func methodProbe(method string) string {
	b, _ := json.Marshal(method)
	return `{"jsonrpc":"2.0","id":ID,"method":` + string(b) + `,"params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`
}

// methodCase sends tools/call of delete_file under method names a lenient
// server folds to tools/call: each must be refused and none may run.
func methodCase(name string, methods []struct{ name, line string }) Case {
	return Case{
		Family: ProtocolAbuse, Name: name,
		Claim: "a method name that is not exactly MCP's, but that a lenient server takes for tools/call, is refused and runs nothing",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx, "--lenient")
			if err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			var v variants
			for i, m := range methods {
				v.check(m.name, refusedProbe(ctx, l, s, m.line, "delete_file", fmt.Sprintf("method-%02d", i)))
			}
			if err := goesOn(ctx, s, name); err != nil {
				return err
			}
			return v.err()
		},
	}
}

// lookalikeMethods are tools/call written with letters of other scripts
// that look like Latin ones.
var lookalikeMethods = []struct{ name, line string }{
	{"Cyrillic o", methodProbe("t\u043e\u043els/call")},
	{"Cyrillic c and a", methodProbe("tools/\u0441\u0430ll")},
	{"Cyrillic palochka for l", methodProbe("too\u04cfs/ca\u04cf\u04cf")},
	{"Greek tau", methodProbe("\u03c4ools/call")},
	{"Greek omicron and alpha", methodProbe("t\u03bf\u03bfls/c\u03b1ll")},
	{"Cyrillic o and a zero-width space", methodProbe("t\u043eols/\u200bcall")},
	{"Cyrillic o written as a JSON escape", `{"jsonrpc":"2.0","id":ID,"method":"t\u043eols/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
}

// foldedMethods are tools/call in other widths and cases, and with
// invisible characters and spaces.
var foldedMethods = []struct{ name, line string }{
	{"title case", methodProbe("Tools/Call")},
	{"full width", methodProbe("ｔｏｏｌｓ／ｃａｌｌ")},
	{"full width in part", methodProbe("tools/ｃａｌｌ")},
	{"long s", methodProbe("tool\u017f/call")},
	{"zero-width space", methodProbe("tools/\u200bcall")},
	{"zero-width joiner", methodProbe("too\u200dls/call")},
	{"word joiner", methodProbe("tools\u2060/call")},
	{"byte-order mark first", methodProbe("\ufefftools/call")},
	{"soft hyphen", methodProbe("tools/cal\u00adl")},
	{"leading tab", methodProbe("\ttools/call")},
	{"no-break space after", methodProbe("tools/call\u00a0")},
	{"ideographic space after", methodProbe("tools/call\u3000")},
	{"NUL after", methodProbe("tools/call\x00")},
	{"upper case written as a JSON escape", `{"jsonrpc":"2.0","id":ID,"method":"\u0054ools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`},
}

// ambiguousCalls are tools/call whose JSON-RPC or params members are
// repeated, folded (case, ſ) or spelled with escapes, so that a server may
// read another call than the gate does. MARK is what the server would run
// with, if it read the other member; fools names the adversary's parsers
// that do.
var ambiguousCalls = []struct{ name, line, fools string }{
	{"params given twice", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/eval/ok"}},"params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`, "exact go"},
	{"params folded with ſ", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/eval/ok"}},"paramſ":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`, "go"},
	{"method spelled with an escape", `{"jsonrpc":"2.0","id":ID,"method":"ping","m\u0065thod":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/MARK"}}}`, "exact go"},
	{"name spelled with an escape", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"read_file","n\u0061me":"delete_file","arguments":{"path":"/eval/MARK"}}}`, "exact go"},
	{"Arguments alone", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","Arguments":{"message":"MARK"}}}`, "go"},
	{"arguments folded with ſ", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ok"},"argumentſ":{"message":"MARK"}}}`, "go"},
	{"ARGUMENTS after arguments", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ok"},"ARGUMENTS":{"message":"MARK"}}}`, "go"},
	// A reader that takes the first of two (none of the adversary's does).
	{"arguments given twice", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{"message":"MARK"},"arguments":{"message":"ok"}}}`, ""},
	{"arguments spelled with an escape", `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ok"},"\u0061rguments":{"message":"MARK"}}}`, "exact go"},
}

// ambiguousCase sends ambiguousCalls to a server that reads JSON as parser
// does: each must be refused, and no call may run that the gate did not
// allow exactly as it ran.
func ambiguousCase(name, parser string) Case {
	return Case{
		Family: ProtocolAbuse, Name: name,
		Claim: "a call whose members repeat or fold into each other is refused, and no call runs that the gate did not allow exactly as it ran",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx, "--parser", parser)
			if err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			var v variants
			answers := map[string]Message{}
			for i, c := range ambiguousCalls {
				marker := fmt.Sprintf("amb-%s-%02d", parser, i)
				id := fmt.Sprintf("%q", marker)
				m, err := s.roundTripWithin(ctx, id, mark(c.line, marker, id))
				if err != nil {
					v.check(c.name, err)
					continue
				}
				answers[c.name] = m
			}
			ev, err := l.Export(ctx)
			if err != nil {
				return err
			}
			runs, err := l.Runs()
			if err != nil {
				return err
			}
			for i, c := range ambiguousCalls {
				m, ok := answers[c.name]
				if !ok {
					continue
				}
				marker := fmt.Sprintf("amb-%s-%02d", parser, i)
				v.check(c.name, func() error {
					for _, r := range runs {
						if strings.Contains(string(r.Args), marker) && !allowedExactly(ev, r) {
							return fmt.Errorf("the server ran %s(%s), which the gate did not allow as such (answer: %.160s)", r.Tool, r.Args, m.Raw)
						}
					}
					if !isError(m) {
						return fmt.Errorf("it was not refused: %.200s", m.Raw)
					}
					return nil
				}())
			}
			if err := goesOn(ctx, s, name); err != nil {
				return err
			}
			return v.err()
		},
	}
}

// allowedExactly reports whether an ALLOW receipt records run: its tool,
// and its arguments.
func allowedExactly(ev *Evidence, run adversary.Run) bool {
	want := canonicalArgs(run.Args)
	for _, r := range ev.Receipts(run.Tool) {
		if r.Body.Decision == "ALLOW" && canonicalArgs(ev.Args(r.ID)) == want {
			return true
		}
	}
	return false
}

// canonicalArgs is canonical, with no arguments read as {}.
func canonicalArgs(b []byte) string {
	if t := bytes.TrimSpace(b); len(t) == 0 || string(t) == "null" {
		return "{}"
	}
	return canonical(b)
}

// forgedRaceCase: a server that keeps answering ids it was never sent,
// while calls with those ids wait for the gate.
func forgedRaceCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "forged answers racing undecided calls",
		Claim: "while a server floods answers to ids it was never sent, calls with those ids that the gate refuses get only the gate's answer: none of the forged ones lands",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx)
			if err != nil {
				return err
			}
			if err := l.Policy(ctx, "mcp.adv.spray", "ALLOW"); err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			ids := []string{`"race"`, `900007`}
			landed, lost, tries := 0, 0, 0
			var phases, problems []string
			note := func(format string, args ...any) {
				if len(problems) < 6 {
					problems = append(problems, fmt.Sprintf(format, args...))
				}
			}
			// tryAll makes n write_file calls (which ask for approval, and
			// are refused) while the server sprays answers to their ids.
			// A refusal takes milliseconds: a call unanswered after
			// tryWait lost its answer, and after three such the phase
			// stops.
			const tryWait = 5 * time.Second
			tryAll := func(phase string, n int) error {
				sprayID := fmt.Sprintf(`"spray-%s"`, phase)
				raws := make([]json.RawMessage, len(ids))
				for i, id := range ids {
					raws[i] = json.RawMessage(id)
				}
				args := mustJSON(map[string]any{"ids": raws, "ms": 30000})
				m, err := s.roundTripWithin(ctx, sprayID, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"spray","arguments":%s}}`, sprayID, args))
				if err != nil {
					return err
				}
				if res := m.Tool(); res.IsError {
					return fmt.Errorf("spray = %q", res.Text)
				}
				defer s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s}}`, sprayID))
				phaseLost, phaseLanded, phaseTries := 0, 0, 0
				defer func() {
					phases = append(phases, fmt.Sprintf("%s: %d calls, %d got a forged answer, %d got none", phase, phaseTries, phaseLanded, phaseLost))
				}()
				for i := range n {
					id := ids[i%len(ids)]
					tries++
					phaseTries++
					wait := s.Expect(id)
					if err := s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/eval/race-%s-%02d","content":"x"}}}`, id, phase, i)); err != nil {
						return err
					}
					wctx, stop := context.WithTimeout(ctx, tryWait)
					m, err := wait(wctx)
					stop()
					res := m.Tool()
					switch {
					case err != nil:
						lost++
						note("%s call %d (id %s) got no answer", phase, i, id)
						if phaseLost++; phaseLost == 3 {
							return nil
						}
					case strings.Contains(string(m.Raw), "forged"):
						landed++
						phaseLanded++
						note("%s call %d (id %s) got %.160s", phase, i, id, m.Raw)
					case !res.IsError || !strings.Contains(res.Text, "Gatehouse"):
						note("%s call %d (id %s) was not refused by Gatehouse: %.160s", phase, i, id, m.Raw)
					}
				}
				return nil
			}
			if err := tryAll("no-approver", 25); err != nil {
				return err
			}
			// A slow person, who denies each after a moment.
			var slow atomic.Pointer[Approver]
			a, err := l.StartApprover(func(_ int, req approval.Request) (approval.Scope, bool) {
				time.AfterFunc(20*time.Millisecond, func() {
					if a := slow.Load(); a != nil {
						a.Decide(req.ID, approval.ScopeDeny)
					}
				})
				return "", false
			})
			if err != nil {
				return err
			}
			defer a.Stop()
			slow.Store(a)
			if err := tryAll("slow-approver", 25); err != nil {
				return err
			}
			if err := goesOn(ctx, s, "the forged answers"); err != nil {
				return err
			}
			for _, m := range s.Stray() {
				if strings.Contains(string(m.Raw), "forged") {
					landed++
					note("an answer to no pending request: %.160s", m.Raw)
				}
			}
			if n := len(s.Impure()); n > 0 {
				note("the proxy wrote %d lines that are not JSON-RPC messages, the first: %.80q", n, s.Impure()[0])
			}
			if err := notRun(l, "write_file", "/eval/race-"); err != nil {
				return err
			}
			if landed > 0 || lost > 0 || len(problems) > 0 {
				return fmt.Errorf("over %d calls, %d forged answers reached the client and %d calls lost their answer (%s):\n%s", tries, landed, lost, strings.Join(phases, "; "), strings.Join(problems, "\n"))
			}
			t.Note("%d calls refused while the server sprayed answers to their ids; none of its answers landed", tries)
			return nil
		},
	}
}

// reusedIDCase: a call cancelled while the gate holds it, and a new call
// with its id at once.
func reusedIDCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "a cancelled call's id reused at once",
		Claim: "cancelling a call the gate still holds, and reusing its id at once, leaves the new call alone: it is answered, and its outcome recorded",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx)
			if err != nil {
				return err
			}
			for _, tool := range []string{"slow", "stall"} {
				if err := l.Policy(ctx, "mcp.adv."+tool, "ALLOW"); err != nil {
					return err
				}
			}
			shown := make(chan approval.Request, 64)
			a, err := l.StartApprover(func(_ int, req approval.Request) (approval.Scope, bool) {
				if strings.Contains(string(req.Args), "approve-me") {
					return approval.ScopeOnce, true
				}
				shown <- req // held: nobody answers
				return "", false
			})
			if err != nil {
				return err
			}
			defer a.Stop()
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			ids := []string{`"reuse"`, `90001`}
			cancel := func(id string) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"the user moved on"}}`, id)
			}
			// reuse cancels the call with id (once it waits where held
			// says), and at once sends next with the same id, whose
			// answer must hold want.
			reuse := func(id, first, next, want string, held func() error) error {
				if err := s.Send(first); err != nil {
					return err
				}
				if err := held(); err != nil {
					return err
				}
				wait := s.Expect(id)
				if err := s.Send(cancel(id) + "\n" + next); err != nil {
					return err
				}
				// It takes 100ms (an approval, less): 5s is long enough.
				wctx, stop := context.WithTimeout(ctx, 5*time.Second)
				defer stop()
				m, err := wait(wctx)
				if err != nil {
					return fmt.Errorf("the new call with the cancelled call's id: %w", err)
				}
				if res := m.Tool(); res.IsError || !strings.Contains(res.Text, want) {
					return fmt.Errorf("the new call with the cancelled call's id got %.200s, want its own result", m.Raw)
				}
				return nil
			}
			awaitShown := func() error {
				select {
				case <-shown:
					return nil
				case <-time.After(answerWithin):
					return errors.New("the approver was never shown the first call")
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			var v variants
			slows, approved := 0, 0
			for r := range 8 {
				id := ids[r%len(ids)]
				first := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/eval/cancelled-%02d","content":"x"}}}`, id, r)
				if r%4 == 3 {
					// The new call asks too, and is approved.
					next := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/eval/approve-me-%02d","content":"x"}}}`, id, r)
					approved++
					v.check(fmt.Sprintf("round %d: held, then an approved call with id %s", r, id), reuse(id, first, next, "wrote 1 bytes", awaitShown))
					continue
				}
				next := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"slow","arguments":{"ms":100,"round":"reused-%02d"}}}`, id, r)
				slows++
				v.check(fmt.Sprintf("round %d: held, then an allowed call with id %s", r, id), reuse(id, first, next, "slept", awaitShown))
			}
			for r := range 2 {
				id := ids[r%len(ids)]
				first := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"stall","arguments":{"round":"stalled-%02d"}}}`, id, r)
				next := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"slow","arguments":{"ms":100,"round":"after-stall-%02d"}}}`, id, r)
				slows++
				v.check(fmt.Sprintf("stall %d: ran, then an allowed call with id %s", r, id), reuse(id, first, next, "slept", func() error {
					return waitRanWith(ctx, l, "stall", fmt.Sprintf("stalled-%02d", r))
				}))
			}
			if err := goesOn(ctx, s, "the reused ids"); err != nil {
				return err
			}
			s.Close()
			ev, err := l.Export(ctx)
			if err != nil {
				return err
			}
			v.check("the new calls' outcomes", func() error {
				var bad []string
				for _, tool := range []string{"slow", "write_file"} {
					for _, rc := range ev.Receipts(tool) {
						if rc.Body.Decision != "ALLOW" {
							continue
						}
						if o := ev.Outcome(rc.ID); o == nil || o.Body.Status != "SUCCEEDED" {
							bad = append(bad, fmt.Sprintf("%s %s: %v", tool, rc.ID, outcomeStatus(o)))
						}
					}
				}
				if n := len(allowed(ev, "slow")); n != slows {
					bad = append(bad, fmt.Sprintf("%d allowed slow calls recorded, want %d", n, slows))
				}
				if n := len(allowed(ev, "write_file")); n != approved {
					bad = append(bad, fmt.Sprintf("%d approved write_file calls recorded, want %d", n, approved))
				}
				if len(bad) > 0 {
					return errors.New(strings.Join(bad, "; "))
				}
				return nil
			}())
			return v.err()
		},
	}
}

// allowed returns the ALLOW receipts of tool.
func allowed(ev *Evidence, tool string) []Entry {
	var out []Entry
	for _, r := range ev.Receipts(tool) {
		if r.Body.Decision == "ALLOW" {
			out = append(out, r)
		}
	}
	return out
}

// outcomeStatus names an outcome's status, or says there is none.
func outcomeStatus(o *Entry) string {
	if o == nil {
		return "no outcome"
	}
	return o.Body.Status
}

// waitRanWith waits until the adversary has run tool with marker in its
// arguments.
func waitRanWith(ctx context.Context, l *Lab, tool, marker string) error {
	deadline := time.Now().Add(answerWithin)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if ran, err := l.RanWith(tool, marker); err != nil || ran {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the server never ran %s with %q", tool, marker)
}

// nested returns depth arrays, one in the other.
func nested(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// deepClientCase: messages nested millions deep, under the size limit,
// from the client.
func deepClientCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "a request nested millions deep",
		Claim: "a message nested far deeper than any reader bounds is refused with an error, runs nothing, and the proxy and its session go on",
		Run: func(ctx context.Context, t *T) error {
			l, s, err := t.stdSession(ctx)
			if err != nil {
				return err
			}
			const depth = 3_000_000 // 6 MB: under the 8 MiB limit
			deepObject := strings.Repeat(`{"a":`, 1_000_000) + "1" + strings.Repeat("}", 1_000_000)
			probes := []struct{ name, id, line string }{
				{"arrays in a call's arguments", `"deep-args"`, `{"jsonrpc":"2.0","id":"deep-args","method":"tools/call","params":{"name":"echo","arguments":{"message":` + nested(depth) + `}}}`},
				{"objects in a call's arguments", `"deep-objects"`, `{"jsonrpc":"2.0","id":"deep-objects","method":"tools/call","params":{"name":"echo","arguments":{"message":` + deepObject + `}}}`},
				{"arrays 500 deep in a call's arguments", `"deep-500"`, `{"jsonrpc":"2.0","id":"deep-500","method":"tools/call","params":{"name":"echo","arguments":{"message":` + nested(500) + `}}}`},
				{"arrays in a ping's params", `"deep-ping"`, `{"jsonrpc":"2.0","id":"deep-ping","method":"ping","params":{"x":` + nested(depth) + `}}`},
				{"arrays in a batch member", `"deep-batch"`, `[{"jsonrpc":"2.0","id":"deep-batch","method":"tools/call","params":{"name":"echo","arguments":{"message":` + nested(depth) + `}}}]`},
				{"a line of nothing but arrays", "", nested(depth)},
			}
			var v variants
			for _, p := range probes {
				if s, err = reconnect(ctx, l, s); err != nil {
					return err
				}
				v.check(p.name, func() error {
					m, err := s.answerOrNull(ctx, p.id, p.line)
					if aerr := alive(s, p.name); aerr != nil {
						return aerr
					}
					if err != nil {
						return err
					}
					if res := m.Tool(); !res.IsError || !strings.Contains(res.Text, "Gatehouse") {
						return fmt.Errorf("it was not refused by Gatehouse: %.200s", m.Raw)
					}
					return goesOn(ctx, s, p.name)
				}())
			}
			runs, err := l.Runs()
			if err != nil {
				return err
			}
			ran := 0
			for _, r := range runs {
				if r.Tool == "echo" && !strings.Contains(string(r.Args), "still here") {
					ran++
				}
			}
			if ran > 0 {
				v.check("what ran", fmt.Errorf("the server ran %d calls of echo from nested messages", ran))
			}
			return v.err()
		},
	}
}

// deepServerCase: results nested deep from the server.
func deepServerCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "a result nested millions deep",
		Claim: "a result nested deeper than the bound reaches the client as an error result, the outcome says FAILED, and the proxy goes on",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx)
			if err != nil {
				return err
			}
			if err := l.Policy(ctx, "mcp.adv.nest", "ALLOW"); err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			var v variants
			for _, depth := range []int{200, 20_000, 3_000_000} {
				if s, err = reconnect(ctx, l, s); err != nil {
					return err
				}
				v.check(fmt.Sprintf("%d deep", depth), func() error {
					id := fmt.Sprintf(`"nest-%d"`, depth)
					m, err := s.roundTripWithin(ctx, id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"nest","arguments":{"depth":%d}}}`, id, depth))
					if aerr := alive(s, "the nested result"); aerr != nil {
						return aerr
					}
					if err != nil {
						if n := len(s.Impure()); n > 0 {
							return fmt.Errorf("%w; the proxy passed on %d lines no JSON reader takes", err, n)
						}
						return err
					}
					if err := refusal("the nested result", m.Tool()); err != nil {
						return err
					}
					return goesOn(ctx, s, "a nested result")
				}())
			}
			s.Close() // whether it lived is checked above
			ev, err := l.Export(ctx)
			if err != nil {
				return err
			}
			v.check("the outcomes", func() error {
				var bad []string
				for _, rc := range allowed(ev, "nest") {
					if o := ev.Outcome(rc.ID); o == nil || o.Body.Status != "FAILED" {
						bad = append(bad, fmt.Sprintf("%s: %s", rc.ID, outcomeStatus(o)))
					}
				}
				if len(bad) > 0 {
					return fmt.Errorf("outcomes of undelivered results, want FAILED: %s", strings.Join(bad, ", "))
				}
				return nil
			}())
			return v.err()
		},
	}
}

// namesWait matches a refusal that names how long it waited.
var namesWait = regexp.MustCompile(`\b(2 ?s|2 seconds|2000 ?ms)\b`)

// callTimeoutCase: a server that never answers, behind a proxy with a call
// timeout.
func callTimeoutCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "a stalled server and a call timeout",
		Claim: "with --call-timeout (or GATEHOUSE_CALL_TIMEOUT) an allowed call waits for the server no longer: the client gets an error naming the wait, the outcome is UNKNOWN, a late answer is dropped, and other calls go on",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx)
			if err != nil {
				return err
			}
			for _, tool := range []string{"stall", "slow"} {
				if err := l.Policy(ctx, "mcp.adv."+tool, "ALLOW"); err != nil {
					return err
				}
			}
			var v variants
			var unknown, succeeded []string // markers whose outcome must be so
			try := func(how string, s *Session) error {
				marker := "stall-" + how
				start := time.Now()
				m, err := s.roundTripWithin(ctx, `"`+marker+`"`, fmt.Sprintf(`{"jsonrpc":"2.0","id":"%s","method":"tools/call","params":{"name":"stall","arguments":{"round":"%s"}}}`, marker, marker))
				if err != nil {
					return fmt.Errorf("the stalled call: %w", err)
				}
				unknown = append(unknown, marker)
				if err := refusal("the stalled call", m.Tool()); err != nil {
					return err
				}
				if res := m.Tool(); !namesWait.MatchString(res.Text) {
					return fmt.Errorf("the error does not name the 2s wait: %q", res.Text)
				}
				if d := time.Since(start); d > 10*time.Second {
					return fmt.Errorf("the stalled call was answered after %s, with a 2s timeout", d.Round(time.Second))
				}
				return goesOn(ctx, s, "a timed-out call")
			}
			v.check("--call-timeout 2s", func() error {
				s, err := l.Connect(ctx, serverName, "--call-timeout", "2s")
				if err != nil {
					return err
				}
				if err := try("flag", s); err != nil {
					return err
				}
				// An answer that comes after the wait is dropped: the
				// server answers the first at 2.5s, the second (sent at
				// 2s, waiting 1s) after it.
				m, err := s.roundTripWithin(ctx, `"late"`, `{"jsonrpc":"2.0","id":"late","method":"tools/call","params":{"name":"slow","arguments":{"ms":2500,"round":"answered-late"}}}`)
				if err != nil {
					return fmt.Errorf("the late call: %w", err)
				}
				unknown = append(unknown, "answered-late")
				if !m.Tool().IsError {
					return fmt.Errorf("a call answered after 2.5s passed the 2s wait: %.200s", m.Raw)
				}
				res, err := s.CallTool(ctx, "slow", map[string]any{"ms": 1000, "round": "within-the-wait"})
				if err != nil {
					return err
				}
				succeeded = append(succeeded, "within-the-wait")
				if res.IsError {
					return fmt.Errorf("a call within the wait was refused: %q", res.Text)
				}
				for _, st := range s.Stray() {
					if idKey(st.ID) == `"late"` {
						return fmt.Errorf("the late answer reached the client: %.200s", st.Raw)
					}
				}
				return s.Close()
			}())
			v.check("GATEHOUSE_CALL_TIMEOUT=2s", func() error {
				s, err := l.ProxyEnv(ctx, serverName, []string{"GATEHOUSE_CALL_TIMEOUT=2s"})
				if err != nil {
					return err
				}
				if err := s.Initialize(ctx, "eval"); err != nil {
					return err
				}
				if err := try("env", s); err != nil {
					return err
				}
				return s.Close()
			}())
			l.stopProxies()
			ev, err := l.Export(ctx)
			if err != nil {
				return err
			}
			v.check("the outcomes", func() error {
				var bad []string
				for _, want := range []struct {
					status  string
					markers []string
				}{{"UNKNOWN", unknown}, {"SUCCEEDED", succeeded}} {
					for _, marker := range want.markers {
						o := outcomeWith(ev, marker)
						if o == nil || o.Body.Status != want.status {
							bad = append(bad, fmt.Sprintf("%s: %s, want %s", marker, outcomeStatus(o), want.status))
						}
					}
				}
				if len(bad) > 0 {
					return errors.New(strings.Join(bad, "; "))
				}
				return nil
			}())
			return v.err()
		},
	}
}

// outcomeWith returns the outcome of the receipt whose arguments hold
// marker, or nil.
func outcomeWith(ev *Evidence, marker string) *Entry {
	for _, r := range ev.Receipts("") {
		if strings.Contains(string(ev.Args(r.ID)), marker) {
			return ev.Outcome(r.ID)
		}
	}
	return nil
}

// approvalFloodCase: one session floods the approver; another's call still
// reaches it.
func approvalFloodCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "a flood of approval requests from one session",
		Claim: "150 calls that need approval from one session fill only that session's share of the approver: the rest are refused at once, and another session's call still reaches the person",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx)
			if err != nil {
				return err
			}
			a, err := l.StartApprover(func(int, approval.Request) (approval.Scope, bool) { return "", false })
			if err != nil {
				return err
			}
			defer a.Stop()
			flooder, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			other, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			const n = 150
			var answered atomic.Int64
			var mu sync.Mutex
			var refused []ToolResult // guarded by mu
			var b strings.Builder
			var wg sync.WaitGroup
			wctx, cancel := context.WithCancel(ctx)
			defer func() { cancel(); wg.Wait() }()
			for i := range n {
				id := fmt.Sprintf(`"flood-%03d"`, i)
				wait := flooder.Expect(id)
				wg.Go(func() {
					if m, err := wait(wctx); err == nil {
						answered.Add(1)
						mu.Lock()
						refused = append(refused, m.Tool())
						mu.Unlock()
					}
				})
				fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"/eval/flood-%03d","content":"x"}}}`+"\n", id, i)
			}
			if err := flooder.Send(strings.TrimSuffix(b.String(), "\n")); err != nil {
				return err
			}
			// The flood has settled when each of its calls is either shown
			// to the person or answered.
			// A session's requests are shown one at a time, its share
			// (approval.DefaultMaxOpenPerSession) held open: the flood has
			// settled when all but its share are shown or answered.
			settled := func() bool {
				return int64(shownWith(a, "/eval/flood-"))+answered.Load() >= n-approval.DefaultMaxOpenPerSession
			}
			if !eventually(ctx, answerWithin, settled) {
				return fmt.Errorf("after %s, of %d calls %d were shown and %d answered", answerWithin, n, shownWith(a, "/eval/flood-"), answered.Load())
			}
			floodShown := shownWith(a, "/eval/flood-")
			wait := other.Expect(`"other"`)
			if err := other.Send(`{"jsonrpc":"2.0","id":"other","method":"tools/call","params":{"name":"write_file","arguments":{"path":"/eval/other-session","content":"x"}}}`); err != nil {
				return err
			}
			var v variants
			v.check("the other session's call", func() error {
				if eventually(ctx, answerWithin, func() bool { return shownWith(a, "/eval/other-session") > 0 }) {
					return nil
				}
				octx, stop := context.WithTimeout(ctx, time.Second)
				defer stop()
				if m, err := wait(octx); err == nil {
					return fmt.Errorf("it never reached the approver, and was answered: %.200s", m.Raw)
				}
				return errors.New("it never reached the approver")
			}())
			v.check("the flooding session's share", func() error {
				if floodShown > 20 {
					return fmt.Errorf("the approver was shown %d of its %d calls, want its share of about 10", floodShown, n)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, res := range refused {
					if err := refusal("a call over its share", res); err != nil {
						return err
					}
				}
				return nil
			}())
			if err := notRun(l, "write_file", "/eval/"); err != nil {
				return err
			}
			if err := v.err(); err != nil {
				return err
			}
			t.Note("the approver was shown %d of the flood's calls, and the other session's", floodShown)
			return nil
		},
	}
}

// shownWith counts the requests shown whose arguments hold marker.
func shownWith(a *Approver, marker string) int {
	n := 0
	for _, r := range a.Shown() {
		if strings.Contains(string(r.Args), marker) {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds, or d has passed.
func eventually(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for ctx.Err() == nil {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// dbSize is the size of the home's database, its journal included.
func dbSize(home string) (int64, error) {
	paths, err := filepath.Glob(filepath.Join(home, store.DatabaseFile+"*"))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

// receiptBodies reads the bodies of an export's receipts, every member, by
// receipt id.
func receiptBodies(ev *Evidence) (map[string]map[string]json.RawMessage, error) {
	data, err := os.ReadFile(filepath.Join(ev.Dir, verify.FileEntries))
	if err != nil {
		return nil, err
	}
	bodies := map[string]map[string]json.RawMessage{}
	for line := range bytes.Lines(data) {
		var e struct {
			ID   string                     `json:"id"`
			Kind string                     `json:"kind"`
			Body map[string]json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("read %s: %w", verify.FileEntries, err)
		}
		if e.Kind == "receipt" {
			bodies[e.ID] = e.Body
		}
	}
	return bodies, nil
}

// bigArgsCase: calls whose arguments are near the message limit.
func bigArgsCase() Case {
	return Case{
		Family: ProtocolAbuse, Name: "five calls with 7 MiB arguments",
		Claim: "arguments too big to keep are kept as a commitment and their size, which the receipt states: five 7 MiB calls do not grow the database by their 35 MiB",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.stdLab(ctx)
			if err != nil {
				return err
			}
			if err := l.Policy(ctx, "mcp.adv.write_file", "ALLOW"); err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			if _, err := s.CallTool(ctx, "echo", map[string]any{"message": "warm"}); err != nil {
				return err
			}
			before, err := dbSize(l.Home)
			if err != nil {
				return err
			}
			const n, size = 5, 7 << 20
			sizes := map[string]int{} // path -> the arguments' size as sent
			for i := range n {
				path := fmt.Sprintf("/eval/big-%d", i)
				args := map[string]any{"path": path, "content": strings.Repeat(fmt.Sprintf("%x", i), size)}
				sizes[path] = len(mustJSON(args))
				res, err := s.CallTool(ctx, "write_file", args)
				if err != nil {
					return err
				}
				if res.IsError {
					return fmt.Errorf("the %d MiB call %d was refused: %q", size>>20, i, res.Text)
				}
			}
			if err := s.Close(); err != nil {
				return fmt.Errorf("proxy exit: %w", err)
			}
			after, err := dbSize(l.Home)
			if err != nil {
				return err
			}
			var v variants
			const most = 4 << 20
			v.check("the database", func() error {
				if grew := after - before; grew > most {
					return fmt.Errorf("it grew by %.1f MiB for %d calls of %d MiB, want at most %d MiB", float64(grew)/(1<<20), n, size>>20, most>>20)
				}
				return nil
			}())
			ev, err := l.Export(ctx)
			if err != nil {
				return err
			}
			bodies, err := receiptBodies(ev)
			if err != nil {
				return err
			}
			for _, rc := range allowed(ev, "write_file") {
				kept := ev.Args(rc.ID)
				var path string
				for p := range sizes {
					if bytes.Contains(kept, []byte(`"`+p+`"`)) {
						path = p
					}
				}
				v.check("receipt "+rc.ID, func() error {
					var problems []string
					if len(kept) > 128<<10 {
						problems = append(problems, fmt.Sprintf("the export keeps all %d bytes of its arguments", len(kept)))
					}
					raw, ok := bodies[rc.ID]["args_not_kept"]
					var notKept struct {
						Size int `json:"size"`
					}
					switch {
					case !ok:
						problems = append(problems, "its body does not say that its arguments were not kept (args_not_kept)")
					case json.Unmarshal(raw, &notKept) != nil:
						problems = append(problems, fmt.Sprintf("its args_not_kept is %s, not {size, cap}", raw))
					case notKept.Size < size || path != "" && notKept.Size > sizes[path]+1024:
						problems = append(problems, fmt.Sprintf("its args_not_kept.size is %d, want the arguments' size (%d bytes as sent)", notKept.Size, sizes[path]))
					}
					if len(problems) > 0 {
						return errors.New(strings.Join(problems, "; "))
					}
					return nil
				}())
			}
			if got := len(allowed(ev, "write_file")); got != n {
				v.check("the receipts", fmt.Errorf("%d receipts of the big calls, want %d", got, n))
			}
			if err := v.err(); err != nil {
				return err
			}
			t.Note("the database grew by %.2f MiB for %d calls of %d MiB", float64(after-before)/(1<<20), n, size>>20)
			return nil
		},
	}
}

// redirectFront stands in front of a remote server on one port that speaks
// both HTTPS and plain HTTP (as a misconfigured or hostile host can): over
// HTTPS it passes everything on to the server, except tools/call, which it
// redirects where it is told; over plain HTTP it records what it is sent.
type redirectFront struct {
	url  string // the HTTPS URL of the server, through the front
	host string // host:port of both
	ca   string // a PEM file of the front's certificate

	mu     sync.Mutex
	code   int           // the redirect's status; guarded by mu
	target string        // where tools/call goes; "" passes it on; guarded by mu
	plain  []http.Header // what the plain listener was sent; guarded by mu
}

// startRedirectFront starts a front for the server at upstream; it stops
// when the case ends.
func startRedirectFront(t *T, dir, upstream string) (*redirectFront, error) {
	up, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &redirectFront{host: raw.Addr().String()}
	secure, plain := newConnQueue(raw.Addr()), newConnQueue(raw.Addr())
	go func() {
		defer secure.Close()
		defer plain.Close()
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			go sniff(c, secure, plain)
		}
	}()
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: up.Scheme, Host: up.Host})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.mu.Lock()
		code, target := f.code, f.target
		f.mu.Unlock()
		if r.Method == http.MethodPost && target != "" && bytes.Contains(body, []byte(`"tools/call"`)) {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(body, &m)
			http.Redirect(w, r, target+"?id="+url.QueryEscape(string(m.ID)), code)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	ts.Listener.Close()
	ts.Listener = secure
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the proxy abandons
	ts.StartTLS()
	f.url = ts.URL + up.Path
	srv := &http.Server{Handler: http.HandlerFunc(f.plainHTTP), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(plain)
	t.Cleanup(func() { raw.Close(); srv.Close(); ts.Close() })
	f.ca = filepath.Join(dir, "front-ca.pem")
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	if err := os.WriteFile(f.ca, pemCert, 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

// plainHTTP records a request over plain HTTP, and answers it as the
// server would, so that a proxy that followed the redirect passes the
// answer on.
func (f *redirectFront) plainHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.plain = append(f.plain, r.Header.Clone())
	f.mu.Unlock()
	id := r.URL.Query().Get("id")
	if !json.Valid([]byte(id)) {
		id = "null"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"answered by the plain-HTTP listener"}]}}`, id)
}

// redirect sends tools/call to target with code from now on ("" passes it
// on).
func (f *redirectFront) redirect(code int, target string) {
	f.mu.Lock()
	f.code, f.target = code, target
	f.mu.Unlock()
}

// plainSeen returns the headers the plain listener was sent, and forgets
// them.
func (f *redirectFront) plainSeen() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := f.plain
	f.plain = nil
	return seen
}

// sniff hands c to secure when it starts a TLS handshake, else to plain.
func sniff(c net.Conn, secure, plain *connQueue) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	pc := &peekedConn{Conn: c, r: br}
	if first[0] == 0x16 { // a TLS record: handshake
		secure.push(pc)
		return
	}
	plain.push(pc)
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// connQueue is a net.Listener of the connections pushed to it.
type connQueue struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

var _ net.Listener = (*connQueue)(nil)

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) push(c net.Conn) {
	select {
	case q.ch <- c:
	case <-q.done:
		c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error   { q.once.Do(func() { close(q.done) }); return nil }
func (q *connQueue) Addr() net.Addr { return q.addr }

// redirectCase: an HTTPS remote server whose host redirects a call to plain
// HTTP.
func redirectCase() Case {
	return Case{
		Family: SecretLeakage, Name: "a remote server redirects to plain HTTP",
		Claim: "a redirect from an HTTPS server to plain HTTP (or to another host) is refused with a clear error: the server's credential headers never travel unencrypted or elsewhere",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.Lab()
			if err != nil {
				return err
			}
			upstream, err := l.RemoteServer(ctx, t)
			if err != nil {
				return err
			}
			f, err := startRedirectFront(t, l.Dir, upstream)
			if err != nil {
				return err
			}
			auth, key := newSecret(), newSecret()
			if _, _, err := l.Gatehouse(ctx, "Bearer "+auth+"\n"+key+"\n", "server", "add", serverName, "--no-quarantine", "--url", f.url,
				"--secret-header", "Authorization", "--secret-header", "X-Api-Key"); err != nil {
				return err
			}
			if _, _, err := l.Gatehouse(ctx, stdPolicy, "policy", "import", "-"); err != nil {
				return err
			}
			s, err := l.ProxyEnv(ctx, serverName, []string{"SSL_CERT_FILE=" + f.ca})
			if err != nil {
				return err
			}
			if err := s.Initialize(ctx, "eval"); err != nil {
				return fmt.Errorf("connect over HTTPS through the front: %w", err)
			}
			if err := goesOn(ctx, s, "connecting over HTTPS"); err != nil {
				return err
			}
			_, port, _ := net.SplitHostPort(f.host)
			targets := []struct {
				name   string
				code   int
				target string
			}{
				{"307 to http on the same host and port", http.StatusTemporaryRedirect, "http://" + f.host + "/plain"},
				{"308 to http on the same host and port", http.StatusPermanentRedirect, "http://" + f.host + "/plain"},
				{"302 to http on the same host and port", http.StatusFound, "http://" + f.host + "/plain"},
				{"307 to http on another host name", http.StatusTemporaryRedirect, "http://localhost:" + port + "/plain"},
			}
			var v variants
			for i, tg := range targets {
				v.check(tg.name, func() error {
					f.redirect(tg.code, tg.target)
					defer f.redirect(0, "")
					res, err := s.CallTool(ctx, "echo", map[string]any{"message": fmt.Sprintf("redirected-%d", i)})
					if err != nil {
						return err
					}
					var problems []string
					for _, h := range f.plainSeen() {
						for _, name := range slices.Sorted(maps.Keys(h)) {
							vals := h[name]
							joined := strings.Join(vals, " ")
							if strings.EqualFold(name, "Authorization") || strings.EqualFold(name, "X-Api-Key") ||
								strings.Contains(joined, auth) || strings.Contains(joined, key) {
								problems = append(problems, fmt.Sprintf("the plain-HTTP listener was sent the credential header %s", name))
							}
						}
					}
					if err := refusal("the redirected call", res, "redirect"); err != nil {
						problems = append(problems, err.Error())
					}
					if len(problems) > 0 {
						return errors.New(strings.Join(problems, "; "))
					}
					return nil
				}())
			}
			if err := goesOn(ctx, s, "the redirects"); err != nil {
				return err
			}
			if err := s.Close(); err != nil {
				return fmt.Errorf("proxy exit: %w", err)
			}
			return v.err()
		},
	}
}

func readingCases() []Case {
	return []Case{
		idlessCase(),
		batchCase("a batch with an invalid member beside a call",
			"a batch holding any invalid member is refused whole: the call beside it is answered with an error and does not run, nor does the invalid member",
			`{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{"message":"MARK-echo"}}}`),
		batchCase("a batch with an invalid member beside other requests",
			"a batch holding any invalid member is refused whole: each request in it is answered with an error, and nothing of it reaches the server",
			`{"jsonrpc":"2.0","id":ID,"method":"ping"}`,
			`{"jsonrpc":"2.0","id":ID,"method":"tools/list"}`),
		methodCase("method names in look-alike letters (lenient server)", lookalikeMethods),
		methodCase("method names folded by width, case or invisible characters (lenient server)", foldedMethods),
		ambiguousCase("ambiguous members in a call (JSON.parse server)", "exact"),
		ambiguousCase("ambiguous members in a call (Go server)", "go"),
		forgedRaceCase(),
		reusedIDCase(),
		deepClientCase(),
		deepServerCase(),
		callTimeoutCase(),
		approvalFloodCase(),
		bigArgsCase(),
		redirectCase(),
	}
}
