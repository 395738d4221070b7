package programs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeOptions configure [Serve].
type ServeOptions struct {
	// Client names the client, over the name it gives in initialize
	// (gatehouse programs --client).
	Client  string
	Version string
}

// Serve is the programs MCP server on in and out (stdio): run_program,
// resume_program, get_trace, list_programs, get_program and
// delete_program. Each run's client is the client that called
// run_program; its llm steps ask that client's model.
func Serve(ctx context.Context, r *Runner, in io.ReadCloser, out io.WriteCloser, opts *ServeOptions) error {
	if opts == nil {
		opts = &ServeOptions{}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "gatehouse-programs", Version: opts.Version}, &mcp.ServerOptions{
		Instructions: "Runs governed programs: multi-step tool workflows that Gatehouse checks, approves as one plan and traces step by step. " +
			"Submit a program with run_program; read its trace with get_trace.",
	})
	runOpts := func(req *mcp.CallToolRequest) RunOptions {
		ro := RunOptions{Client: opts.Client}
		ss := req.Session
		if ip := ss.InitializeParams(); ip != nil {
			if ro.Client == "" && ip.ClientInfo != nil {
				ro.Client = ip.ClientInfo.Name
			}
			// Sampling is deprecated as of protocol 2026-07-28 (SEP-2577)
			// but still served by clients; llm steps are defined by it.
			//lint:ignore SA1019 llm steps ask the client's model through sampling
			if ip.Capabilities != nil && ip.Capabilities.Sampling != nil {
				ro.Sampler = sampler{ss}
			}
		}
		if ro.Client == "" {
			ro.Client = "unnamed-client"
		}
		return ro
	}
	type runIn struct {
		Program        any    `json:"program" jsonschema:"the program, a JSON object (see docs/programs.md)"`
		IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"a key: a second run_program with it returns the first run's trace"`
	}
	type runOut struct {
		Trace     string `json:"trace"`
		Status    string `json:"status"`
		StepCount int    `json:"step_count"`
		Error     string `json:"error,omitempty"`
	}
	summary := func(t *Trace) runOut {
		return runOut{Trace: t.ID, Status: t.Status, StepCount: len(t.Steps), Error: t.Error}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "run_program", Description: "Run a governed program: every tool step is checked by Gatehouse's policy, approvals and evidence. Returns the trace id, status (SUCCESS, FAILED, SUSPENDED, BUDGET_EXCEEDED, STALLED) and step count."},
		func(ctx context.Context, req *mcp.CallToolRequest, in runIn) (*mcp.CallToolResult, runOut, error) {
			body, err := programBody(in.Program)
			if err != nil {
				return nil, runOut{}, err
			}
			ro := runOpts(req)
			ro.Key = in.IdempotencyKey
			t, err := r.Run(ctx, body, ro)
			if err != nil {
				return nil, runOut{}, err
			}
			return nil, summary(t), nil
		})
	type traceIn struct {
		Trace string `json:"trace"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "resume_program", Description: "Continue a SUSPENDED run from the step it waits at."},
		func(ctx context.Context, req *mcp.CallToolRequest, in traceIn) (*mcp.CallToolResult, runOut, error) {
			t, err := r.Resume(ctx, in.Trace, runOpts(req))
			if err != nil {
				return nil, runOut{}, err
			}
			return nil, summary(t), nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "get_trace", Description: "A run's steps: for each, its status and output."},
		func(ctx context.Context, req *mcp.CallToolRequest, in traceIn) (*mcp.CallToolResult, View, error) {
			t, err := r.store.Trace(ctx, in.Trace)
			if err != nil {
				return nil, View{}, err
			}
			return nil, Project(t), nil
		})
	type listOut struct {
		Programs []string `json:"programs"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "list_programs", Description: "The saved programs, by name."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listOut, error) {
			ps, err := r.store.Programs(ctx)
			if err != nil {
				return nil, listOut{}, err
			}
			out := listOut{Programs: []string{}}
			for _, p := range ps {
				out.Programs = append(out.Programs, p.Name)
			}
			return nil, out, nil
		})
	type nameIn struct {
		Name string `json:"name"`
	}
	type programOut struct {
		Name    string `json:"name"`
		Program any    `json:"program"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "get_program", Description: "A saved program, by name."},
		func(ctx context.Context, req *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, programOut, error) {
			sp, err := r.store.Program(ctx, in.Name)
			if err != nil {
				return nil, programOut{}, err
			}
			var v any
			if err := decode(sp.Body, &v); err != nil {
				return nil, programOut{}, err
			}
			return nil, programOut{Name: sp.Name, Program: v}, nil
		})
	type deleted struct {
		Deleted string `json:"deleted"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_program", Description: "Delete a saved program; its traces stay."},
		func(ctx context.Context, req *mcp.CallToolRequest, in nameIn) (*mcp.CallToolResult, deleted, error) {
			if err := r.store.Delete(ctx, in.Name); err != nil {
				return nil, deleted{}, err
			}
			return nil, deleted{Deleted: in.Name}, nil
		})
	return srv.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
}

// programBody is the program a client sent, as JSON: an object, or a
// string holding one.
func programBody(v any) ([]byte, error) {
	if s, ok := v.(string); ok {
		return []byte(s), nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("program must be a JSON object")
	}
	return json.Marshal(v)
}

// sampler asks the client's model through sampling/createMessage.
type sampler struct{ ss *mcp.ServerSession }

//lint:file-ignore SA1019 llm steps ask the client's model through sampling, deprecated as of 2026-07-28 (SEP-2577) but served by clients

func (s sampler) Sample(ctx context.Context, prompt string, maxTokens int) (string, error) {
	res, err := s.ss.CreateMessage(ctx, &mcp.CreateMessageParams{
		Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: prompt}}},
		MaxTokens: int64(maxTokens),
	})
	if err != nil {
		return "", fmt.Errorf("ask the client's model: %w", err)
	}
	if tc, ok := res.Content.(*mcp.TextContent); ok {
		return tc.Text, nil
	}
	return "", errors.New("the client's model answered with something other than text")
}
