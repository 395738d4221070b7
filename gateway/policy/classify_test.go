package policy

import (
	"strings"
	"testing"
)

func ptr(b bool) *bool { return &b }

func TestClassifyName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool string
		want Risk
	}{
		// Prefixes.
		{"get_issue", Low},
		{"list_repos", Low},
		{"read_file", Low},
		{"search_code", Low},
		{"fetch_url", Low},
		{"find_files", Low},
		{"describe_table", Low},
		{"create_issue", High},
		{"update_issue", High},
		{"send_email", High},
		{"write_file", High},
		{"edit_file", High},
		{"add_label", High},
		{"set_topic", High},
		{"post_message", High},
		{"move_file", High},
		{"delete_repo", Critical},
		{"remove_member", Critical},
		{"drop_table", Critical},
		{"destroy_vm", Critical},
		{"exec_command", Critical},
		{"run_script", Critical},
		{"execute_sql", Critical},
		{"shell", Critical},
		{"eval", Critical},
		{"summarize", Medium},
		{"weather", Medium},
		{"", Medium},
		{"___", Medium},

		// Cases and separators.
		{"get-sum", Low},
		{"getSum", Low},
		{"GetSum", Low},
		{"files.read", Low},
		{"fs/read_text", Low},
		{"files.delete", Critical},
		{"getHTTPResponse", Low},
		{"deleteAll", Critical},
		{"DELETE_REPO", Critical},
		{"sendEmail", High},

		// Name tricks never lower the risk.
		{"get_and_delete_all", Critical},
		{"read_then_exec", Critical},
		{"readThenExec", Critical},
		{"list-or-create", High},
		{"get_and_frobnicate", Medium},
		{"github_delete_repo", Critical},
		{"slack_send_message", High},
		{"delete.get_item", Critical},
		{"get_user_then_run_script", Critical},
		{"get_file_rm", Critical},
		{"delete2_repo", Critical},
		{"list_shell_sessions", Critical},

		// Unicode: never low, look-alikes read as what they look like.
		{"gеt_user", Medium},       // Cyrillic е
		{"dеlete_repo", Critical},  // Cyrillic е
		{"ｄｅｌｅｔｅ_repo", Critical},  // fullwidth
		{"get_ﬁle", Medium},        // ligature
		{"get_user\u200b", Medium}, // zero-width space
		{"de\u200blete_repo", Critical},
		{"dèlete_repo", Critical},  // combining accent
		{"rеad_file", Medium},      // Cyrillic е in a low verb
		{"ехес_command", Critical}, // Cyrillic е, х, с
	}
	for _, tt := range tests {
		got, why := Classify(tt.tool, nil, false)
		if got != tt.want {
			t.Errorf("Classify(%q) = %v, want %v (%s)", tt.tool, got, tt.want, strings.Join(why, "; "))
		}
		if len(why) == 0 {
			t.Errorf("Classify(%q) gave no reasons", tt.tool)
		}
	}
}

func TestClassifyAnnotations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tool    string
		ann     *Annotations
		trusted bool
		want    Risk
	}{
		{"no annotations", "get_issue", nil, false, Low},
		{"empty annotations are no evidence", "get_issue", &Annotations{}, false, Low},
		{"destructive raises", "get_issue", &Annotations{Destructive: ptr(true)}, false, High},
		{"destructive raises, readOnly false", "get_issue", &Annotations{ReadOnly: ptr(false), Destructive: ptr(true)}, false, High},
		{"readOnly false, destructive absent (default true)", "get_issue", &Annotations{ReadOnly: ptr(false)}, false, High},
		{"readOnly false, destructive false", "get_issue", &Annotations{ReadOnly: ptr(false), Destructive: ptr(false)}, false, Medium},
		{"readOnly true makes destructive moot", "get_issue", &Annotations{ReadOnly: ptr(true), Destructive: ptr(true)}, false, Low},
		{"openWorld raises", "get_issue", &Annotations{OpenWorld: ptr(true)}, false, Medium},
		{"openWorld false does not lower", "summarize", &Annotations{OpenWorld: ptr(false)}, false, Medium},
		{"untrusted readOnly does not lower", "delete_repo", &Annotations{ReadOnly: ptr(true)}, false, Critical},
		{"untrusted readOnly does not lower medium", "summarize", &Annotations{ReadOnly: ptr(true)}, false, Medium},
		{"untrusted destructive false does not lower", "delete_repo", &Annotations{Destructive: ptr(false)}, false, Critical},
		{"trusted readOnly lowers", "delete_repo", &Annotations{ReadOnly: ptr(true)}, true, Low},
		{"trusted readOnly lowers unknown names", "summarize", &Annotations{ReadOnly: ptr(true)}, true, Low},
		{"trusted readOnly, open world", "search_web", &Annotations{ReadOnly: ptr(true), OpenWorld: ptr(true)}, true, Medium},
		{"trusted without readOnly keeps the name", "delete_repo", &Annotations{Destructive: ptr(false)}, true, Critical},
		{"trusted readOnly, non-ASCII name", "gеt_user", &Annotations{ReadOnly: ptr(true)}, true, Medium},
		{"idempotent is ignored", "get_issue", &Annotations{Idempotent: ptr(false)}, false, Low},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, why := Classify(tt.tool, tt.ann, tt.trusted)
			if got != tt.want {
				t.Errorf("Classify(%q, %s, %v) = %v, want %v (%s)", tt.tool, annString(tt.ann), tt.trusted, got, tt.want, strings.Join(why, "; "))
			}
		})
	}
}

func annString(a *Annotations) string {
	if a == nil {
		return "nil"
	}
	var parts []string
	for _, h := range []struct {
		name string
		v    *bool
	}{{"readOnly", a.ReadOnly}, {"destructive", a.Destructive}, {"idempotent", a.Idempotent}, {"openWorld", a.OpenWorld}} {
		if h.v != nil {
			parts = append(parts, h.name+"="+map[bool]string{true: "true", false: "false"}[*h.v])
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func TestSplitWords(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"getSum":          "get sum",
		"get-sum":         "get sum",
		"get_sum":         "get sum",
		"getHTTPResponse": "get http response",
		"s3Put":           "s 3 put",
		"  ":              "",
	}
	for in, want := range tests {
		if got := strings.Join(splitWords(in), " "); got != want {
			t.Errorf("splitWords(%q) = %q, want %q", in, got, want)
		}
	}
}
