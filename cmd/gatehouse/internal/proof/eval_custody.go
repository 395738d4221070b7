package proof

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// custodyCases check that the home folder is its user's alone, and that
// its processes share one signing key however many start at once.
func custodyCases() []Case {
	return []Case{
		{
			Family: SecretLeakage, Name: "the home's files are owner-only",
			Claim: "after a session and an export into a folder made in the home, no file or folder of the home has a permission bit for the group or others",
			Run: func(ctx context.Context, t *T) error {
				if runtime.GOOS == "windows" {
					return fmt.Errorf("%w: Windows files have no mode bits", ErrSkip)
				}
				l, s, err := t.stdSession(ctx)
				if err != nil {
					return err
				}
				if res, err := s.CallTool(ctx, "echo", map[string]any{"message": "kept to the owner"}); err != nil {
					return err
				} else if res.IsError {
					return fmt.Errorf("the allowed call was refused: %.300s", res.Raw)
				}
				s.Close()
				// A folder for exports, made as mkdir makes it.
				exports := filepath.Join(l.Home, "exports")
				if err := os.Mkdir(exports, 0o700); err != nil {
					return err
				}
				if err := os.Chmod(exports, 0o755); err != nil {
					return err
				}
				if err := l.Must(ctx, "export", "--out", filepath.Join(exports, "bundle")); err != nil {
					return err
				}
				open, err := openToOthers(l.Home)
				if err != nil {
					return err
				}
				if len(open) > 0 {
					return fmt.Errorf("other users can reach %d files of the home: %s", len(open), strings.Join(open, ", "))
				}
				return nil
			},
		},
		{
			Family: SecretLeakage, Name: "a home open to others is refused",
			Claim: "a proxy on a home folder other users can read refuses every call, naming the chmod that fixes it, and runs nothing",
			Run: func(ctx context.Context, t *T) error {
				if runtime.GOOS == "windows" {
					return fmt.Errorf("%w: Windows files have no mode bits", ErrSkip)
				}
				l, s, err := t.stdSession(ctx)
				if err != nil {
					return err
				}
				if err := goesOn(ctx, s, "starting"); err != nil {
					return err
				}
				s.Close()
				if err := os.Chmod(l.Home, 0o755); err != nil {
					return err
				}
				// The audit after the case reads the home as its owner has
				// it again.
				defer os.Chmod(l.Home, 0o700)
				s, err = l.Proxy(ctx, serverName)
				if err != nil {
					return err
				}
				marker := "/eval/open-home"
				res, err := s.CallTool(ctx, "read_file", map[string]any{"path": marker})
				if err != nil {
					return err
				}
				if err := refusal("a call on a home open to others", res, "chmod 700 "+l.Home); err != nil {
					return err
				}
				return notRun(l, "read_file", marker)
			},
		},
		{
			Family: EvidenceTampering, Name: "sixteen proxies start on a fresh home",
			Claim: "sixteen proxies started at once on each of four new homes all govern and record their calls, and each home ends with one signing key",
			Run: func(ctx context.Context, t *T) error {
				const homes, proxies = 4, 16
				labs := make([]*Lab, homes)
				for i := range labs {
					l, err := t.Lab()
					if err != nil {
						return err
					}
					// No policy: changing it would create the key.
					if err := l.AddServer(ctx, serverName, "", nil); err != nil {
						return err
					}
					labs[i] = l
				}
				var (
					wg    sync.WaitGroup
					mu    sync.Mutex
					fails []error
				)
				fail := func(err error) {
					mu.Lock()
					fails = append(fails, err)
					mu.Unlock()
				}
				for h, l := range labs {
					for p := range proxies {
						wg.Go(func() {
							s, err := l.Connect(ctx, serverName)
							if err != nil {
								fail(fmt.Errorf("home %d, proxy %d: %w", h, p, err))
								return
							}
							marker := fmt.Sprintf("/eval/fresh-%d-%d", h, p)
							res, err := s.CallTool(ctx, "read_file", map[string]any{"path": marker})
							if err != nil {
								fail(fmt.Errorf("home %d, proxy %d: %w", h, p, err))
							} else if res.IsError {
								fail(fmt.Errorf("home %d, proxy %d: the call was refused: %.300s", h, p, res.Text))
							}
						})
					}
				}
				wg.Wait()
				for h, l := range labs {
					out, _, err := l.Gatehouse(ctx, "", "keys", "list")
					if err != nil {
						fails = append(fails, fmt.Errorf("home %d after the start: %w", h, err))
						continue
					}
					if n := strings.Count(strings.TrimSpace(out), "\n"); n != 1 {
						fails = append(fails, fmt.Errorf("home %d has %d signing keys, want 1: %s", h, n, out))
					}
					s, err := l.Connect(ctx, serverName)
					if err != nil {
						return err
					}
					res, err := s.CallTool(ctx, "read_file", map[string]any{"path": "/eval/fresh-later"})
					if err != nil {
						return err
					}
					if res.IsError {
						fails = append(fails, fmt.Errorf("home %d: a proxy started later was refused: %.300s", h, res.Text))
					}
				}
				if len(fails) > 0 {
					return fmt.Errorf("%d failures, the first: %w", len(fails), fails[0])
				}
				return nil
			},
		},
	}
}

// openToOthers returns the files and folders under dir (dir included) that
// have a permission bit for the group or others, with their modes.
func openToOthers(dir string) ([]string, error) {
	var open []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			rel, _ := filepath.Rel(dir, path)
			open = append(open, fmt.Sprintf("%s (%04o)", rel, perm))
		}
		return nil
	})
	return open, err
}
