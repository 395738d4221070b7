package store_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

func ExampleOpen() {
	home, _ := os.MkdirTemp("", "gatehouse-home-")
	defer os.RemoveAll(home)
	ctx := context.Background()

	st, err := store.Open(ctx, home, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	err = st.AddServer(ctx, store.Server{
		Name:    "files",
		Command: "npx",
		Args:    []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/projects"},
	})
	if err != nil {
		log.Fatal(err)
	}
	servers, _ := st.Servers(ctx)
	for _, s := range servers {
		fmt.Println(s.Name, s.Transport, s.Command, s.Args)
	}
	// Output:
	// files stdio npx [-y @modelcontextprotocol/server-filesystem /home/me/projects]
}
