// Command grpchealth is the gRPC server of staticlet's grpc probe tests: it
// serves the standard grpc.health.v1 service on -addr, reporting the server
// SERVING, and service "app" SERVING, or NOT_SERVING while the file -down
// names exists.
package main

import (
	"flag"
	"log"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "address to listen on")
	down := flag.String("down", "/tmp/down", "NOT_SERVING while this file exists")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	hs := health.NewServer()
	go func() {
		for {
			st := healthpb.HealthCheckResponse_SERVING
			if _, err := os.Stat(*down); err == nil {
				st = healthpb.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus("app", st)
			time.Sleep(100 * time.Millisecond)
		}
	}()
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	log.Fatal(srv.Serve(ln))
}
