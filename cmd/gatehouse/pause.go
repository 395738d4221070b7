package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
)

var pauseCmd = &command{
	name:    "pause",
	summary: "deny every tool call through every proxy until resume",
	help: `
While Gatehouse is paused, every tool call through every proxy of the home
folder is denied (with a receipt), and the model is told that the user paused
Gatehouse. Proxies need no restart: each call checks. Undo with
'gatehouse resume'.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		home := st.Dir()
		st.Close()
		if err := gate.Pause(home); err != nil {
			return err
		}
		fmt.Fprintln(c.stderr, "gatehouse: paused: every tool call is denied until 'gatehouse resume'")
		return nil
	},
}

var resumeCmd = &command{
	name:    "resume",
	summary: "decide tool calls again after pause",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		home := st.Dir()
		st.Close()
		paused, since, err := gate.Paused(home)
		if err != nil {
			return err
		}
		if err := gate.Resume(home); err != nil {
			return err
		}
		if paused {
			fmt.Fprintf(c.stderr, "gatehouse: resumed after %s paused\n", time.Since(since).Round(time.Second))
		} else {
			fmt.Fprintln(c.stderr, "gatehouse: was not paused")
		}
		return nil
	},
}
