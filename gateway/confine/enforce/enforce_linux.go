package enforce

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/gatehouse-dev/gatehouse/gateway/confine"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Exec restricts this process with Landlock as p says, sets no_new_privs,
// and replaces the process with argv[0] (an absolute path), started with
// argv and env. It returns only on failure.
//
// Exec MUST NOT start the program unless all of p is in force: any error
// while building or applying the restriction returns before the exec.
// What the kernel's ABI cannot restrict beyond p.MinABI (IPC scoping before
// ABI 6, device ioctls before ABI 5) is left out, as go-landlock's best
// effort does; p.MinABI is checked first.
func Exec(p confine.Plan, argv, env []string) error {
	if len(argv) == 0 {
		return errors.New("no program to start")
	}
	v, err := confine.ABI()
	if err != nil {
		return fmt.Errorf("%w: %v", confine.ErrUnavailable, err)
	}
	if v < p.MinABI {
		return fmt.Errorf("%w: the kernel's Landlock ABI is %d, the plan needs %d", confine.ErrUnavailable, v, p.MinABI)
	}
	cfg := landlock.V7.BestEffort()
	if p.AnyNet {
		cfg.HandledAccessNet = 0
	}
	var rules []landlock.Rule
	for _, r := range p.Read {
		rule, err := pathRule(r, false)
		if err != nil {
			return err
		}
		rules = append(rules, rule)
	}
	for _, w := range p.Write {
		rule, err := pathRule(w, true)
		if err != nil {
			return err
		}
		rules = append(rules, rule)
	}
	if !p.AnyNet {
		for _, port := range p.Connect {
			rules = append(rules, landlock.ConnectTCP(port))
		}
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("build the Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return fmt.Errorf("%w: Landlock has nothing to enforce on this kernel", confine.ErrUnavailable)
	}
	// The restriction applies to this thread, and execve keeps it: the
	// thread must not change between the two.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("apply the Landlock ruleset: %w", err)
	}
	unix.Close(fd)
	return syscall.Exec(argv[0], argv, env)
}

// pathRule grants path: a folder and what is under it, or one file.
func pathRule(path string, write bool) (landlock.Rule, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("grant %s: %w", path, err)
	}
	switch {
	case fi.IsDir() && write:
		return landlock.RWDirs(path).WithRefer(), nil
	case fi.IsDir():
		return landlock.RODirs(path), nil
	case write:
		return landlock.RWFiles(path), nil
	}
	return landlock.ROFiles(path), nil
}
