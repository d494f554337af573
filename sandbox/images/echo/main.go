// echo is the sandbox's test workload: it tells who answered and can fetch another URL,
// so tests can prove pod-to-pod and NodePort traffic without any image from a registry.
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := ":8080"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	host, _ := os.Hostname()
	client := &http.Client{Timeout: 5 * time.Second}
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
	log.Fatal(http.ListenAndServe(addr, nil))
}
