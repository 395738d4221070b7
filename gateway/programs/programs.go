// Package programs runs governed programs: multi-step tool workflows that
// run deterministically, are approved as one plan, and are traced step by
// step.
//
// A [Program] is JSON: named steps of kind tool (a tool of a registered
// server), condition (a sandboxed expression over earlier outputs), llm
// (the client's model, asked through MCP sampling, its answer checked
// against allowed outputs) and approval (a person's checkpoint). [Parse]
// reads one strictly and checks its graph before anything runs.
//
// A [Runner] runs a program. Every tool step is a governed call like an
// agent's, made through [Tools]: policy, pins, approvals, a signed receipt
// before and a signed outcome after, the receipt naming the program, the
// trace and the step. Each attempt of each step is recorded in the run's
// [Trace] with the hash of the run's state after it, durably, before the
// next step starts; [Runner.Replay] runs a trace again against its
// recorded results and shows that every transition is the same, or where
// it differs.
//
// # Statuses
//
// A run ends SUCCESS, FAILED (a step failed, or was denied: the run stops
// there), SUSPENDED (a step waits for a person, or a tool said its work is
// pending; [Runner.Resume] continues it), BUDGET_EXCEEDED (more attempts
// than the program's max_steps) or STALLED (more attempts without progress
// than its max_stalled).
//
// What the model reads of a run is [Project]'s [View]: statuses and
// outputs, never hashes, policy, signatures or other calls.
package programs
