//go:build tools

// Pins Toxiproxy, the TCP proxy `make soak` puts between each operator
// replica and the API server to inject latency, resets and partitions;
// scripts/toxiproxy.sh builds ./cmd/server from this module.
package tools

import _ "github.com/Shopify/toxiproxy/v2/cmd/server"
