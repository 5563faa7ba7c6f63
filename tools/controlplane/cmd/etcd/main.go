// Command etcd runs the etcd server from the go.etcd.io/etcd/server/v3 module.
//
// etcd's own main package cannot be installed with `go install pkg@version`
// because its go.mod carries replace directives; wrapping etcdmain here lets
// this module build it like any other dependency.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
