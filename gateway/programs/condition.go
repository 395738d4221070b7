package programs

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// Conditions are expressions of expr-lang/expr (https://expr-lang.org),
// sandboxed:
//
//   - the only names are steps (earlier outputs, by step name, as literal
//     member names: steps.read.text or steps["read"].text) and the built-in
//     functions below; nothing else can be called, so a condition can
//     reach no tool, no file and no network;
//   - no built-in that reads the clock or the environment (now, date, env):
//     the same outputs always give the same answer, which replay relies on;
//   - a condition has at most [maxConditionNodes] nodes, and one evaluation
//     at most [conditionBudget] units of the VM's memory budget, within
//     [conditionTimeout]; past either it fails.
var conditionBuiltins = []string{
	"len", "lower", "upper", "trim", "trimPrefix", "trimSuffix", "hasPrefix", "hasSuffix",
	"int", "float", "string", "abs", "min", "max",
	"all", "any", "none", "one", "count", "filter", "map", "keys", "values", "first", "last",
}

const (
	maxConditionNodes = 500
	conditionBudget   = 20000
	conditionTimeout  = 100 * time.Millisecond
)

// errTooLong is a condition past its budget.
var errTooLong = errors.New("runs too long: it is over the evaluation budget")

// stepNames collects the step names a condition reads, and refuses any
// other way of reaching steps.
type stepNames struct {
	names []string
	err   error
}

func (v *stepNames) Visit(node *ast.Node) {
	if c, ok := (*node).(*ast.CallNode); ok {
		// The built-ins are BuiltinNodes: any other call (a method of a
		// value, a function found at run time) is refused here, not left
		// to fail or succeed when the run reaches it.
		if v.err == nil {
			v.err = fmt.Errorf("calls %s: only the built-in functions can be called", c.Callee.String())
		}
		return
	}
	m, ok := (*node).(*ast.MemberNode)
	if !ok {
		if id, ok := (*node).(*ast.IdentifierNode); ok && id.Value != "steps" && v.err == nil {
			v.err = fmt.Errorf("unknown name %q (only steps is known)", id.Value)
		}
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok || id.Value != "steps" {
		return
	}
	s, ok := m.Property.(*ast.StringNode)
	if !ok {
		if v.err == nil {
			v.err = errors.New("steps must be read by a step's name, as steps.NAME")
		}
		return
	}
	v.names = append(v.names, s.Value)
}

func conditionOptions() []expr.Option {
	opts := []expr.Option{
		expr.Env(map[string]any{"steps": map[string]any{}}),
		expr.AsBool(),
		expr.MaxNodes(maxConditionNodes),
		expr.DisableAllBuiltins(),
	}
	for _, b := range conditionBuiltins {
		opts = append(opts, expr.EnableBuiltin(b))
	}
	return opts
}

// compileCondition compiles src and returns the step names it reads.
func compileCondition(src string) (*vm.Program, []string, error) {
	tree, err := expr.Compile(src, conditionOptions()...)
	if err != nil {
		return nil, nil, err
	}
	v := &stepNames{}
	node := tree.Node()
	ast.Walk(&node, v)
	if v.err != nil {
		return nil, nil, v.err
	}
	return tree, v.names, nil
}

// evalCondition runs a compiled condition over the outputs so far.
func evalCondition(prog *vm.Program, outputs map[string]any) (bool, error) {
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("%v", p)
			}
			done <- r
		}()
		m := vm.VM{MemoryBudget: conditionBudget}
		out, err := m.Run(prog, map[string]any{"steps": outputs})
		if err != nil {
			r.err = err
			return
		}
		b, ok := out.(bool)
		if !ok {
			r.err = fmt.Errorf("is %T, not true or false", out)
			return
		}
		r.ok = b
	}()
	t := time.NewTimer(conditionTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		if r.err != nil && isBudget(r.err) {
			return false, errTooLong
		}
		return r.ok, r.err
	case <-t.C:
		// The evaluation is bounded by its budget and ends by itself.
		return false, errTooLong
	}
}

func isBudget(err error) bool {
	return err != nil && strings.Contains(err.Error(), "memory budget exceeded")
}

// dryRun evaluates a condition before anything runs, over empty outputs:
// one whose cost does not depend on the outputs and is over the budget is
// refused then. Other errors (a member of an output not there yet) are
// for the run.
func dryRun(prog *vm.Program) error {
	_, err := evalCondition(prog, map[string]any{})
	if errors.Is(err, errTooLong) {
		return err
	}
	return nil
}
