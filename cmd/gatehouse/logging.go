package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// maxLogBytes is the size at which the log file is rotated (to .1) on open.
const maxLogBytes = 10 << 20

// logger returns a logger that writes text to stderr and JSON lines to the
// log file at path, shared by every Gatehouse process (appends of whole lines
// with O_APPEND do not interleave). If the file cannot be opened, logging goes
// on to stderr alone and says so once.
func (c *cli) logger(path, component string) (*slog.Logger, func()) {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	stderrOpts := opts
	if c.terminal && !c.logLevelSet {
		stderrOpts = &slog.HandlerOptions{Level: max(c.logLevel, slog.LevelWarn)}
	}
	stderr := slog.NewTextHandler(c.stderr, stderrOpts)
	f, err := openLogFile(path)
	if err != nil {
		l := slog.New(stderr).With(slog.String("component", component))
		l.Warn("log file unavailable; logging to stderr only", slog.Any("err", err))
		return l, func() {}
	}
	file := slog.NewJSONHandler(f, opts)
	l := slog.New(slog.NewMultiHandler(stderr, file)).With(
		slog.String("component", component), slog.Int("pid", os.Getpid()))
	return l, func() { f.Close() }
}

func openLogFile(path string) (io.WriteCloser, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogBytes {
		os.Rename(path, path+".1") // another process may have rotated it already
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}
