package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameReader(t *testing.T) {
	tests := []struct {
		name  string
		input string
		max   int
		want  []string // frames; "!N" stands for a too-large error of N bytes
	}{
		{"lines", "a\nb\n", 100, []string{"a", "b"}},
		{"crlf and blank lines", "a\r\n\r\n  \nb\r\n", 100, []string{"a", "b"}},
		{"last line without newline", "a\nb", 100, []string{"a", "b"}},
		{"too large then normal", strings.Repeat("x", 50) + "\nok\n", 10, []string{"!50", "ok"}},
		{"too large at the end", "ok\n" + strings.Repeat("y", 30), 10, []string{"ok", "!30"}},
		{"exactly the limit", strings.Repeat("z", 10) + "\n", 10, []string{strings.Repeat("z", 10)}},
		{"one over the limit", strings.Repeat("z", 11) + "\n", 10, []string{"!11"}},
		{"at the limit at the end", strings.Repeat("z", 10), 10, []string{strings.Repeat("z", 10)}},
		{"over the limit at the end", strings.Repeat("z", 11), 10, []string{"!11"}},
		{"longer than the read buffer", strings.Repeat("w", 200<<10) + "\n", 1 << 20, []string{strings.Repeat("w", 200<<10)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr := newFrameReader(strings.NewReader(tt.input), tt.max)
			var got []string
			for {
				f, err := fr.next()
				var tl *tooLargeError
				if errors.As(err, &tl) {
					got = append(got, "!"+itoa(int(tl.Size)))
					continue
				}
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(f))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("frames = %q, want %q", got, tt.want)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestHeadFields(t *testing.T) {
	tests := []struct {
		head, wantID, wantMethod string
	}{
		{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"arguments":{"x":"aaaa`, "5", "tools/call"},
		{`{"method":"tools/call","params":{"a":[1,2,{"b":"c"}]},"id":"k"}`, `"k"`, "tools/call"},
		{`{"params":{"huge":"aaaa`, "", ""},
		{`{"id":{"bad":1},"method":"x"}`, "", "x"},
		{`not json`, "", ""},
	}
	for _, tt := range tests {
		id, method := headFields([]byte(tt.head))
		if string(id) != tt.wantID || method != tt.wantMethod {
			t.Errorf("headFields(%.40q) = %s, %q, want %s, %q", tt.head, id, method, tt.wantID, tt.wantMethod)
		}
	}
}

// FuzzFrameReader checks that framing loses nothing: the frames read back are
// the input's non-blank lines, and oversized lines are reported, not dropped
// silently or merged.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\n"), 4)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"x"}`+"\n"), 8)
	f.Add(bytes.Repeat([]byte("q"), 300), 100)
	f.Fuzz(func(t *testing.T, input []byte, max int) {
		if max <= 0 || max > 1<<16 {
			return
		}
		var want []string
		for _, l := range strings.Split(string(input), "\n") {
			switch {
			case len(l) > max:
				want = append(want, "!")
			case len(strings.TrimSpace(strings.TrimRight(l, "\r"))) > 0:
				want = append(want, strings.TrimRight(l, "\r"))
			}
		}
		fr := newFrameReader(bytes.NewReader(input), max)
		var got []string
		for {
			fr, err := fr.next()
			var tl *tooLargeError
			if errors.As(err, &tl) {
				got = append(got, "!")
				continue
			}
			if err != nil {
				break
			}
			if len(fr) > max {
				t.Fatalf("frame of %d bytes passed a limit of %d", len(fr), max)
			}
			got = append(got, string(fr))
		}
		if len(got) != len(want) {
			t.Fatalf("got %d frames, want %d (%q vs %q)", len(got), len(want), got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("frame %d = %q, want %q", i, got[i], want[i])
			}
		}
	})
}

// FuzzParseFrame checks that no input panics the parser and that what it
// classifies is consistent: requests and responses have ids, notifications
// do not, and an accepted message is valid JSON.
func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`[]`, `{}`, `null`, `"x"`, `{"jsonrpc":"2.0","id":1e999,"method":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		msgs, _, err := parseFrame(frame)
		if err != nil {
			if errors.Is(err, errNotJSON) == errors.Is(err, errInvalid) {
				t.Fatalf("error %v is neither or both of not-JSON and invalid", err)
			}
			return
		}
		for _, m := range msgs {
			if m.kind != kindInvalid && !json.Valid(m.raw) {
				t.Fatalf("accepted invalid JSON %q", m.raw)
			}
			switch m.kind {
			case kindRequest, kindResponse:
				if m.id == nil && string(m.id) != "null" && m.kind == kindRequest {
					t.Fatalf("request without id: %q", m.raw)
				}
			case kindNotification:
				if m.id != nil {
					t.Fatalf("notification with id: %q", m.raw)
				}
			}
		}
	})
}
