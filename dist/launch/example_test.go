//go:build unix

package launch_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/flockml/flock/dist/launch"
)

// Two ranks of a shell command, each printing its place in the job.
func Example() {
	var out bytes.Buffer
	code, err := launch.Run(context.Background(), launch.Config{
		NProc:   2,
		Program: "sh",
		Args:    []string{"-c", `echo "rank $RANK of $WORLD_SIZE, local rank $LOCAL_RANK"`},
		Stdout:  &out,
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	fmt.Println("exit status", code, err)
	// Output:
	// [0] rank 0 of 2, local rank 0
	// [1] rank 1 of 2, local rank 1
	// exit status 0 <nil>
}
