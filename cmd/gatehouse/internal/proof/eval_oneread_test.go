package proof

import (
	"encoding/json"
	"testing"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
)

// The definition cases write echo out by hand: read as JSON, it must be
// the adversary's own, or a case would hold for the wrong reason (a change
// the pin sees).
func TestEchoAsListed(t *testing.T) {
	def, _ := adversary.Definition("echo")
	if got, want := canonical([]byte(echoDef(echoDesc, echoInput))), canonical(def); got != want {
		t.Errorf("echoDef = %s, want the adversary's %s", got, want)
	}
	var tools []json.RawMessage
	if err := json.Unmarshal([]byte(toolsWith(echoDef(echoDesc, echoInput))), &tools); err != nil {
		t.Fatal(err)
	}
	if names := adversary.ToolNames(); len(tools) != len(names) {
		t.Errorf("toolsWith lists %d tools, want the adversary's %d", len(tools), len(names))
	}
}

func TestLeakedAnyForm(t *testing.T) {
	const v = "sk-eval-abcdefghijklmnop"
	tests := []struct {
		name, data string
		found      bool
	}{
		{"raw", `{"text":"` + v + `"}`, true},
		{"percent, upper hex", `{"text":"t=` + percentEncoded(v, "%%%02X") + `"}`, true},
		{"percent, lower hex", `{"text":"t=` + percentEncoded(v, "%%%02x") + `"}`, true},
		{"percent, some bytes, another value (K for k)", `{"text":"t=%73K-eval-%61bcdefghijklmnop"}`, false},
		{"percent, some bytes", `{"text":"t=%73k-eval-%61bcdefghijklmnop"}`, true},
		{"JSON in a text item, in \\u escapes", `{"content":[{"type":"text","text":"{\"token\":\"\\u0073\\u006b-eval-abcdefghijklmnop\"}"}]}`, true},
		{"JSON in JSON in a text item", `{"text":"[\"{\\\"t\\\":\\\"\\\\u0073k-eval-abcdefghijklmnop\\\"}\"]"}`, true},
		{"hex in a JSON text item", `{"text":"{\"t\":\"` + percentEncoded(v, "%02x") + `\"}"}`, true},
		{"redacted", `{"text":"[redacted by Gatehouse: secret API_TOKEN]"}`, false},
		{"another value, percent-encoded", `{"text":"` + percentEncoded("sk-eval-zzzzzzzzzzzzzzzz", "%%%02X") + `"}`, false},
		{"a lone percent sign", `{"text":"100% sk-eval-abc"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := leakedAnyForm(v, []byte(tt.data)); (got != "") != tt.found {
				t.Errorf("leakedAnyForm(%s) = %q, want found %v", tt.data, got, tt.found)
			}
		})
	}
}

func TestPercentDecoded(t *testing.T) {
	for in, want := range map[string]string{
		"%73%6b%2D": "sk-",
		"100%":      "100%",
		"%zz%4":     "%zz%4",
		"a%41%":     "aA%",
		"plain":     "plain",
	} {
		if got := percentDecoded(in); got != want {
			t.Errorf("percentDecoded(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestForgedLine(t *testing.T) {
	forged := "time=2026-01-01T00:00:00Z level=WARN msg=x id=\"a\r\n" + adversary.ForgedLine + "\"\n"
	if forgedLine(forged) == "" {
		t.Errorf("forgedLine(%q) found nothing", forged)
	}
	quoted := `time=2026-01-01T00:00:00Z level=WARN msg=x id="a\r\n` + adversary.ForgedLine + `"` + "\n"
	if got := forgedLine(quoted); got != "" {
		t.Errorf("forgedLine(%q) = %q, want none: the line break is quoted", quoted, got)
	}
}
