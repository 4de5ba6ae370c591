// Command etcd is the upstream etcd server, built from the
// go.etcd.io/etcd/server/v3 Go module pinned in ./go.mod (a separate module so
// etcd's dependency versions never clash with Kubernetes'). It mirrors
// go.etcd.io/etcd/server/v3/main.go.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
