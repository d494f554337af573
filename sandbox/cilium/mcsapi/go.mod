module sigs.k8s.io/mcs-api/controllers

go 1.23.0
