package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's tour shows real output: each `$ kubectl etcd plan ...` in a console block is
// run here and must print what the README shows (`$ echo $?` lines show its exit code).
func TestReadmeShowsRealOutput(t *testing.T) {
	data, err := os.ReadFile("../../../README.md")
	require.NoError(t, err)
	t.Chdir("../../..") // the README's paths are relative to the repository
	ran := 0
	for _, block := range consoleBlocks(string(data)) {
		for _, cmd := range commands(block) {
			args := strings.Fields(strings.TrimPrefix(cmd.line, "$ kubectl etcd "))
			r := run(t, "", args...)
			got := r.stdout + r.stderr
			if cmd.exit {
				got += fmt.Sprintf("$ echo $?\n%d\n", r.code)
			}
			require.Equal(t, cmd.output, got, "README: %s", cmd.line)
			ran++
		}
	}
	require.GreaterOrEqual(t, ran, 3)
}

type readmeCommand struct {
	line, output string
	exit         bool // the output ends with `$ echo $?` and the exit code
}

func consoleBlocks(md string) []string {
	var out []string
	for _, part := range strings.Split(md, "```console\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		out = append(out, block)
	}
	return out
}

// commands splits a console block into the plan commands and what follows each.
func commands(block string) []readmeCommand {
	var out []readmeCommand
	for _, chunk := range strings.Split("\n"+block, "\n$ kubectl etcd ")[1:] {
		line, rest, _ := strings.Cut(chunk, "\n")
		c := readmeCommand{line: "$ kubectl etcd " + line, output: rest}
		c.exit = strings.Contains(rest, "$ echo $?\n")
		out = append(out, c)
	}
	return out
}
