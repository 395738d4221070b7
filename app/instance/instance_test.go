package instance

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func TestClaimAndRaise(t *testing.T) {
	home, err := os.MkdirTemp("", "ghi") // short: a socket path is bounded
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	first, err := Claim(home)
	if err != nil {
		t.Fatalf("Claim = %v, want the home folder", err)
	}
	shown := make(chan string, 2)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- first.Serve(ctx, func(view string) { shown <- view }) }()

	// A second start is told who holds the folder.
	_, err = Claim(home)
	var re *RunningError
	if !errors.As(err, &re) || !errors.Is(err, ErrRunning) || re.PID != os.Getpid() {
		t.Fatalf("second Claim = %v, want ErrRunning with pid %d", err, os.Getpid())
	}

	// It asks the first to show its window, on a view.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	for _, view := range []string{"", "history"} {
		if err := Raise(rctx, home, view); err != nil {
			t.Fatalf("Raise(%q) = %v", view, err)
		}
		if got := <-shown; got != view {
			t.Errorf("the first app was asked to show %q, want %q", got, view)
		}
	}

	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v after its context ended, want nil", err)
	}
	first.Close()

	// Once the first let go, the folder can be claimed again.
	again, err := Claim(home)
	if err != nil {
		t.Fatalf("Claim after Close = %v", err)
	}
	again.Close()
}

func TestRaiseWithNobody(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := Raise(ctx, t.TempDir(), ""); err == nil {
		t.Fatal("Raise with no app running = nil, want an error")
	}
}
