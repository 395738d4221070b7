package receipts

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

func TestActivity(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	start := time.Now().Add(-time.Minute)
	call := func(server, decision, status string) {
		t.Helper()
		r := sampleReceipt()
		r.Server, r.Decision, r.Capability = server, decision, entry.Capability(server, r.Tool)
		e, err := l.AppendReceipt(ctx, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if status != "" {
			if _, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: e.ID, Status: status}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	call("files", entry.Allow, entry.Succeeded)
	call("files", entry.Allow, entry.Failed)
	call("files", entry.Deny, "")
	call("github", entry.ApprovalRequired, "")
	call("github", entry.Allow, entry.Succeeded)

	got, err := l.Activity(ctx, start, start.Add(2*time.Hour), time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Bucket{
		{Start: start, Allowed: 3, Denied: 1, Pending: 1, Failed: 1},
		{Start: start.Add(time.Hour)},
	}
	if len(got) != len(want) {
		t.Fatalf("Activity = %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || got[i].Allowed != want[i].Allowed || got[i].Denied != want[i].Denied ||
			got[i].Pending != want[i].Pending || got[i].Failed != want[i].Failed {
			t.Errorf("bucket %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got[0].Calls() != 5 {
		t.Errorf("Calls() = %d, want 5", got[0].Calls())
	}

	got, err = l.Activity(ctx, start, start.Add(time.Hour), time.Hour, "github")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Allowed != 1 || got[0].Pending != 1 || got[0].Denied != 0 {
		t.Errorf("Activity of github = %+v, want 1 allowed and 1 pending", got)
	}

	// Before the calls: empty buckets.
	got, err = l.Activity(ctx, start.Add(-3*time.Hour), start, time.Hour, "")
	if err != nil || len(got) != 3 || got[0].Calls()+got[1].Calls()+got[2].Calls() != 0 {
		t.Errorf("Activity before the calls = %+v, %v; want 3 empty buckets", got, err)
	}

	for _, bad := range []struct {
		from, to time.Time
		step     time.Duration
	}{
		{start, start, time.Hour},
		{start, start.Add(time.Hour), 0},
		{start, start.Add(time.Hour), time.Nanosecond},
	} {
		if _, err := l.Activity(ctx, bad.from, bad.to, bad.step, ""); !errors.Is(err, ErrQuery) {
			t.Errorf("Activity(%v, %v, %v) = %v, want ErrQuery", bad.from, bad.to, bad.step, err)
		}
	}

	first, err := l.First(ctx)
	if err != nil || first.Before(start) || first.After(time.Now()) {
		t.Errorf("First() = %v, %v; want the time of the key entry", first, err)
	}
}
