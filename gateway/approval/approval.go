// Package approval is how a Gatehouse proxy asks a person to approve a tool
// call, over a local socket, and how an approver answers.
//
// One approver runs per home folder: the tray app, or `gatehouse approvals`
// in a terminal. It listens on [SocketPath] with [Listen] and serves the
// queue of open requests with a [Server], which shows them through a [UI]
// and takes the person's answers with [Server.Decide]. Proxies connect and
// [Ask]; there may be many at once, in many processes.
//
// # Asking
//
// [Ask] sends a [Request] and waits, at most the time it is given, for a
// [Decision]. It fails closed, and says why:
//
//   - [ErrNoApprover]: nobody is listening (or the approver stopped). The
//     proxy denies the call and tells the model how to get one approved:
//     start the Gatehouse app, or run `gatehouse approvals`.
//   - [ErrPending]: the approver has the request, but nobody answered in
//     time. MCP hosts cancel slow calls (Claude Desktop after about a
//     minute), so the proxy answers "approval pending" in band instead of
//     waiting longer. The request stays open at the approver until its
//     [Request.Expires], and the next identical call (same [Request.Key])
//     gets the answer as soon as there is one: at once if the person
//     answered in between, else when they do.
//
// While it waits, Ask calls a progress function every [ProgressEvery], which
// the proxy turns into MCP progress notifications.
//
// A timeout never produces a decision: only a person's answer does, through
// [Server.Decide]. Nothing a proxy sends can approve anything.
//
// # Bound to the call
//
// An answer is for the call it was shown with, and for no other. The
// approver passes [Server.Decide] the request as it showed it, and the
// server refuses the answer ([ErrNotOpen]) unless a request with that ID
// and that Key is open: a request withdrawn while on screen and replaced by
// another call under the same ID is not answered by a look at the first.
// Every [Decision] carries the Key of the request it answers, and [Ask]
// refuses a decision whose Key is not the one it asked with ([ErrProtocol]);
// the gate checks it again against the call before it runs.
//
// # How an answer was given
//
// A decision says how the approver took it ([Via]): a button of the app's
// approval window ([ViaWindow]), a key typed in `gatehouse approvals` with
// its input and output a terminal ([ViaTerminal]), a line it read from input
// that is not a terminal ([ViaPiped]), a rule of the approver that answers
// without asking (`--auto`, [ViaAutomatic]), or an earlier answer reused
// for another call ([ViaGrant]). That is what the approver could tell, no
// more: a program running as the user can still drive the window or a
// terminal.
//
// # Identical calls
//
// A request's Key is computed by Ask with [CallKey]: a SHA-256 over the
// server, the tool, the client and the arguments in canonical form (object
// keys sorted, no insignificant space; numbers keep their literal text), and
// over the tool's old and new definition when the request is about a changed
// definition. Several proxies asking with the same Key at once share one
// open request, and one answer answers them as far as it reaches: "once"
// lets one of the calls run and shows the request again for the others (an
// agent cannot turn one "yes" into many by sending a call many times);
// "session" answers the calls of the session the request was shown for, and
// is shown again for the others; every other answer answers all of them.
//
// An answer given while nobody is waiting any more (every asker got
// [ErrPending]) is kept for the next identical call, for [Options.Keep]
// (10 minutes by default): "once" and "deny" are used up by that one call;
// "session" serves only calls from the same proxy session; "minutes" lasts at
// most its minutes. The approver keeps no rules beyond that: recording a
// lasting scope (session, minutes, always, always-deny) is the job of the
// proxy that receives it.
//
// # Fairness
//
// Many agents may ask at once, and one of them may send far more calls than
// a person can answer. Two things keep one session (one proxy's session,
// [Request.Session]) from crowding out the others:
//
//   - A bound per session, [Options.MaxOpenPerSession] (10 by default). A
//     session's next request past it is rejected at once ([ErrRejected],
//     with an error that names the limit and says it is this session's);
//     other sessions' are still accepted and shown. [Options.MaxOpen] (100
//     by default) bounds all sessions together, as a last resort.
//   - Turns. The approver shows a session one request at a time: its next
//     one (oldest first) is shown when the person answered that one, or it
//     was withdrawn, and so it comes after the requests other sessions had
//     on screen by then. An approver that presents requests in the order
//     they were shown, as the tray app's window and `gatehouse approvals`
//     do, takes the sessions in turn: a session that sent ten calls does
//     not put ten of its own before another session's one. [Server.Requests]
//     lists every open request, those waiting for their turn too.
//
// A request counts against every session that wants its answer: one whose
// proxy waits for it, or whose proxy stopped waiting (it got [ErrPending])
// while the request stays open for that session's next identical call, until
// that proxy's [Request.Expires]. So a session that joins a request another
// session asked (same Key) pays one of its own places for it, and a request
// stops counting against a session as soon as that session no longer wants
// it, even while others still do: no session can fill another's places, or
// keep them filled by waiting on its requests. An identical call from a
// session that already wants the request (the agent calling again after
// "approval pending") costs nothing more, and is accepted at the bound: that
// is how the agent gets the answer. A request several sessions want is
// shown on the turn of the first of them with nothing on screen, the
// session that asked first if it can.
//
// The session is what the proxy says it is. A program of the user that is not
// a Gatehouse proxy can name any session it likes; the bound per session is
// fairness between proxies, and MaxOpen is what holds against such a program.
//
// # Wire protocol
//
// Each message is one line of JSON (newline-delimited, UTF-8, at most
// [MaxLine] bytes), an object with the protocol version "v" (1), a "type",
// and the fields of that type; unknown fields, types, scopes and versions
// are errors. One connection carries one request:
//
//	proxy → approver  {"v":2,"type":"request","request":{...}}
//	approver → proxy  {"v":2,"type":"pending","id":"ID","approver":"terminal"}
//	approver → proxy  {"v":2,"type":"decision","decision":{"id":"ID","key":"KEY","scope":"minutes","minutes":15,"approver":"terminal","via":"terminal","decided":"2025-06-01T12:00:00Z"}}
//
// The approver answers a request with "pending" (it is on screen, and a
// "decision" follows when the person answers) or at once with a "decision"
// (an answer was kept for this call), or with {"type":"error","error":"..."}
// and closes. When its wait ends, the proxy sends
// {"v":2,"type":"detach","id":"ID"}; the approver answers
// {"v":2,"type":"detached","id":"ID"} (the request stays open) or, if the
// person answered in the meantime, the "decision". A proxy that
// closes the connection without detaching has gone away (its call was
// cancelled, or it exited): the request is withdrawn unless another asker
// still wants it.
//
// A request holds:
//
//	id              random, chosen by the proxy (Ask sets it)
//	key             the identical-call key (Ask sets it): 64 hex digits
//	server, tool    the MCP server's name in Gatehouse, and the tool's name
//	client          the MCP client's name ("claude-code"), without version
//	risk, rule      the risk class and the policy rule that asked
//	args            the arguments, already redacted, as JSON; when larger
//	                than MaxArgs, a JSON string holding their start, with
//	                "args_truncated": true and "args_size": their full size
//	description     the tool's description (at most MaxDescription bytes)
//	change          for a changed tool definition: {"old":..., "new":...},
//	                each cut like args when too large ("truncated": true)
//	session         the proxy session's id
//	expires         RFC 3339: until when the request may stay open once its
//	                asker stopped waiting (default and at most: 10 minutes
//	                and 1 hour after it was asked)
//	wait_until      RFC 3339: when the asker stops waiting and tells the
//	                agent approval is pending (Ask sets it from its wait)
//
// Scopes are "once", "session", "minutes" (with "minutes" from 1 to
// [MaxMinutes]), "always", "deny" and "always-deny". A decision's "key" is
// the Key of the request it answers, and "via" how it was given: "window",
// "terminal", "piped", "automatic" or "grant". Version 1 had neither; the
// two versions refuse each other.
//
// # Who may connect
//
// The socket is a Unix domain socket (also on Windows, see below) at
// <home>/approvals.sock. [Listen] creates the home folder with mode 0700 and
// refuses one that other users can enter or that another user owns; the
// socket itself gets mode 0600. So on Linux and macOS only processes of the
// same user (and root) can reach it. Beside it, approvals.pid holds the
// approver's process id under an exclusive lock: a second approver is
// refused while the first runs ([ErrApproverRunning]), and a socket file left
// by one that died (nothing accepts on it) is replaced.
//
// On Linux each side also checks the other's user id as the kernel recorded
// it when the connection was made (SO_PEERCRED) and refuses another user: the
// approver refuses askers, and Ask refuses an approver, that run as another
// user (root included). That holds even if the folder's permissions are
// loosened later.
//
// On Linux, when the asking program is Gatehouse's own (gatehouse, as every
// proxy is, or gatehouse-app), Ask also checks the approver's program: the
// process listening on the socket (its pid as the kernel recorded it, and
// /proc/<pid>/exe) must run the asking program itself, or gatehouse or
// gatehouse-app from the same folder. Another program that took the socket's path (a script, a
// copy of gatehouse elsewhere) is refused, and the call is denied as if no
// approver ran.
//
// What this does not do: it does not contain code running as the user. Any
// process of the user can ask (asking cannot approve anything); one that can
// write to the folder the Gatehouse programs are installed in, or drive the
// real app's window, or type into the terminal approver's terminal, or
// attach a debugger to it, can still answer in a person's place. The
// approver check is made of the process that listened (SO_PEERCRED) and,
// for every answer, of the process that wrote it (SO_PASSCRED), so a
// program that listens, hands the connection to a process of its own and
// then runs a Gatehouse program in the listening one is refused. A
// decision's [Via] is what the approver could tell, and such answers say
// "window" or "terminal". That is Gatehouse's claim boundary. On macOS and
// the BSDs there is no peer check yet, only the folder's permissions.
//
// On Windows, the standard library has no named pipes, so the socket is a
// Unix domain socket too (Windows 10 1803 and later), protected only by the
// home folder's access list (the user's profile); there is no peer check.
package approval

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the wire protocol's version, sent as "v" in every message.
const Version = 2

// Limits of the wire protocol.
const (
	// MaxLine bounds one message, newline included.
	MaxLine = 512 << 10
	// MaxArgs bounds a request's arguments, and each tool definition of a
	// change, as sent: larger ones are cut (see [Request.ArgsTruncated]).
	MaxArgs = 64 << 10
	// MaxDescription bounds a tool's description as sent.
	MaxDescription = 16 << 10
	// MaxMinutes bounds a "minutes" decision: a day.
	MaxMinutes = 24 * 60
	// maxField bounds the short fields: names, risk, rule, session, id.
	maxField = 1 << 10
)

var (
	// ErrNoApprover means no approver is listening, or it stopped before it
	// answered. The call must be denied.
	ErrNoApprover = errors.New("no approver is running")
	// ErrPending means the approver has the request but nobody answered in
	// time; the request stays open, and the next identical call gets the
	// answer. The call must not run.
	ErrPending = errors.New("approval pending")
	// ErrRejected means the approver refused the request itself (malformed,
	// too many open, another user).
	ErrRejected = errors.New("approver rejected the request")
	// ErrProtocol means the other side sent something this side cannot
	// read.
	ErrProtocol = errors.New("approval protocol error")
	// ErrNotOpen is returned by [Server.Decide] for a request that is not
	// open (answered, withdrawn, or never seen).
	ErrNotOpen = errors.New("no such open request")
	// ErrApproverRunning is returned by [Listen] while another approver
	// serves the same socket.
	ErrApproverRunning = errors.New("another approver is running")
)

// A Request asks a person to approve one tool call.
type Request struct {
	// ID identifies this request; [Ask] sets a random one when empty.
	ID string `json:"id"`
	// Key identifies the call: [Ask] sets it with [CallKey].
	Key string `json:"key"`

	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Client is the MCP client's name, without its version: it is part of
	// the Key.
	Client string `json:"client"`
	Risk   string `json:"risk,omitempty"`
	Rule   string `json:"rule,omitempty"`

	// Args are the call's arguments, already redacted, as JSON. Redaction
	// that erases a difference between two calls makes them identical.
	// [Ask] sends them in canonical form, cut to [MaxArgs].
	Args json.RawMessage `json:"args"`
	// ArgsTruncated reports that Args was cut: it is then a JSON string
	// holding the start of the canonical arguments, and ArgsSize their full
	// size in bytes.
	ArgsTruncated bool `json:"args_truncated,omitempty"`
	ArgsSize      int  `json:"args_size,omitempty"`

	// Description is the tool's description as the server gave it.
	Description string `json:"description,omitempty"`
	// Change is set when the request is about a changed tool definition.
	Change *Change `json:"change,omitempty"`
	// Plan is set when the request asks to approve a whole governed
	// program at once: every step, in order. It is part of the Key, so an
	// answer for one program is no answer for another.
	Plan *Plan `json:"plan,omitempty"`

	// Session is the asking proxy session's id.
	Session string `json:"session,omitempty"`
	// Expires is until when the request may stay open at the approver once
	// no asker waits for it any more; then it is withdrawn. Zero means 10
	// minutes after it was asked; the approver allows at most an hour.
	Expires time.Time `json:"expires,omitzero"`
	// WaitUntil is when the asker stops waiting for an answer and tells the
	// agent that approval is pending ([Ask] sets it from its wait), so that
	// an approver can count down to it. Zero when the asker did not say.
	WaitUntil time.Time `json:"wait_until,omitzero"`
}

// A Change is a tool definition that differs from the one the user accepted.
type Change struct {
	Old json.RawMessage `json:"old"` // as accepted
	New json.RawMessage `json:"new"` // as the server lists it now
	// Truncated reports that Old or New was cut to [MaxArgs], like
	// [Request.Args].
	Truncated bool `json:"truncated,omitempty"`
}

// A Plan is a governed program shown for one approval: its name, the hash
// of the program as submitted (sha256:<hex>), and its steps in order.
type Plan struct {
	Program string     `json:"program"`
	Hash    string     `json:"hash"`
	Steps   []PlanStep `json:"steps"`
}

// A PlanStep is one step of a [Plan]: a tool call (Server, Tool, Args, where
// arguments taken from earlier steps read ${steps.NAME...}), or another kind
// of step, described in Detail.
type PlanStep struct {
	Name   string          `json:"name"`
	Kind   string          `json:"kind"`
	Server string          `json:"server,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Detail string          `json:"detail,omitempty"`
}

// MaxPlanSteps bounds the steps of a [Plan].
const MaxPlanSteps = 200

// A Scope is what a person decided, and for how long.
type Scope string

// The scopes. Only a person's answer produces one.
const (
	ScopeOnce       Scope = "once"        // this call
	ScopeSession    Scope = "session"     // this tool, for the proxy session
	ScopeMinutes    Scope = "minutes"     // this tool, for Decision.Minutes
	ScopeAlways     Scope = "always"      // this tool, from now on
	ScopeDeny       Scope = "deny"        // not this call
	ScopeAlwaysDeny Scope = "always-deny" // not this tool, from now on
)

// ParseScope returns the scope named s, or an error for any other string.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case ScopeOnce, ScopeSession, ScopeMinutes, ScopeAlways, ScopeDeny, ScopeAlwaysDeny:
		return sc, nil
	}
	return "", fmt.Errorf("unknown scope %q", s)
}

// UnmarshalText accepts the known scopes only.
func (s *Scope) UnmarshalText(b []byte) error {
	sc, err := ParseScope(string(b))
	if err != nil {
		return err
	}
	*s = sc
	return nil
}

// Allows reports whether the scope lets the call run.
func (s Scope) Allows() bool {
	switch s {
	case ScopeOnce, ScopeSession, ScopeMinutes, ScopeAlways:
		return true
	}
	return false
}

// A Via is how an approver took an answer: what it could tell of who gave
// it.
type Via string

// The ways an answer comes.
const (
	// ViaWindow: a button of the app's approval window, clicked or pressed
	// with a key.
	ViaWindow Via = "window"
	// ViaTerminal: a key typed in the terminal approver, whose input and
	// output were both a terminal.
	ViaTerminal Via = "terminal"
	// ViaPiped: a line the terminal approver read from input that is not a
	// terminal (a pipe, a file), or wrote its prompt where no terminal
	// shows it. Nobody is known to have read the request.
	ViaPiped Via = "piped"
	// ViaAutomatic: a rule of the approver answered, with nobody asked
	// (`gatehouse approvals --auto`).
	ViaAutomatic Via = "automatic"
	// ViaGrant: nobody was asked about this call: an answer given earlier
	// ("session", "minutes", "always") was used again. Only the approver's
	// server and the gate set it, never [Server.Decide]'s caller.
	ViaGrant Via = "grant"
	// ViaPlan: nobody was asked about this call: a person approved the
	// whole program it is a step of (a [Plan]). Only a programs runner
	// sets it, never the wire.
	ViaPlan Via = "plan"
)

// ParseVia returns the way named s, or an error for any other string.
func ParseVia(s string) (Via, error) {
	switch v := Via(s); v {
	case ViaWindow, ViaTerminal, ViaPiped, ViaAutomatic, ViaGrant:
		return v, nil
	}
	return "", fmt.Errorf("unknown way of answering %q", s)
}

// UnmarshalText accepts the known ways only.
func (v *Via) UnmarshalText(b []byte) error {
	w, err := ParseVia(string(b))
	if err != nil {
		return err
	}
	*v = w
	return nil
}

// Person reports whether an answer that came this way may have been a
// person's, as far as the approver could tell: by the window or at a
// terminal.
func (v Via) Person() bool { return v == ViaWindow || v == ViaTerminal }

// An Answer is what an approver took for one request: the scope, for how
// many minutes, and how it came.
type Answer struct {
	Scope   Scope
	Minutes int // for ScopeMinutes: 1 to MaxMinutes; else 0
	Via     Via
}

// A Decision is an approver's answer to a request.
type Decision struct {
	// ID is the request's ID.
	ID string `json:"id"`
	// Key is the Key of the request answered: the call, and no other, that
	// the answer is for.
	Key   string `json:"key"`
	Scope Scope  `json:"scope"`
	// Minutes is how long a ScopeMinutes decision lasts, from Decided; zero
	// for other scopes.
	Minutes int `json:"minutes,omitempty"`
	// Approver names the approver that took the answer: "terminal", "tray".
	Approver string `json:"approver"`
	// Via is how the approver took it.
	Via Via `json:"via"`
	// Decided is when the answer was given.
	Decided time.Time `json:"decided"`
}

// Until returns when a ScopeMinutes decision ends, and the zero time for
// other scopes.
func (d Decision) Until() time.Time {
	if d.Scope != ScopeMinutes {
		return time.Time{}
	}
	return d.Decided.Add(time.Duration(d.Minutes) * time.Minute)
}

func (d *Decision) validate() error {
	if err := checkField("id", d.ID, true); err != nil {
		return err
	}
	if !isKey(d.Key) {
		return errors.New("key must be 64 hex digits")
	}
	if _, err := ParseVia(string(d.Via)); err != nil {
		return err
	}
	if _, err := ParseScope(string(d.Scope)); err != nil {
		return err
	}
	switch {
	case d.Scope == ScopeMinutes && (d.Minutes < 1 || d.Minutes > MaxMinutes):
		return fmt.Errorf("minutes must be from 1 to %d, not %d", MaxMinutes, d.Minutes)
	case d.Scope != ScopeMinutes && d.Minutes != 0:
		return fmt.Errorf("minutes given for scope %s", d.Scope)
	}
	if err := checkField("approver", d.Approver, true); err != nil {
		return err
	}
	if d.Decided.IsZero() {
		return errors.New("decision without a time")
	}
	return nil
}

// CallKey returns the identical-call key of r: a hash of its Server, Tool,
// Client, canonical Args, and Change. It fails when Args or the change's
// definitions are not JSON. Pass the full arguments, before any cutting:
// [Ask] computes the key before it cuts them to [MaxArgs].
func CallKey(r Request) (string, error) {
	args, err := canonicalArgs(r.Args)
	if err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	parts := []any{"gatehouse approval key 1", r.Server, r.Tool, r.Client, json.RawMessage(args)}
	if r.Change != nil {
		old, err := canonical(r.Change.Old)
		if err != nil {
			return "", fmt.Errorf("old tool definition: %w", err)
		}
		new, err := canonical(r.Change.New)
		if err != nil {
			return "", fmt.Errorf("new tool definition: %w", err)
		}
		parts = append(parts, json.RawMessage(old), json.RawMessage(new))
	}
	if r.Plan != nil {
		// The plan is bound whole: the program's hash and every step as
		// shown, in order.
		plan, err := json.Marshal(r.Plan)
		if err != nil {
			return "", fmt.Errorf("plan: %w", err)
		}
		if plan, err = canonical(plan); err != nil {
			return "", fmt.Errorf("plan: %w", err)
		}
		parts = append(parts, "plan", json.RawMessage(plan))
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// validate checks a request as it travels: the limits Ask keeps.
func (r *Request) validate() error {
	if err := checkField("id", r.ID, true); err != nil {
		return err
	}
	if !isKey(r.Key) {
		return fmt.Errorf("key must be 64 hex digits")
	}
	for _, f := range []struct {
		name, value string
		required    bool
	}{
		{"server", r.Server, true}, {"tool", r.Tool, true}, {"client", r.Client, false},
		{"risk", r.Risk, false}, {"rule", r.Rule, false}, {"session", r.Session, false},
	} {
		if err := checkField(f.name, f.value, f.required); err != nil {
			return err
		}
	}
	if len(r.Args) == 0 {
		return errors.New("no args")
	}
	if len(r.Args) > MaxArgs {
		return fmt.Errorf("args larger than %d bytes", MaxArgs)
	}
	if r.ArgsTruncated != (r.ArgsSize > 0) {
		return errors.New("args_size must be given exactly when args_truncated")
	}
	if r.ArgsTruncated && r.Args[0] != '"' {
		return errors.New("truncated args must be a JSON string")
	}
	if len(r.Description) > MaxDescription {
		return fmt.Errorf("description larger than %d bytes", MaxDescription)
	}
	if c := r.Change; c != nil {
		if len(c.Old) == 0 || len(c.New) == 0 {
			return errors.New("change without old and new definitions")
		}
		if len(c.Old) > MaxArgs || len(c.New) > MaxArgs {
			return fmt.Errorf("tool definition larger than %d bytes", MaxArgs)
		}
	}
	if p := r.Plan; p != nil {
		if len(p.Steps) == 0 || len(p.Steps) > MaxPlanSteps {
			return fmt.Errorf("a plan has from 1 to %d steps", MaxPlanSteps)
		}
		if err := checkField("plan program", p.Program, true); err != nil {
			return err
		}
		if err := checkField("plan hash", p.Hash, true); err != nil {
			return err
		}
		for _, st := range p.Steps {
			for _, f := range []struct{ name, v string }{{"step name", st.Name}, {"step kind", st.Kind}, {"step server", st.Server}, {"step tool", st.Tool}} {
				if err := checkField(f.name, f.v, f.name == "step name" || f.name == "step kind"); err != nil {
					return err
				}
			}
			if len(st.Args) > MaxArgs || len(st.Detail) > MaxDescription {
				return fmt.Errorf("plan step %s larger than %d bytes", st.Name, MaxArgs)
			}
		}
	}
	return nil
}

// checkField checks a short field: bounded, and free of control characters
// (an id or a name is never multi-line).
func checkField(name, v string, required bool) error {
	if required && v == "" {
		return fmt.Errorf("no %s", name)
	}
	if len(v) > maxField {
		return fmt.Errorf("%s longer than %d bytes", name, maxField)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s holds a control character", name)
		}
	}
	return nil
}

// isKey reports whether s has the form of a Key: 64 lowercase hex digits.
func isKey(s string) bool { return len(s) == 64 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
