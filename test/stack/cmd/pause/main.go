// Command pause is the sandbox process of the real node's Pods (node-4, see
// docs/development.md): it holds the Pod's namespaces, reaps orphans and exits on SIGTERM or
// SIGINT. It is built without cgo so that it runs inside an image with nothing else.
//
// Given commands (separated by --) it runs them first, for the stack's self-tests on that
// node, with no shell in the image; then it waits as above, unless the last command is exit:
//
//	cat FILE...        print files (/proc/self/status)
//	write FILE TEXT    write TEXT to FILE
//	alloc MIB          touch MIB mebibytes of memory, one at a time, and keep them
//	exit               exit 0
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// kept holds what alloc touched, for as long as the process lives.
var kept [][]byte

func main() {
	args := os.Args[1:]
	for len(args) > 0 {
		cmd, rest := args, []string(nil)
		for i, a := range args {
			if a == "--" {
				cmd, rest = args[:i], args[i+1:]
				break
			}
		}
		args = rest
		if len(cmd) == 0 {
			continue
		}
		if cmd[0] == "exit" {
			os.Exit(0)
		}
		if err := run(cmd[0], cmd[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "pause:", err)
			os.Exit(1)
		}
	}
	wait()
}

// wait reaps children until SIGTERM or SIGINT.
func wait() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

func run(cmd string, args []string) error {
	switch cmd {
	case "cat":
		for _, f := range args {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			os.Stdout.Write(b)
		}
		return nil
	case "write":
		if len(args) != 2 {
			return fmt.Errorf("write FILE TEXT")
		}
		return os.WriteFile(args[0], []byte(args[1]), 0o644)
	case "alloc":
		if len(args) != 1 {
			return fmt.Errorf("alloc MIB")
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			return err
		}
		for i := 1; i <= n; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			kept = append(kept, b)
			fmt.Printf("allocated %d MiB\n", i)
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q (cat, write, alloc, exit)", cmd)
}
