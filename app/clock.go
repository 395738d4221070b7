package app

import "time"

// A clock tells the time and runs functions later. The approval window
// counts down and arms its buttons with one; tests drive their own.
type clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed, unless
	// the returned stop is called first.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// systemClock is the real time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
