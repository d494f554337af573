// Package controllers stands in for sigs.k8s.io/mcs-api/controllers, which the Go module proxy does not serve.
//
// Cilium's agent and operator import it only for the name of one annotation, used by multi-cluster services
// (cluster mesh), which the pod network built here leaves off.
package controllers

// DerivedServiceAnnotation names, on a ServiceImport, the Service derived from it.
const DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
