package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/tomltext"
)

// A Budget caps how many calls to some tools may run: at most Calls in any
// Window, counted for each proxy session or for each server (across every
// session of every client). A call that would go over is denied, whatever
// the rules say, and the model is told which budget and when it can try
// again. Only calls that were allowed to run count.
//
// In the text format:
//
//	[[budget]]
//	id = "github-writes"
//	capability = "mcp.github.create_*"
//	per = "server"
//	calls = 20
//	window = "1h"
type Budget struct {
	ID string
	// Capability is a glob over mcp.<server>.<tool>, as in rules; tool
	// names match regardless of case (a budget is a limit, and a limit
	// must not be slipped by spelling a name differently).
	Capability string
	Per        Scope
	Calls      int
	// Window is the span the calls are counted over; zero means the whole
	// session (only for Per session).
	Window time.Duration
	Note   string
}

// A Scope is what a budget counts over.
type Scope string

// Budget scopes.
const (
	PerSession Scope = "session" // each proxy session on its own
	PerServer  Scope = "server"  // every session of every client together
)

// Limits on budgets.
const (
	MinBudgetWindow = time.Second
	MaxBudgetWindow = 31 * 24 * time.Hour
)

// Matches reports whether the budget counts calls to tool on server.
func (b *Budget) Matches(server, tool string) bool {
	s, t, ok := SplitCapability(b.Capability)
	return ok && glob(s, server, false) && glob(t, tool, true)
}

// ToolGlob is the tool part of the budget's capability.
func (b *Budget) ToolGlob() string {
	_, t, _ := SplitCapability(b.Capability)
	return t
}

// Budgets returns the budgets that count a call to tool on server.
func (p *Policy) BudgetsFor(server, tool string) []Budget {
	var out []Budget
	for _, b := range p.Budgets {
		if b.Matches(server, tool) {
			out = append(out, b)
		}
	}
	return out
}

// Budget returns the budget with id, or nil.
func (p *Policy) Budget(id string) *Budget {
	for i := range p.Budgets {
		if p.Budgets[i].ID == id {
			return &p.Budgets[i]
		}
	}
	return nil
}

// Describe says what the budget allows, for people and models: "20 calls
// to mcp.github.create_* per hour for each server".
func (b *Budget) Describe() string {
	calls := fmt.Sprintf("%d calls", b.Calls)
	if b.Calls == 1 {
		calls = "1 call"
	}
	if b.Window == 0 {
		return fmt.Sprintf("%s to %s per session", calls, b.Capability)
	}
	who := "in each session"
	if b.Per == PerServer {
		who = "across all sessions"
	}
	return fmt.Sprintf("%s to %s in any %s, %s", calls, b.Capability, formatWindow(b.Window), who)
}

// formatWindow writes a window the way people say it: "hour", "10 minutes".
func formatWindow(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d%u.d == 0 {
			if n := d / u.d; n != 1 {
				return fmt.Sprintf("%d %ss", n, u.name)
			}
			return u.name
		}
	}
	return d.String()
}

// parseWindow reads "90s", "10m", "1h", "1d" or "7d".
func parseWindow(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(days, "%d", &n); err != nil || fmt.Sprint(n) != days {
			return 0, fmt.Errorf("window %q: want a duration such as 30s, 10m, 1h or 7d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("window %q: want a duration such as 30s, 10m, 1h or 7d", s)
	}
	return d, nil
}

// formatWindowText writes a window in the text format.
func formatWindowText(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	s := d.String() // 1h0m0s, 10m0s, 1h30m0s, 45s
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func parseBudget(t map[string]any, fail func(key, format string, args ...any) error, i int) (Budget, error) {
	var b Budget
	name := fmt.Sprintf("budget %d", i+1)
	if id, ok := t["id"].(string); ok && id != "" {
		name = fmt.Sprintf("budget %q", id)
	}
	str := func(key string) (string, error) {
		s, ok := t[key].(string)
		if !ok {
			return "", fail(key, "%s: %s: want a string, not %s", name, key, tomlType(t[key]))
		}
		return s, nil
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		var err error
		switch k {
		case "id":
			b.ID, err = str(k)
		case "capability":
			b.Capability, err = str(k)
		case "note":
			b.Note, err = str(k)
		case "per":
			var s string
			if s, err = str(k); err == nil {
				b.Per = Scope(strings.ToLower(strings.TrimSpace(s)))
			}
		case "calls":
			n, ok := t[k].(int64)
			if !ok {
				return b, fail(k, "%s: calls: want a whole number, not %s", name, tomlType(t[k]))
			}
			if n < 0 || n > 1<<31 {
				return b, fail(k, "%s: calls: %d is out of range", name, n)
			}
			b.Calls = int(n)
		case "window":
			var s string
			if s, err = str(k); err == nil {
				if b.Window, err = parseWindow(s); err != nil {
					err = fail(k, "%s: %v", name, err)
				}
			}
		default:
			err = fail(k, "%s: unknown setting %q (want id, capability, per, calls, window or note)", name, k)
		}
		if err != nil {
			return b, err
		}
	}
	if _, ok := t["calls"]; !ok {
		return b, fail("id", "%s: calls is missing (how many calls may run)", name)
	}
	return b, nil
}

// validate checks a budget; key names the setting at fault.
func (b *Budget) validate() (key, msg string) {
	name := fmt.Sprintf("budget %q", b.ID)
	switch {
	case b.ID == "":
		return "id", "budget: id is missing"
	case validateText(b.ID, false) != nil || strings.ContainsAny(b.ID, " \t"):
		return "id", fmt.Sprintf("budget id %q: use letters, digits and punctuation, no spaces", b.ID)
	case b.Capability == "":
		return "capability", name + ": capability is missing"
	}
	if err := validateCapability(b.Capability); err != nil {
		return "capability", fmt.Sprintf("%s: %v", name, err)
	}
	switch b.Per {
	case PerSession, PerServer:
	default:
		return "per", fmt.Sprintf("%s: per %q: want \"session\" or \"server\"", name, b.Per)
	}
	switch {
	case b.Calls < 0:
		return "calls", fmt.Sprintf("%s: calls must not be negative", name)
	case b.Window == 0 && b.Per == PerServer:
		return "window", fmt.Sprintf("%s: a budget per server needs a window (such as \"1h\" or \"1d\")", name)
	case b.Window != 0 && (b.Window < MinBudgetWindow || b.Window > MaxBudgetWindow):
		return "window", fmt.Sprintf("%s: window %s: want between 1s and 31d", name, b.Window)
	case b.Window%time.Second != 0:
		return "window", fmt.Sprintf("%s: window %s: use whole seconds", name, b.Window)
	}
	return "", ""
}

// formatBudget writes b in the text format.
func formatBudget(w *strings.Builder, b Budget) {
	w.WriteString("\n[[budget]]\n")
	fmt.Fprintf(w, "id = %s\n", tomltext.Quote(b.ID))
	fmt.Fprintf(w, "capability = %s\n", tomltext.Quote(b.Capability))
	fmt.Fprintf(w, "per = %s\n", tomltext.Quote(string(b.Per)))
	fmt.Fprintf(w, "calls = %d\n", b.Calls)
	if b.Window > 0 {
		fmt.Fprintf(w, "window = %s\n", tomltext.Quote(formatWindowText(b.Window)))
	}
	if b.Note != "" {
		fmt.Fprintf(w, "note = %s\n", tomltext.Quote(b.Note))
	}
}
