package plan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// facts is every fact of every action, decided once here: a new action fails
// TestActionFacts until it has its row.
var facts = map[Action]struct {
	takesDown, disrupts, membership, linearizable, shown, voters, pod bool
	shows                                                             Showing
	deletes                                                           Data
	group                                                             Group
}{
	CreateSeed:         {pod: true, group: GroupJoining},
	AddLearner:         {pod: true, membership: true, linearizable: true, shown: true, shows: ShowsAtOnce, group: GroupJoining},
	StartMember:        {shows: ShowsInCache, pod: true},
	CheckData:          {shows: ShowsInCache},
	PromoteLearner:     {membership: true, linearizable: true, shown: true, voters: true, shows: ShowsAtOnce},
	TransferLeadership: {shown: true, shows: ShowsAtOnce},
	RemoveMember: {takesDown: true, disrupts: true, membership: true, linearizable: true, shown: true, voters: true,
		shows: ShowsAtOnce, group: GroupLeaving},
	DeleteMember:      {linearizable: true, shows: ShowsInCache, deletes: DataMemberVolume},
	StopMember:        {disrupts: true, group: GroupStopping},
	RestartMember:     {pod: true, takesDown: true, disrupts: true, linearizable: true, group: GroupRestarting},
	UpgradeMember:     {pod: true, takesDown: true, disrupts: true, linearizable: true, group: GroupRestarting},
	Compact:           {shows: ShowsAtOnce, deletes: DataHistory},
	Defragment:        {takesDown: true, disrupts: true, linearizable: true, shows: ShowsAtOnce, group: GroupDefragmenting},
	DisarmAlarm:       {shows: ShowsAtOnce},
	ExpandVolume:      {shows: ShowsInCache},
	ForceNewCluster:   {pod: true, voters: true, deletes: DataWrites},
	RestoreFromBackup: {pod: true, voters: true, deletes: DataWrites, group: GroupJoining},
	SnapshotSurvivor:  {},
	RenewCertificate:  {shows: ShowsAtOnce},
	AwaitCertificate:  {},
	UpdatePeerURL:     {membership: true, linearizable: true, shown: true, shows: ShowsAtOnce},
	RotateCA:          {shows: ShowsAtOnce},
	EnableAuth:        {shows: ShowsAtOnce},
	DisableAuth:       {shows: ShowsAtOnce},
	UpdateUsers:       {shows: ShowsAtOnce},
	SnapshotSource:    {},
	Acknowledge:       {shows: ShowsAtOnce},
}

func TestActionFacts(t *testing.T) {
	for _, a := range Actions {
		f, ok := facts[a]
		if !ok {
			t.Errorf("%s has no row in facts: decide each of its facts there", a)
			continue
		}
		got := []any{a.TakesDown(), a.Disrupts(), a.ChangesMembership(), a.NeedsLinearizable(), a.ShowsInMembership(),
			a.ChangesVoters(), a.Shows(), a.Deletes(), a.Group(), a.StartsPod()}
		want := []any{f.takesDown, f.disrupts, f.membership, f.linearizable, f.shown, f.voters, f.shows, f.deletes, f.group, f.pod}
		if !slices.Equal(got, want) {
			t.Errorf("%s: facts %v, want %v", a, got, want)
		}
		if a.Group() != GroupNone && !slices.Contains(Groups, a.Group()) {
			t.Errorf("%s: group %q is not in Groups, so no summary names it", a, a.Group())
		}
	}
	if len(facts) != len(Actions) {
		t.Errorf("facts has %d rows for %d actions", len(facts), len(Actions))
	}
}

// TestActionsListsEveryAction: every constant of type Action is in Actions, once.
func TestActionsListsEveryAction(t *testing.T) {
	var declared []Action
	for _, c := range constants(t, "action.go", "Action") {
		declared = append(declared, Action(c.value))
	}
	if !slices.Equal(declared, Actions) {
		t.Errorf("Actions is %v, the constants are %v", Actions, declared)
	}
}

// constant is a declared constant's name and value.
type constant struct{ name, value string }

// constants returns the constants of the named type declared in file, in their order.
func constants(t *testing.T, file, typ string) []constant {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []constant
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == typ {
				value, _ := strconv.Unquote(v.Values[0].(*ast.BasicLit).Value)
				out = append(out, constant{v.Names[0].Name, value})
			}
		}
	}
	return out
}
