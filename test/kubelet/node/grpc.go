package node

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
)

// grpcHealth runs a gRPC health check against the Pod, as the kubelet's gRPC probe does
// (plaintext, the standard health service).
func (c *container) grpcHealth(ctx context.Context, g *v1.GRPCAction) error {
	addr := net.JoinHostPort(c.podIP(), strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("gRPC health: %s", resp.Status)
	}
	return nil
}
