// echo is the sandbox's test workload: it tells who answered and can fetch another URL,
// so tests can prove pod-to-pod and NodePort traffic without any image from a registry.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// A new connection per fetch: a kept-alive one would send every fetch of a Service to the same endpoint.
var client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// `echo fetch URL` and `echo resolve NAME` do once, from inside the pod (through kubectl exec), what /fetch and
// /resolve do over HTTP: for clusters whose API server cannot proxy to pod addresses.
func command(args []string) int {
	switch {
	case len(args) == 2 && args[0] == "fetch":
		resp, err := client.Get(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer resp.Body.Close()
		io.Copy(os.Stdout, io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode/100 != 2 {
			return 1
		}
		return 0
	case len(args) == 2 && args[0] == "resolve":
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, args[1])
		var dnsErr *net.DNSError
		switch {
		case err == nil:
			fmt.Println(strings.Join(addrs, " "))
			return 0
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			fmt.Fprintln(os.Stderr, err)
			return 2
		default:
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Fprintln(os.Stderr, "usage: echo [ADDR] | echo fetch URL | echo resolve NAME")
	return 64
}

func main() {
	addr := ":8080"
	if len(os.Args) > 2 {
		os.Exit(command(os.Args[1:]))
	}
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s pod_ip=%s node=%s\n", host, os.Getenv("POD_IP"), os.Getenv("NODE_NAME"))
	})
	// /fetch?url=http://10.0.0.5:8080/ returns what that URL answered, as seen from this pod.
	http.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		resp, err := client.Get(r.URL.Query().Get("url"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, io.LimitReader(resp.Body, 1<<20))
	})
	// /resolve?name=kubernetes.default looks the name up with the pod's resolv.conf: 200 and the addresses,
	// or 404 (no such name) or 502 (any other failure) and the error.
	http.HandleFunc("/resolve", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, r.URL.Query().Get("name"))
		var dnsErr *net.DNSError
		switch {
		case err == nil:
			fmt.Fprintln(w, strings.Join(addrs, " "))
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			http.Error(w, err.Error(), http.StatusNotFound)
		default:
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	})
	// /validate answers an admission review: it refuses every object, naming the pod that refused it, so a test
	// sees that its API server reached this pod.
	http.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			Request struct {
				UID string `json:"uid"`
			} `json:"request"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
			"response": map[string]any{"uid": review.Request.UID, "allowed": false,
				"status": map[string]any{"code": 403, "message": "refused by " + host}},
		})
	})
	// TLS (for admission webhooks) when the pod gives a certificate and key.
	if cert, key := os.Getenv("ECHO_TLS_CERT"), os.Getenv("ECHO_TLS_KEY"); cert != "" && key != "" {
		log.Fatal(http.ListenAndServeTLS(addr, cert, key, nil))
	}
	log.Fatal(http.ListenAndServe(addr, nil))
}
