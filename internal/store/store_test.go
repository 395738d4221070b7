package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// The test binary doubles as a second Gatehouse process: with the role
// variable set, TestMain opens the home folder given and adds servers.
const roleEnv = "GATEHOUSE_STORE_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "writer" {
		if err := writer(os.Getenv("HOME_DIR"), os.Getenv("WRITER_ID")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func writer(dir, id string) error {
	ctx := context.Background()
	st, err := Open(ctx, dir, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	for i := range 25 {
		if err := st.AddServer(ctx, Server{Name: fmt.Sprintf("w%s-%d", id, i), Command: "cat"}); err != nil {
			return err
		}
	}
	return nil
}

// MustOpen opens a store in a fresh temporary home folder.
func MustOpen(tb testing.TB) *Store {
	tb.Helper()
	st, err := Open(context.Background(), tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func TestServers(t *testing.T) {
	ctx := context.Background()
	st := MustOpen(t)
	want := Server{
		Name: "files", Transport: TransportStdio, Command: "npx",
		Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/my projects"},
		Env:  map[string]string{"LOG": "debug", "EMPTY": ""}, Cwd: "/tmp",
	}
	if err := st.AddServer(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := st.AddServer(ctx, want); !errors.Is(err, ErrExists) {
		t.Errorf("AddServer(duplicate) = %v, want ErrExists", err)
	}
	got, err := st.Server(ctx, "files")
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt.IsZero() {
		t.Error("CreatedAt is zero")
	}
	got.CreatedAt, got.UpdatedAt = want.CreatedAt, want.UpdatedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Server(files) = %+v, want %+v", got, want)
	}
	if got, want := got.EnvList(), []string{"EMPTY=", "LOG=debug"}; !reflect.DeepEqual(got, want) {
		t.Errorf("EnvList() = %q, want %q", got, want)
	}
	if err := st.AddServer(ctx, Server{Name: "another", Command: "x"}); err != nil {
		t.Fatal(err)
	}
	list, err := st.Servers(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "another" || list[1].Name != "files" {
		t.Errorf("Servers() = %v, %v; want another, files", list, err)
	}
	want.Args = append(want.Args, "/home/me/notes")
	want.Trusted = true
	if err := st.UpdateServer(ctx, want); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Server(ctx, "files"); !reflect.DeepEqual(got.Args, want.Args) || !got.Trusted || !got.UpdatedAt.After(got.CreatedAt) {
		t.Errorf("after UpdateServer: args %q (want %q), updated %v created %v", got.Args, want.Args, got.UpdatedAt, got.CreatedAt)
	}
	if err := st.UpdateServer(ctx, Server{Name: "nobody", Command: "x"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateServer(unknown) = %v, want ErrNotFound", err)
	}
	remote := Server{Name: "linear", Transport: TransportHTTP, URL: "https://mcp.linear.app/mcp",
		Headers: map[string]string{"Authorization": "vault://secret/linear.Authorization"}}
	if err := st.AddServer(ctx, remote); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Server(ctx, "linear"); err != nil || got.URL != remote.URL || !reflect.DeepEqual(got.Headers, remote.Headers) {
		t.Errorf("Server(linear) = %+v, %v; want URL and headers back", got, err)
	}
	if err := st.RemoveServer(ctx, "files"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Server(ctx, "files"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Server after remove = %v, want ErrNotFound", err)
	}
	if err := st.RemoveServer(ctx, "files"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveServer twice = %v, want ErrNotFound", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		s    Server
		ok   bool
	}{
		{"plain", Server{Name: "github", Command: "x"}, true},
		{"dashes and digits", Server{Name: "my-server_2", Command: "x"}, true},
		{"dot would split capabilities", Server{Name: "a.b", Command: "x"}, false},
		{"space", Server{Name: "my server", Command: "x"}, false},
		{"leading dash looks like a flag", Server{Name: "-x", Command: "x"}, false},
		{"empty", Server{Name: "", Command: "x"}, false},
		{"too long", Server{Name: string(make([]byte, 65)), Command: "x"}, false},
		{"no command", Server{Name: "a"}, false},
		{"bad env name", Server{Name: "a", Command: "x", Env: map[string]string{"A=B": "c"}}, false},
		{"http", Server{Name: "a", Transport: TransportHTTP, URL: "https://example.com/mcp"}, true},
		{"http without URL", Server{Name: "a", Transport: TransportHTTP}, false},
		{"http with a file URL", Server{Name: "a", Transport: TransportHTTP, URL: "file:///etc/passwd"}, false},
		{"http with a command", Server{Name: "a", Transport: TransportHTTP, URL: "http://localhost:1/mcp", Command: "x"}, false},
		{"header injection", Server{Name: "a", Transport: TransportHTTP, URL: "http://h/mcp", Headers: map[string]string{"X": "a\r\nEvil: 1"}}, false},
		{"stdio with URL", Server{Name: "a", Command: "x", URL: "http://h/mcp"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.s.Transport == "" {
				tt.s.Transport = TransportStdio
			}
			if err := tt.s.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestOpenUsesWAL(t *testing.T) {
	st := MustOpen(t)
	var mode string
	if err := st.DB().QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

func TestOpenCreatesPrivateHome(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "home")
	st, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("home folder mode = %v, want 0700", perm)
	}
}

func TestOpenFailsClearly(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-folder")
	os.WriteFile(file, []byte("x"), 0o600)
	if _, err := Open(context.Background(), file, nil); err == nil {
		t.Error("Open(a file) succeeded")
	}
	corrupt := t.TempDir()
	os.WriteFile(filepath.Join(corrupt, DatabaseFile), []byte("this is not a database, just text padding it out to a page"), 0o600)
	if _, err := Open(context.Background(), corrupt, nil); err == nil {
		t.Error("Open(a corrupt database) succeeded")
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv(EnvHome, "relative/home")
	dir, err := DefaultDir()
	if err != nil || !filepath.IsAbs(dir) || filepath.Base(dir) != "home" {
		t.Errorf("DefaultDir() with %s set = %q, %v; want its absolute path", EnvHome, dir, err)
	}
	t.Setenv(EnvHome, "")
	dir, err = DefaultDir()
	if err != nil || !filepath.IsAbs(dir) {
		t.Errorf("DefaultDir() = %q, %v", dir, err)
	}
}

func TestMigrateAppliesEachStepOnce(t *testing.T) {
	ctx := context.Background()
	st := MustOpen(t)
	steps := []string{`CREATE TABLE t (x INTEGER)`, `INSERT INTO t VALUES (1)`}
	for range 3 {
		if err := st.Migrate(ctx, "test", steps); err != nil {
			t.Fatal(err)
		}
	}
	steps = append(steps, `INSERT INTO t VALUES (2)`)
	if err := st.Migrate(ctx, "test", steps); err != nil {
		t.Fatal(err)
	}
	var n, sum int
	st.DB().QueryRow(`SELECT count(*), sum(x) FROM t`).Scan(&n, &sum)
	if n != 2 || sum != 3 {
		t.Errorf("rows = %d (sum %d), want 2 (sum 3): a step ran twice or not at all", n, sum)
	}
	if err := st.Migrate(ctx, "broken", []string{`CREATE TABLE`}); err == nil {
		t.Error("Migrate(invalid SQL) succeeded")
	}
}

// Several processes open one home folder at once, migrating and writing: no
// write is lost and none fails with SQLITE_BUSY.
func TestConcurrentProcesses(t *testing.T) {
	dir := t.TempDir()
	const n = 4
	cmds := make([]*exec.Cmd, n)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), roleEnv+"=writer", "HOME_DIR="+dir, "WRITER_ID="+strconv.Itoa(i))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	st, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	list, err := st.Servers(context.Background())
	if err != nil || len(list) != n*25 {
		t.Errorf("after %d writers: %d servers, %v; want %d", n, len(list), err, n*25)
	}
}

// Eight processes open a brand-new home folder at the same moment: the
// switch to WAL and the first migrations race, and every process gets a
// working store. The folder does not exist yet, or exists empty and open
// to others (made by hand or mktemp): one process takes it, and the others,
// which saw it open and then saw the first one's files in it, open it too.
func TestConcurrentFirstOpen(t *testing.T) {
	for round := range 6 {
		dir := filepath.Join(t.TempDir(), "fresh")
		if round%2 == 1 {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
				t.Fatal(err)
			}
		}
		const n = 8
		cmds := make([]*exec.Cmd, n)
		for i := range cmds {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), roleEnv+"=writer", "HOME_DIR="+dir, "WRITER_ID="+strconv.Itoa(round*100+i))
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i] = cmd
		}
		for i, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d, process %d: %v", round, i, err)
			}
		}
	}
}
