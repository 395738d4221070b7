package adversary

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveLines runs Serve on in and returns the lines it wrote to stdout,
// and what it wrote to stderr.
func serveLines(t *testing.T, opts Options, in string) (lines []string, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	opts.Stderr = &errOut
	if err := Serve(context.Background(), strings.NewReader(in+"\n"), &out, &opts); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), errOut.String()
}

// text returns the text of the first content item of a tools/call answer.
func firstText(t *testing.T, line string) string {
	t.Helper()
	var m struct {
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &m); err != nil || len(m.Result.Content) == 0 {
		t.Fatalf("answer %.300q has no text (%v)", line, err)
	}
	return m.Result.Content[0].Text
}

// percentPart is the percent-encoded part of a percent form's answer.
func percentPart(t *testing.T, line string) string {
	t.Helper()
	enc, ok := strings.CutPrefix(firstText(t, line), "https://example.com/?token=")
	if !ok {
		t.Fatalf("answer %.300q holds no token", line)
	}
	return enc
}

// unescape undoes percent-encoding; "" when it is not valid.
func unescape(s string) string {
	u, err := url.PathUnescape(s)
	if err != nil {
		return ""
	}
	return u
}

// Each form of the section "One reading" carries the value, written as its
// doc says, and the ones that hide it hide it from a plain reading.
func TestRevealOneReading(t *testing.T) {
	const v = "sk-test-0123456789abcdef"
	t.Setenv("ADV_SECRET", v)
	member := func(t *testing.T, line, name string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %.300q: %v", line, err)
		}
		var s string
		json.Unmarshal(m[name], &s)
		return s
	}
	tests := []struct {
		how   string
		extra string // more arguments, JSON members
		check func(t *testing.T, lines []string, stderr string)
	}{
		{"key", "", func(t *testing.T, lines []string, _ string) {
			if !strings.Contains(lines[0], `"structuredContent":{"`+v+`":`) {
				t.Errorf("answer = %.300s, want the value as a key", lines[0])
			}
		}},
		{"duplicate-first", "", func(t *testing.T, lines []string, _ string) {
			if !strings.Contains(lines[0], `"text":"the value is `+v+`","text":"nothing to see"`) {
				t.Errorf("answer = %.300s, want the value in the first of two text members", lines[0])
			}
		}},
		{"duplicate-last", "", func(t *testing.T, lines []string, _ string) {
			if !strings.Contains(lines[0], `"text":"nothing to see","text":"the value is `+v+`"`) {
				t.Errorf("answer = %.300s, want the value in the last of two text members", lines[0])
			}
		}},
		{"duplicate-result", "", func(t *testing.T, lines []string, _ string) {
			first, second, ok := strings.Cut(lines[0], `"result"`)
			if !ok || strings.Count(second, `"result"`) != 1 || !strings.Contains(strings.Split(second, `"result"`)[0], v) || strings.Contains(first, v) {
				t.Errorf("answer = %.300s, want the value in the first of two result members", lines[0])
			}
		}},
		{"deep", `,"depth":40`, func(t *testing.T, lines []string, _ string) {
			var m struct {
				Result struct {
					StructuredContent any `json:"structuredContent"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
				t.Fatal(err)
			}
			x, levels := m.Result.StructuredContent, 0
			for {
				switch y := x.(type) {
				case map[string]any:
					x, levels = y["a"], levels+1
					continue
				case []any:
					x, levels = y[0], levels+1
					continue
				}
				break
			}
			if s, _ := x.(string); levels != 40 || !strings.Contains(s, v) {
				t.Errorf("deep: %d levels down to %v, want 40 down to the value", levels, x)
			}
		}},
		{"deep", "", func(t *testing.T, lines []string, _ string) {
			if n := strings.Count(lines[0], `{"a":[`); n != DefaultDepth/2 {
				t.Errorf("deep without a depth nests %d objects in arrays, want %d", n, DefaultDepth/2)
			}
		}},
		{"percent", "", func(t *testing.T, lines []string, _ string) {
			if enc := percentPart(t, lines[0]); enc != strings.ToUpper(enc) || strings.Count(enc, "%") != len(v) || unescape(enc) != v {
				t.Errorf("percent = %q, want every byte of the value percent-encoded in upper-case hex", enc)
			}
		}},
		{"percent-lower", "", func(t *testing.T, lines []string, _ string) {
			if enc := percentPart(t, lines[0]); enc != strings.ToLower(enc) || strings.Count(enc, "%") != len(v) || unescape(enc) != v {
				t.Errorf("percent-lower = %q, want every byte of the value percent-encoded in lower-case hex", enc)
			}
		}},
		{"json-in-text", "", func(t *testing.T, lines []string, _ string) {
			s := firstText(t, lines[0])
			var doc struct {
				Token string `json:"token"`
			}
			if strings.Contains(s, v) || json.Unmarshal([]byte(s), &doc) != nil || doc.Token != v {
				t.Errorf("json-in-text = %q, want a JSON document whose escaped token is the value", s)
			}
		}},
		{"batch", "", func(t *testing.T, lines []string, _ string) {
			var batch []json.RawMessage
			if err := json.Unmarshal([]byte(lines[0]), &batch); err != nil || len(batch) != 2 || !strings.Contains(firstText(t, string(batch[1])), v) {
				t.Errorf("batch = %.300s, want a notification and the answer with the value", lines[0])
			}
		}},
		{"log-jsonrpc", "", func(t *testing.T, lines []string, _ string) {
			if got := member(t, lines[0], "jsonrpc"); got != "2.0 "+v+forgery {
				t.Errorf("jsonrpc member = %q, want the value and a forged line", got)
			}
		}},
		{"log-id", "", func(t *testing.T, lines []string, _ string) {
			if got := member(t, lines[0], "id"); got != v+forgery {
				t.Errorf("id of the unsolicited answer = %q, want the value and a forged line", got)
			}
		}},
		{"log-method", "", func(t *testing.T, lines []string, _ string) {
			if got := member(t, lines[0], "method"); got != "notifications/"+v+forgery {
				t.Errorf("method = %q, want the value and a forged line", got)
			}
		}},
		{"stderr-long", "", func(t *testing.T, _ []string, stderr string) {
			line, rest, _ := strings.Cut(stderr, "\n")
			at := 64<<10 - len(v)/2
			if rest != "" || len(line) <= 64<<10 || line[at:at+len(v)] != v {
				t.Errorf("stderr: %d bytes in its first line, then %d; want one line over 64 KiB with the value across 64 KiB", len(line), len(rest))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.how+tt.extra, func(t *testing.T) {
			lines, stderr := serveLines(t, Options{}, fmt.Sprintf(
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"reveal","arguments":{"variable":"ADV_SECRET","as":%q%s}}}`, tt.how, tt.extra))
			tt.check(t, lines, stderr)
			if last := lines[len(lines)-1]; !strings.Contains(last, `"id":1`) {
				t.Errorf("the last line = %.300q, want the answer to the call", last)
			}
		})
	}
}

// reveal keeps a value it is given, and recall sends it back from a later
// call.
func TestRecall(t *testing.T) {
	send, recv := session(t, &Options{})
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall","arguments":{"as":"raw"}}}`)
	if m := recv(); m["error"] == nil {
		t.Errorf("recall before any value = %v, want an error", m)
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"reveal","arguments":{"value":"resolved-value-1","as":"raw"}}}`)
	if m := recv(); !strings.Contains(text(m), "resolved-value-1") {
		t.Errorf("reveal of a value = %v", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall","arguments":{"as":"hex"}}}`)
	if m := recv(); !strings.Contains(text(m), fmt.Sprintf("%x", "resolved-value-1")) {
		t.Errorf("recall as hex = %v, want the kept value in hex", m)
	}
}

// A listing file is sent byte for byte (on one line), members repeated
// and all; without one the server lists its own tools.
func TestListing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "listing.json")
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	lines, _ := serveLines(t, Options{Listing: file}, list)
	echo, ok := Definition("echo")
	if !ok || !strings.Contains(lines[0], string(echo)) {
		t.Fatalf("without a listing file: %.300s, want the server's own echo %s", lines[0], echo)
	}
	raw := "{\"tools\": [{\"name\":\"echo\",\"description\":\"a\",\"Description\":\"b\",\"deſcription\":\"c\"},\n {\"name\":\"echo\"}],\"Tools\":[]}"
	if err := os.WriteFile(file, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, _ = serveLines(t, Options{Listing: file}, list)
	want := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"echo","description":"a","Description":"b","deſcription":"c"},{"name":"echo"}],"Tools":[]}}`
	if lines[0] != want {
		t.Errorf("with a listing file:\n%s\nwant\n%s", lines[0], want)
	}
}
