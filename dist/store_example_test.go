package dist_test

import (
	"context"
	"fmt"

	"github.com/flockml/flock/dist"
)

// A rank-0 process serves the store; every rank, rank 0 included, talks to
// it through a client holding the same job token.
func ExampleStore() {
	cfg := dist.StoreConfig{Token: []byte("a job secret of some length")}
	srv, err := dist.ListenStore("127.0.0.1:0", cfg)
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ctx := context.Background()
	s, err := dist.DialStore(ctx, srv.Addr().String(), cfg)
	if err != nil {
		panic(err)
	}
	defer s.Close()

	s.Set(ctx, "addr/1", []byte("10.0.0.2:41234"))
	v, _ := s.Get(ctx, "addr/1")
	n1, _ := s.Add(ctx, "joined", 1)
	n2, _ := s.Add(ctx, "joined", 1)
	_, won, _ := s.CompareSet(ctx, "leader", nil, []byte("rank 1"))
	fmt.Println(string(v), n1, n2, won)
	// Output: 10.0.0.2:41234 1 2 true
}
