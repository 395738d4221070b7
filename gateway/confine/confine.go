// Package confine holds a stdio MCP server to the files and the network it
// needs, without a container.
//
// The gate decides on the calls a server is asked to make; confinement limits
// what the server can do whatever it is asked, or whatever it decides to do
// by itself: read ~/.ssh, the browser's cookies or Gatehouse's own database,
// write into the Gatehouse home, or connect anywhere.
//
// # How
//
// On Linux the kernel's Landlock LSM does it. Go cannot run code between
// fork and exec, so a confined server is started through the gatehouse
// binary itself: [Prepare] turns the server's command into
// `gatehouse confine --read ... --write ... --connect ... -- COMMAND ARGS`,
// and that hidden command (package [enforce]) restricts its own process with
// Landlock, sets no_new_privs, and execs the server, which keeps the
// restriction, as do the processes it starts.
//
// # What a server may reach
//
// A confined server may read and execute:
//
//   - the system's programs and libraries (/usr, /lib, /lib64, /bin, /sbin),
//     the few files of /etc a program needs to run (the dynamic linker's
//     cache, name service, time zone and TLS certificates), /proc/self and
//     what a runtime reads to count CPUs and memory;
//   - its own install: the resolved program's folder, and for a program or
//     script inside a node_modules folder, that whole node_modules tree (a
//     Node package's dependencies are hoisted beside it);
//   - its working folder, and the files its arguments name;
//   - the folders and files the registration declares (Request.Read).
//
// It may also write:
//
//   - a private temporary folder, made for it and removed after it exits,
//     named in TMPDIR, TMP and TEMP;
//   - /dev/null and /dev/zero;
//   - the folders its arguments name (a filesystem server's allowed
//     folders), and the files its environment names (a memory server's
//     MEMORY_FILE_PATH);
//   - the folders and files the registration declares (Request.Write).
//
// And it may connect over TCP only to the ports the registration declares
// (Request.Net), or to any when it declares "*". Landlock restricts TCP
// connect and bind by port (ABI 4 and later): it knows ports, not hosts, and
// here it does not restrict UDP or Unix sockets (docs/security.md says what
// that leaves open).
//
// No folder that holds the Gatehouse home, or lies inside it, is ever
// granted: [Prepare] refuses a registration that would.
//
// # When it cannot be applied
//
// [Prepare] fails, before anything starts, when the kernel has no Landlock
// (or too old a one for a network restriction): [ErrUnavailable]; and when a
// declared folder does not exist, or would expose the home: a
// [*PathError]. A caller that starts the server anyway must have been told
// it may ([Request.UnconfinedOK] is the registration saying so); a server
// meant to be confined never starts unconfined silently.
package confine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway"
)

// Landlock is the name of the Linux mechanism, as receipts record it.
const Landlock = "landlock"

// Command is the hidden gatehouse subcommand that applies a [Plan] and
// starts the server.
const Command = "confine"

// NetABI is the first Landlock ABI that restricts TCP ports.
const NetABI = 4

// ErrUnavailable says this system cannot confine a server as asked.
var ErrUnavailable = errors.New("confinement is not available")

// A Request is what a server's registration asks its confinement to allow,
// beyond what every server gets.
type Request struct {
	Read  []string // folders and files it may read and execute
	Write []string // folders and files it may also write
	// Net are the TCP ports it may connect to ("443"); "*" allows any
	// connection. Empty: none.
	Net []string
	// Home is the Gatehouse home folder: never granted.
	Home string
}

// A Plan is exactly what a confined server may reach: what `gatehouse
// confine` applies. Paths are absolute and clean.
type Plan struct {
	Read    []string // read and execute
	Write   []string // read, write and execute
	Connect []uint16 // TCP ports it may connect to
	AnyNet  bool     // no network restriction at all
	MinABI  int      // the least Landlock ABI that applies the plan whole
}

// Status says whether a server was confined, and how: what a receipt
// records.
type Status struct {
	Confined  bool
	Mechanism string // Landlock; empty when not confined
	ABI       int    // the kernel's Landlock ABI; 0 when not confined
}

// A Prepared server is a confined command ready to start.
type Prepared struct {
	Command gateway.Command // gatehouse confine ... -- the server
	Plan    Plan
	Status  Status
	// Notes are what the user should know before the server starts: paths
	// its command line names that do not exist, and so stay out of its
	// reach.
	Notes   []string
	tempDir string
}

// Cleanup removes the server's private temporary folder. Call it after
// the server has exited.
func (p *Prepared) Cleanup() {
	if p != nil && p.tempDir != "" {
		os.RemoveAll(p.tempDir)
	}
}

// A PathError says why a declared path cannot be granted.
type PathError struct {
	Path string
	Why  string
}

func (e *PathError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Why) }

// ABI returns the kernel's Landlock ABI version, or 0 and the reason there
// is none.
func ABI() (int, error) { return abi() }

// NeedABI is the least Landlock ABI that confines a server allowed to
// connect to the TCP ports net as it asks: restricting ports needs
// [NetABI]; any port ("*") needs no restriction of the network.
func NeedABI(net []string) int {
	if slices.Contains(net, "*") {
		return 1
	}
	return NetABI
}

// ParsePort reads one Request.Net entry: a TCP port, or "*".
func ParsePort(s string) (port uint16, anyPort bool, err error) {
	if s == "*" {
		return 0, true, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, false, fmt.Errorf("%q is not a TCP port (1-65535) or *: Landlock restricts ports, not hosts", s)
	}
	return uint16(n), false, nil
}

// systemRead are the system folders and files every confined server may
// read (and execute): what a dynamically linked program and the common
// runtimes need to start. Missing ones are skipped.
var systemRead = []string{
	"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/host.conf",
	"/etc/resolv.conf", "/etc/gai.conf", "/etc/localtime", "/etc/timezone",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
	"/etc/alternatives", "/etc/os-release", "/etc/mime.types", "/etc/nodejs",
	"/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/version",
	"/proc/sys/kernel", "/proc/sys/vm/overcommit_memory",
	"/sys/devices/system/cpu", "/sys/fs/cgroup",
	"/dev/urandom", "/dev/random",
}

// systemWrite are the device files every confined server may write.
var systemWrite = []string{"/dev/null", "/dev/zero", "/dev/full"}

// Prepare plans the confinement of cmd as req asks and returns the command
// that starts it confined through self (the gatehouse binary). It makes the
// server's private temporary folder; [Prepared.Cleanup] removes it.
//
// Prepare MUST fail, and start nothing, when the plan cannot be applied
// whole: no Landlock, or an ABI too old to restrict the network as asked
// ([ErrUnavailable]), a declared path that does not exist, or a path that
// would give the server the Gatehouse home ([*PathError]).
func Prepare(self string, cmd gateway.Command, req Request) (*Prepared, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: Landlock is Linux's; on %s Gatehouse cannot confine a server yet (docs/security.md)", ErrUnavailable, runtime.GOOS)
	}
	v, err := ABI()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var plan Plan
	plan.MinABI = 1
	for _, n := range req.Net {
		port, anyPort, err := ParsePort(n)
		if err != nil {
			return nil, err
		}
		if anyPort {
			plan.AnyNet = true
			continue
		}
		if !slices.Contains(plan.Connect, port) {
			plan.Connect = append(plan.Connect, port)
		}
	}
	if !plan.AnyNet {
		plan.MinABI = NetABI
	}
	if v < plan.MinABI {
		return nil, fmt.Errorf("%w: the kernel's Landlock ABI is %d, and restricting the network needs %d (Linux 6.7 or later); declare --allow-net '*' to confine files only", ErrUnavailable, v, plan.MinABI)
	}
	home := ""
	if req.Home != "" {
		if home, err = canonical(req.Home); err != nil {
			return nil, fmt.Errorf("the Gatehouse home %s: %w", req.Home, err)
		}
	}
	var notes []string
	grant := func(list *[]string, p, why string, declared bool) error {
		abs, err := canonical(p)
		if err != nil {
			if !declared {
				return nil
			}
			return &PathError{Path: p, Why: "does not exist (a declared folder must exist before the server starts): " + why}
		}
		if home != "" && (within(home, abs) || within(abs, home)) {
			if !declared {
				// Found, not asked for (the folder of a file its command
				// line names): left out, and the user told.
				notes = append(notes, fmt.Sprintf("%s is not given to the server: it holds the Gatehouse home", abs))
				return nil
			}
			return &PathError{Path: p, Why: fmt.Sprintf("would give the server the Gatehouse home %s (Landlock cannot take back a folder inside one it grants)", home)}
		}
		if !slices.Contains(*list, abs) {
			*list = append(*list, abs)
		}
		return nil
	}
	for _, p := range req.Read {
		if err := grant(&plan.Read, p, "declared readable", true); err != nil {
			return nil, err
		}
	}
	for _, p := range req.Write {
		if err := grant(&plan.Write, p, "declared writable", true); err != nil {
			return nil, err
		}
	}

	env := append(os.Environ(), cmd.Env...)
	path, err := lookPath(cmd.Path, env, cmd.Dir)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", cmd.Path, err)
	}
	// The program, where its link leads, and the install it belongs to.
	for _, p := range install(path) {
		if err := grant(&plan.Read, p, "", false); err != nil {
			return nil, err
		}
	}
	if cmd.Dir != "" {
		if err := grant(&plan.Read, cmd.Dir, "", false); err != nil {
			return nil, err
		}
	}
	for _, a := range cmd.Args {
		if !filepath.IsAbs(a) {
			continue
		}
		fi, err := os.Stat(a)
		switch {
		case err != nil && (covered(plan.Write, a) || covered(plan.Read, a)):
			// Inside a folder it was given.
		case err != nil:
			notes = append(notes, fmt.Sprintf("its argument %s does not exist: confined, the server cannot reach it", a))
		case fi.IsDir():
			if err := grant(&plan.Write, a, "", false); err != nil {
				return nil, err
			}
		default:
			for _, p := range install(a) {
				if err := grant(&plan.Read, p, "", false); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, kv := range cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		if !filepath.IsAbs(v) || strings.ContainsRune(v, os.PathListSeparator) {
			continue
		}
		if _, err := os.Stat(v); err != nil {
			// A file the server will create (a memory file): its folder
			// must be declared, which is the user's to decide.
			if _, perr := os.Stat(filepath.Dir(v)); perr == nil && !covered(plan.Write, v) {
				notes = append(notes, fmt.Sprintf("%s names %s, which does not exist yet: confined, the server can create it only if its folder is declared writable (--allow-write %s)", k, v, filepath.Dir(v)))
			}
			continue
		}
		if err := grant(&plan.Write, v, "", false); err != nil {
			return nil, err
		}
	}
	for _, p := range npmCaches(path, cmd.Args, env) {
		if err := grant(&plan.Write, p, "", false); err != nil {
			return nil, err
		}
	}
	for _, p := range systemRead {
		if _, err := os.Lstat(p); err == nil && !slices.Contains(plan.Read, p) {
			plan.Read = append(plan.Read, p)
		}
	}
	for _, p := range systemWrite {
		if _, err := os.Stat(p); err == nil && !slices.Contains(plan.Write, p) {
			plan.Write = append(plan.Write, p)
		}
	}
	tmp, err := os.MkdirTemp("", "gatehouse-server-")
	if err != nil {
		return nil, fmt.Errorf("make the server's temporary folder: %w", err)
	}
	plan.Write = append(plan.Write, tmp)

	args := append([]string{Command}, plan.Args()...)
	args = append(args, "--", path)
	args = append(args, cmd.Args...)
	wrapped := gateway.Command{
		Path: self,
		Args: args,
		Env:  append(slices.Clone(cmd.Env), "TMPDIR="+tmp, "TMP="+tmp, "TEMP="+tmp),
		Dir:  cmd.Dir,
	}
	return &Prepared{Command: wrapped, Plan: plan, Status: Status{Confined: true, Mechanism: Landlock, ABI: v},
		Notes: notes, tempDir: tmp}, nil
}

// Args renders p as the flags of `gatehouse confine`.
func (p Plan) Args() []string {
	var out []string
	for _, r := range p.Read {
		out = append(out, "--read", r)
	}
	for _, w := range p.Write {
		out = append(out, "--write", w)
	}
	for _, c := range p.Connect {
		out = append(out, "--connect", strconv.Itoa(int(c)))
	}
	if p.AnyNet {
		out = append(out, "--any-net")
	}
	out = append(out, "--min-abi", strconv.Itoa(p.MinABI))
	return out
}

// canonical returns p absolute, clean, with its symbolic links followed; it
// fails when p does not exist.
func canonical(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

// within reports whether p is dir or inside it.
func within(dir, p string) bool {
	if dir == p {
		return true
	}
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func covered(list []string, p string) bool {
	for _, d := range list {
		if within(d, p) {
			return true
		}
	}
	return false
}

// install returns what running program or script p needs to read: p, where
// its links lead, and for anything inside a node_modules folder the
// outermost node_modules folder above it (Node resolves a package's
// dependencies up that tree), or else p's folder.
func install(p string) []string {
	out := []string{p}
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		out = append(out, real)
	}
	for _, f := range slices.Clone(out) {
		if nm := outerNodeModules(f); nm != "" {
			out = append(out, nm)
		} else {
			out = append(out, filepath.Dir(f))
		}
	}
	return out
}

// outerNodeModules returns the outermost folder named node_modules that
// holds p, or "".
func outerNodeModules(p string) string {
	parts := strings.Split(filepath.Clean(p), string(filepath.Separator))
	for i, part := range parts {
		if part == "node_modules" {
			return string(filepath.Separator) + filepath.Join(parts[:i+1]...)
		}
	}
	return ""
}

// npmCaches returns the npm cache a server started with npx needs: npx
// looks for the package there, and keeps its own lock files in it. npx
// also asks the registry whether a newer version exists, which needs the
// network (port 443) unless the package is already in the cache and the
// registration sets npm_config_offline=true.
func npmCaches(path string, args, env []string) []string {
	base := filepath.Base(path)
	if base != "npx" && base != "npm" && !(base == "node" && len(args) > 0 && strings.Contains(args[0], "npx-cli")) {
		if real, err := filepath.EvalSymlinks(path); err != nil || !strings.Contains(real, "npx-cli") {
			return nil
		}
	}
	cache := envValue(env, "npm_config_cache")
	if cache == "" {
		home := envValue(env, "HOME")
		if home == "" {
			return nil
		}
		cache = filepath.Join(home, ".npm")
	}
	return []string{cache}
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val // the last wins, as exec.Cmd has it
		}
	}
	return v
}

// lookPath finds program as exec would, in the PATH of env.
func lookPath(program string, env []string, dir string) (string, error) {
	if strings.ContainsRune(program, filepath.Separator) {
		p := program
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(abs); err != nil {
			return "", err
		}
		return abs, nil
	}
	for _, d := range filepath.SplitList(envValue(env, "PATH")) {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, program)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
