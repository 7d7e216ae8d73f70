// Package agent holds the commands the operator's binary runs inside the Pods it renders:
// the preflight check of every member Pod, the fetch and placing of a restoring seed's
// snapshot, and storing or deleting snapshots on a volume claim. cmd/manager dispatches to
// Run. Each command's arguments are a type here: executor/resources writes them into the
// Pod's command (Argv) and the command parses the same flags back, so the two sides share
// one definition. exit.go holds the exit codes and the termination message, which the
// operator reads back.
package agent

import (
	"encoding/json"
	"flag"
	"fmt"
	"time"
)

// Binary is the operator's binary in its image; the in-Pod commands are its sub-commands.
const Binary = "/manager"

// The sub-commands.
const (
	CmdPreflight    = "preflight"
	CmdRestoreFetch = "restore-fetch"
	CmdRestorePlace = "restore-place"
	CmdSnapshot     = "snapshot"
	CmdDeleteObject = "delete-object"
)

// Run runs the in-Pod command name with its flags and returns its exit code; ok is false
// when name is no such command.
func Run(name string, args []string) (code int, ok bool) {
	cmd, ok := map[string]func([]string) int{
		CmdPreflight:    preflight,
		CmdRestoreFetch: restoreFetch,
		CmdRestorePlace: restorePlace,
		CmdSnapshot:     snapshotToClaim,
		CmdDeleteObject: deleteObject,
	}[name]
	if !ok {
		return 0, false
	}
	return cmd(args), true
}

// flags is a command's flag set.
func flags(name string) *flag.FlagSet { return flag.NewFlagSet(name, flag.ContinueOnError) }

// parse parses a command's flags and checks that those named required were given; the
// flag package prints what is wrong.
func parse(fs *flag.FlagSet, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range required {
		if !set[name] {
			err := fmt.Errorf("--%s is required", name)
			fmt.Fprintln(fs.Output(), err)
			return err
		}
	}
	return nil
}

// jsonFlag is a flag whose value is a JSON document, such as a destination.
type jsonFlag struct{ v any }

func (f jsonFlag) Set(s string) error { return json.Unmarshal([]byte(s), f.v) }

func (f jsonFlag) String() string {
	if f.v == nil {
		return ""
	}
	return jsonArg(f.v)
}

// jsonArg is a JSON flag's value as Argv writes it.
func jsonArg(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// timeFlag is a flag whose value is a time in RFC 3339, in seconds.
type timeFlag struct{ t *time.Time }

func (f timeFlag) Set(s string) (err error) {
	*f.t, err = time.Parse(time.RFC3339, s)
	return err
}

func (f timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return timeArg(*f.t)
}

// timeArg is a time flag's value as Argv writes it.
func timeArg(t time.Time) string { return t.UTC().Format(time.RFC3339) }
