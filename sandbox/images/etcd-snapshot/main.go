// etcd-snapshot: the backup and restore half that lives in the etcd image.
//
//	etcd-snapshot save --cacert F --cert F --key F [--endpoint URL]
//	    streams a point-in-time snapshot of the member at URL to stdout, base64-encoded (exec streams are text).
//	etcd-snapshot restore --chunks DIR --sha256 HEX --data-dir DIR --name N --initial-cluster C
//	                      --initial-advertise-peer-urls U [--initial-cluster-token T]
//	    an init container: when DATA-DIR holds no member yet, joins DIR/chunk-* into the snapshot, checks its
//	    digest and restores it into DATA-DIR; a member that already has data is left alone.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: etcd-snapshot save|restore [flags]"))
	}
	var err error
	switch os.Args[1] {
	case "save":
		err = save(os.Args[2:])
	case "restore":
		err = restore(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want save or restore", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "etcd-snapshot:", err)
	os.Exit(1)
}

func save(args []string) error {
	fs := flag.NewFlagSet("save", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "https://127.0.0.1:2379", "client URL of the member")
	caFile := fs.String("cacert", "", "CA bundle that signed the member's certificate")
	certFile := fs.String("cert", "", "client certificate")
	keyFile := fs.String("key", "", "client key")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tlsConfig, err := clientTLS(*caFile, *certFile, *keyFile)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, TLS: tlsConfig,
		DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", *endpoint, err)
	}
	defer resp.Snapshot.Close()
	// The member's own digest trails the stream; restore checks it. The reader sees the version first.
	fmt.Fprintf(os.Stderr, "snapshot of etcd %s at revision %d\n", resp.Version, resp.Header.GetRevision())
	enc := base64.NewEncoder(base64.StdEncoding, os.Stdout)
	n, err := io.Copy(enc, resp.Snapshot)
	if err != nil {
		return fmt.Errorf("snapshot stream broke after %d bytes: %w", n, err)
	}
	if err := enc.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d bytes\n", n)
	return nil
}

func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" || certFile == "" || keyFile == "" {
		return nil, errors.New("--cacert, --cert and --key are required")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

func restore(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	chunks := fs.String("chunks", "", "directory with chunk-000, chunk-001, ... of the snapshot")
	digest := fs.String("sha256", "", "sha256 of the whole snapshot")
	dataDir := fs.String("data-dir", "", "the member's data directory")
	name := fs.String("name", "", "the member's name")
	initialCluster := fs.String("initial-cluster", "", "as etcd's --initial-cluster")
	peerURLs := fs.String("initial-advertise-peer-urls", "", "as etcd's --initial-advertise-peer-urls")
	token := fs.String("initial-cluster-token", "etcd-cluster", "as etcd's --initial-cluster-token")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for flagName, value := range map[string]string{"chunks": *chunks, "sha256": *digest, "data-dir": *dataDir,
		"name": *name, "initial-cluster": *initialCluster, "initial-advertise-peer-urls": *peerURLs} {
		if value == "" {
			return fmt.Errorf("--%s is required", flagName)
		}
	}
	if _, err := os.Stat(filepath.Join(*dataDir, "member")); err == nil {
		fmt.Fprintf(os.Stderr, "%s already holds a member: nothing to restore\n", *dataDir)
		return nil
	}
	parts, err := filepath.Glob(filepath.Join(*chunks, "chunk-*"))
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		// Starting empty would hand the tenant a blank cluster under its restored name.
		return fmt.Errorf("%s holds no member and %s no snapshot chunks: refusing to start empty", *dataDir, *chunks)
	}
	sort.Strings(parts)
	// Beside the data directory: the same volume, so a restore never fills the container's own disk.
	file, err := os.CreateTemp(filepath.Dir(filepath.Clean(*dataDir)), "restore-*.db")
	if err != nil {
		return err
	}
	defer os.Remove(file.Name())
	hash := sha256.New()
	for _, part := range parts {
		in, err := os.Open(part)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.MultiWriter(file, hash), in)
		in.Close()
		if err != nil {
			return err
		}
	}
	if err := file.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != strings.ToLower(*digest) {
		return fmt.Errorf("the snapshot from %d chunks has sha256 %s, want %s", len(parts), got, *digest)
	}
	// A partly restored directory from an earlier attempt is not a member yet: start it again.
	if err := os.RemoveAll(*dataDir); err != nil {
		return err
	}
	lg, err := zap.NewProduction()
	if err != nil {
		return err
	}
	err = snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{
		SnapshotPath: file.Name(), Name: *name, OutputDataDir: *dataDir,
		PeerURLs: strings.Split(*peerURLs, ","), InitialCluster: *initialCluster, InitialClusterToken: *token,
	})
	if err != nil {
		os.RemoveAll(*dataDir)
		return fmt.Errorf("restore into %s: %w", *dataDir, err)
	}
	fmt.Fprintf(os.Stderr, "restored %d chunks into %s as member %s\n", len(parts), *dataDir, *name)
	return nil
}
