package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A mistake in the command line exits 2 with the command's usage line on
// stderr, and nothing on stdout.
func TestUsageErrorsExit2(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		args  []string
		usage string
	}{
		{[]string{"frobnicate"}, "usage: gatehouse [--home DIR] COMMAND [ARGUMENTS]"},
		{[]string{"server", "frob"}, "usage: gatehouse [--home DIR] COMMAND [ARGUMENTS]"},
		{[]string{"history", "--limit", "0"}, "usage: gatehouse history "},
		{[]string{"history", "--decision", "maybe"}, "usage: gatehouse history "},
		{[]string{"server", "list", "--bogus"}, "usage: gatehouse server list"},
		{[]string{"server", "rm"}, "usage: gatehouse server remove NAME"},
		{[]string{"policy", "rm", "a", "b"}, "usage: gatehouse policy remove ID"},
		{[]string{"proxy"}, "usage: gatehouse proxy "},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--home", home}, c.args...), strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.usage) || stdout.Len() != 0 {
			t.Errorf("gatehouse %s: exit %d, stderr %q, stdout %q; want 2 and %q", strings.Join(c.args, " "), code, stderr.String(), stdout.String(), c.usage)
		}
	}
}

// Each group's list and remove answer to ls and rm too.
func TestAliases(t *testing.T) {
	for _, c := range []struct{ alias, name string }{
		{"server ls", "server list"}, {"server rm", "server remove"},
		{"secret ls", "secret list"}, {"secret rm", "secret remove"},
		{"policy rm", "policy remove"}, {"keys ls", "keys list"},
	} {
		cmd, _ := lookup(strings.Fields(c.alias))
		if cmd == nil || cmd.name != c.name {
			t.Errorf("lookup(%q) = %v, want %s", c.alias, cmd, c.name)
		}
	}
	if cmd, _ := lookup([]string{"ls"}); cmd != nil {
		t.Errorf("lookup(ls) = %s: an alias stands only after its group", cmd.name)
	}
}
