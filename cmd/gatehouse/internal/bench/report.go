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
		row(m.name, fmt.Sprintf("%.0f", m.c.PerSecond), ms(m.c.P50), ms(m.c.P90), ms(m.c.P99), ms(m.c.Max))
	}
	b.WriteByte('\n')
	row("start-up to initialize", "samples", "p50", "p90", "min", "max")
	for _, m := range []struct {
		name string
		s    Startup
	}{{"  direct", r.StartDirect}, {"  proxy", r.StartProxy}} {
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
