package filelock

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	a, b := New(path), New(path)
	unlock, err := a.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Mutex{a, b} {
		if m == b && !Supported {
			continue // two Mutexes of one path exclude each other through the file only
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if _, err := m.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock while the lock is held = %v, want it to wait until ctx ends", err)
		}
		cancel()
	}
	unlock()
	// The waits given up leave both usable.
	for _, m := range []*Mutex{b, a, b} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		unlock, err := m.Lock(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Lock after the holder let go: %v", err)
		}
		unlock()
	}

	// Goroutines taking turns, through one Mutex or several, never overlap.
	var wg sync.WaitGroup
	var mu sync.Mutex
	inside, most := 0, 0
	for i := range 8 {
		m := a
		if i%2 == 1 && Supported {
			m = New(path)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				unlock, err := m.Lock(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				mu.Lock()
				inside--
				mu.Unlock()
				unlock()
			}
		}()
	}
	wg.Wait()
	if most != 1 {
		t.Errorf("%d holders at once", most)
	}
}

// A process that dies holding the lock lets go of it.
func TestLockDiesWithItsProcess(t *testing.T) {
	if !Supported {
		t.Skip("no file locks on this system")
	}
	if path := os.Getenv("FILELOCK_HOLD"); path != "" {
		unlock, err := New(path).Lock(context.Background())
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(time.Minute)
		unlock()
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLockDiesWithItsProcess$")
	cmd.Env = append(os.Environ(), "FILELOCK_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("holder: %q, %v", line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	m := New(path)
	if _, err := m.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while another process holds it = %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the holder died: %v", err)
	}
	unlock()
}

// BenchmarkLock measures an uncontended lock and unlock.
func BenchmarkLock(b *testing.B) {
	m := New(filepath.Join(b.TempDir(), "x.lock"))
	ctx := context.Background()
	for range b.N {
		unlock, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
}

// TryLock holds the lock for as long as its file is open, without waiting,
// against another TryLock and a Mutex alike; what the holder writes stays
// readable.
func TestTryLock(t *testing.T) {
	if !Supported {
		t.Skip("no file locks on this system")
	}
	path := filepath.Join(t.TempDir(), "x.pid")
	f, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("42\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock while held = %v, want ErrLocked", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	m := New(path)
	if _, err := m.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Mutex.Lock while TryLock holds = %v, want it to wait", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "42\n" {
		t.Fatalf("reading the held file = %q, %v", b, err)
	}
	f.Close()
	// The Mutex's given-up wait takes the lock as it comes and lets go at
	// once: taking and leaving the Mutex waits until it has.
	unlock, err := m.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	g, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after the holder closed = %v", err)
	}
	g.Close()
}
