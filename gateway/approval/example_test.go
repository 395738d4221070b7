package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// autoApprover approves every request once, as `gatehouse approvals --auto
// once` does. A real approver shows the request to a person and calls
// Decide when they answer.
type autoApprover struct{ srv *approval.Server }

func (a *autoApprover) Show(req approval.Request) {
	a.srv.Decide(req, approval.Answer{Scope: approval.ScopeOnce, Via: approval.ViaAutomatic})
}
func (a *autoApprover) Withdraw(id string) {}

func ExampleAsk() {
	home, err := os.MkdirTemp("", "gatehouse-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)
	socket := approval.SocketPath(home)

	// The approver.
	ln, err := approval.Listen(socket)
	if err != nil {
		log.Fatal(err)
	}
	ui := &autoApprover{}
	ui.srv = approval.NewServer(ui, &approval.Options{Approver: "terminal"})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go ui.srv.Serve(ctx, ln)

	// A proxy, for a call its policy says needs approval.
	d, err := approval.Ask(context.Background(), socket, approval.Request{
		Server:  "github",
		Tool:    "create_issue",
		Client:  "claude-code",
		Risk:    "high",
		Rule:    "risk.high",
		Args:    json.RawMessage(`{"repo":"acme/app","title":"Crash on start"}`),
		Session: "7f3a",
	}, 30*time.Second, func(waited time.Duration) {
		// Send an MCP progress notification: "waiting for approval".
	})
	switch {
	case errors.Is(err, approval.ErrNoApprover):
		fmt.Println("denied: start the Gatehouse app or run `gatehouse approvals`, then retry")
	case errors.Is(err, approval.ErrPending):
		fmt.Println("approval pending: retry the same call to pick up the answer")
	case err != nil:
		fmt.Println("denied:", err)
	default:
		fmt.Printf("%s by the %s approver; runs: %v\n", d.Scope, d.Approver, d.Scope.Allows())
	}
	// Output: once by the terminal approver; runs: true
}
