package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdplan/etcdplan/test/framework"
)

// kvInput and kvOutput are one client operation on one key: a put, a linearizable get, or a
// compare-and-swap (put value if the key holds expect; "" means absent).
type kvInput struct {
	op, key, value, expect string
}

type kvOutput struct {
	value   string // what a get read
	ok      bool   // whether a compare-and-swap swapped
	unknown bool   // the call failed or timed out: it may or may not have taken effect
}

// kvModel is etcd as a map of registers, one partition per key. A put or swap whose outcome
// is unknown may take effect at any time after its call, or never.
var kvModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(string), input.(kvInput), output.(kvOutput)
		switch in.op {
		case "get":
			if out.value == s {
				return []any{s}
			}
			return nil
		case "put":
			return []any{in.value}
		}
		switch { // cas
		case out.unknown && s == in.expect:
			return []any{s, in.value}
		case out.unknown:
			return []any{s}
		case out.ok && s == in.expect:
			return []any{in.value}
		case !out.ok && s != in.expect:
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		switch {
		case out.unknown:
			return fmt.Sprintf("%s(%s, %q) -> ?", in.op, in.key, in.value)
		case in.op == "get":
			return fmt.Sprintf("get(%s) -> %q", in.key, out.value)
		case in.op == "put":
			return fmt.Sprintf("put(%s, %q)", in.key, in.value)
		}
		return fmt.Sprintf("cas(%s, %q -> %q) -> %t", in.key, in.expect, in.value, out.ok)
	},
}

// kvClients run concurrent puts, linearizable gets and compare-and-swaps on a few keys against
// a cluster and record the history for porcupine. Reads that fail are left out (they change
// nothing); writes that fail or time out (2 s) are recorded with an unknown outcome.
type kvClients struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	start  time.Time
	ops    []porcupine.Operation
	// clusterID is the cluster every answer must come from; prefix keeps the keys apart
	// from other tests' clusters, which may answer at a reused Pod IP.
	clusterID, prefix string
}

const chaosKeys = 3

func startClients(t *testing.T, ns, cluster string, n int, seed uint64) *kvClients {
	ctx, cancel := context.WithCancel(context.Background())
	cs := &kvClients{cancel: cancel, start: time.Now(), clusterID: framework.Get(t, ns, cluster).Status.ClusterID, prefix: "/chaos/" + ns + "/"}
	for id := 0; id < n; id++ {
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			cs.run(ctx, t, ns, cluster, id, rand.New(rand.NewPCG(seed, uint64(id))))
		}()
	}
	return cs
}

func (cs *kvClients) run(ctx context.Context, t *testing.T, ns, cluster string, id int, rng *rand.Rand) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: framework.Endpoints(t, ns, cluster), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return
	}
	defer cli.Close()
	last := map[string]string{}
	for i := 0; ctx.Err() == nil; i++ {
		if i%20 == 0 {
			if eps := framework.Endpoints(t, ns, cluster); len(eps) > 0 {
				cli.SetEndpoints(eps...)
			}
		}
		key := fmt.Sprintf("%sk%d", cs.prefix, rng.IntN(chaosKeys))
		in := kvInput{key: key, value: fmt.Sprintf("c%d-%d", id, i), expect: last[key]}
		switch r := rng.IntN(10); {
		case r < 4:
			in.op = "put"
		case r < 8:
			in.op = "get"
		default:
			in.op = "cas"
		}
		call := time.Since(cs.start).Nanoseconds()
		out, err := cs.do(ctx, cli, in)
		ret := time.Since(cs.start).Nanoseconds()
		if ctx.Err() != nil && err != nil {
			return // stopped mid-call: the call says nothing
		}
		switch {
		case err != nil && in.op == "get":
			continue
		case err != nil:
			out, ret = kvOutput{unknown: true}, math.MaxInt64
		case in.op == "get":
			last[key] = out.value
		}
		cs.mu.Lock()
		cs.ops = append(cs.ops, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
		cs.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

func (cs *kvClients) do(ctx context.Context, cli *clientv3.Client, in kvInput) (kvOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	switch in.op {
	case "get":
		resp, err := cli.Get(ctx, in.key)
		if err == nil {
			err = framework.SameCluster(resp.Header, cs.clusterID)
		}
		if err != nil || len(resp.Kvs) == 0 {
			return kvOutput{}, err
		}
		return kvOutput{value: string(resp.Kvs[0].Value)}, nil
	case "put":
		resp, err := cli.Put(ctx, in.key, in.value)
		if err == nil {
			err = framework.SameCluster(resp.Header, cs.clusterID)
		}
		return kvOutput{}, err
	}
	cmp := clientv3.Compare(clientv3.Value(in.key), "=", in.expect)
	if in.expect == "" {
		cmp = clientv3.Compare(clientv3.Version(in.key), "=", 0)
	}
	resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(in.key, in.value)).Commit()
	if err == nil {
		err = framework.SameCluster(resp.Header, cs.clusterID)
	}
	if err != nil {
		return kvOutput{}, err
	}
	return kvOutput{ok: resp.Succeeded}, nil
}

// stop ends the clients and returns the history.
func (cs *kvClients) stop() []porcupine.Operation {
	cs.cancel()
	cs.wg.Wait()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.ops
}
