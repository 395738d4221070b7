package bench

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a [Report] was measured.
type Machine struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"` // from /proc/cpuinfo, when there is one
	GoVersion string `json:"go_version"`
}

// DescribeMachine returns the machine this process runs on.
func DescribeMachine() Machine {
	return Machine{
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		CPUs:      runtime.NumCPU(),
		CPUModel:  cpuModel("/proc/cpuinfo"),
		GoVersion: runtime.Version(),
	}
}

func (m Machine) String() string {
	s := fmt.Sprintf("%s/%s, %d CPUs", m.OS, m.Arch, m.CPUs)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	return s + ", " + m.GoVersion
}

// cpuModel returns the first "model name" in a Linux cpuinfo file, or "".
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// WriteText writes r as a table for people to read.
func (r *Report) WriteText(w io.Writer) error {
	c := r.Config
	var b strings.Builder
	tool := cmp.Or(c.Tool, defaultTool)
	fmt.Fprintf(&b, "machine: %s\n", r.Machine)
	if !c.builtin() {
		fmt.Fprintf(&b, "server: %s, tool %s, argument %s\n", c.Server, tool, cmp.Or(c.Arg, defaultArg))
	}
	if c.Governed {
		fmt.Fprintf(&b, "proxy: governed (every %s call decided by the policy and recorded)\n", tool)
	} else {
		fmt.Fprintf(&b, "proxy: relay only (--pass-through: no policy decision, no receipt)\n")
	}
	fmt.Fprintf(&b, "%s calls: %d per mode, concurrency %d, %d-byte messages, %d interleaved rounds per mode\n\n",
		tool, c.Calls, c.Concurrency, c.Payload, c.Rounds)

	row := func(cells ...string) {
		fmt.Fprintf(&b, "%-24s", cells[0])
		for _, c := range cells[1:] {
			fmt.Fprintf(&b, "%11s", c)
		}
		b.WriteByte('\n')
	}
	row(tool+" calls", "calls/s", "p50", "p90", "p99", "max")
	for _, m := range []struct {
		name string
		c    Calls
	}{{"  direct", r.Direct}, {"  proxy", r.Proxy}} {
		if m.name == "  proxy" && r.Relay != nil {
			row("  relay (--pass-through)", fmt.Sprintf("%.0f", r.Relay.PerSecond), ms(r.Relay.P50), ms(r.Relay.P90), ms(r.Relay.P99), ms(r.Relay.Max))
			m.name = "  governed"
		}
		row(m.name, fmt.Sprintf("%.0f", m.c.PerSecond), ms(m.c.P50), ms(m.c.P90), ms(m.c.P99), ms(m.c.Max))
	}
	if f := r.Fsync; f != nil {
		row("  one fsync (home disk)", fmt.Sprint(f.Samples), ms(f.P50), ms(f.P90), "", "")
	}
	if p := r.Phases; p != nil {
		fmt.Fprintf(&b, "  governed, in the proxy: decide p50 %s; receipt durable p50 %s, p90 %s, p99 %s (%d calls)\n",
			ms(p.DecideP50), ms(p.ReceiptP50), ms(p.ReceiptP90), ms(p.ReceiptP99), p.Calls)
	}
	b.WriteByte('\n')
	row("start-up to initialize", "samples", "p50", "p90", "min", "max")
	for _, m := range []struct {
		name string
		s    Startup
	}{{"  direct", r.StartDirect}, {"  proxy", r.StartProxy}} {
		if m.name == "  proxy" && r.StartRelay != nil {
			s := r.StartRelay
			row("  relay", fmt.Sprint(s.Samples), ms(s.P50), ms(s.P90), ms(s.Min), ms(s.Max))
			m.name = "  governed"
		}
		row(m.name, fmt.Sprint(m.s.Samples), ms(m.s.P50), ms(m.s.P90), ms(m.s.Min), ms(m.s.Max))
	}

	ratios := make([]string, len(r.RoundRatios))
	for i, x := range r.RoundRatios {
		ratios[i] = pct(x)
	}
	if f := r.Fleet; f != nil {
		b.WriteByte('\n')
		row(fmt.Sprintf("%d proxies at once", f.Proxies), "calls/s", "p50", "p90", "p99", "max")
		row("  all calls", fmt.Sprintf("%.0f", f.PerSecond), ms(f.P50), ms(f.P90), ms(f.P99), ms(f.Max))
		if p := r.FleetPhases; p != nil {
			fmt.Fprintf(&b, "  in the proxies: decide p50 %s; receipt durable p50 %s, p90 %s, p99 %s\n",
				ms(p.DecideP50), ms(p.ReceiptP50), ms(p.ReceiptP90), ms(p.ReceiptP99))
		}
	}
	if m := r.ProxyMemory; m.Idle > 0 {
		fmt.Fprintf(&b, "\nproxy memory (resident): %s once started, %s at most under the calls\n", mb(m.Idle), mb(m.Peak))
	}
	fmt.Fprintf(&b, "\nproxy/direct throughput: %s (round by round: %s)\n", pct(r.Ratio), strings.Join(ratios, ", "))
	fmt.Fprintf(&b, "start-up added by the proxy (p50 - p50): %s\n", ms(r.StartAdded))
	fmt.Fprintf(&b, "goal: proxy keeps >= %s of direct throughput: %s\n", pct(GoalThroughput), verdict(r.ThroughputMet()))
	if c.builtin() {
		fmt.Fprintf(&b, "goal: proxy starts in < %s (p50): %s\n", ms(GoalStartup), verdict(r.StartupMet()))
	} else {
		fmt.Fprintf(&b, "goal: proxy adds < %s to the server's start-up (p50 - p50): %s\n", ms(GoalStartup), verdict(r.StartupMet()))
	}
	if met, ok := r.GovernedMet(); ok {
		fmt.Fprintf(&b, "goal: governed p50 <= relay p50 + fsync p50 + %s (%s <= %s + %s + %s): %s\n",
			ms(GoalGovernedOverFsync), ms(r.Proxy.P50), ms(r.Relay.P50), ms(r.Fsync.P50), ms(GoalGovernedOverFsync), verdict(met))
	}
	if f := r.Fleet; f != nil && c.Governed {
		fmt.Fprintf(&b, "goal: %d governed proxies >= %d calls/s in all, p99 <= %s: %s\n",
			f.Proxies, GoalFleetCalls, ms(GoalFleetP99), verdict(r.FleetMet()))
	}
	if l := r.Load; l[0][0] > 0 {
		fmt.Fprintf(&b, "load average: %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end\n",
			l[0][0], l[0][1], l[0][2], l[1][0], l[1][1], l[1][2])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}
